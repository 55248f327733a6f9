"""The agent the kill tests run in real processes, with a SIGKILL wherever `MAITRE_KILL` says.

`MAITRE_KILL` (only in the process to kill):

- `model:N`            inside the N-th model call of this process
- `before:TOOL`        inside TOOL, before its side effect
- `inside:TOOL`        inside TOOL, after its side effect (the ledger line is written), before it returns
- `after:TOOL`         after the gate finished TOOL (key completed, audited), before DBOS recorded the step
- `paused`             right after the run paused for an approval (the run's workflow has returned)

The ledger (`MAITRE_LEDGER`) gets one line per real side effect (tool, key, run id, ...); the model
log (`MAITRE_MODEL_LOG`) one line per model call that really ran (pid, count, goal). The model is scripted and deterministic: a run that is
never killed gives the same answer.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from maitre import Toolbox
from maitre.agent import Agent, Limits
from maitre.context import IdempotencyKey, RunContext
from maitre.gate import Gate
from maitre.models.base import ModelRequest, ModelResponse, Usage
from maitre.types import ToolCall, ToolResult

FLIGHT = {"flight": "AI-101", "day": "2026-12-24"}


def _kill(point: str, run: RunContext | None = None) -> None:
    """SIGKILL this process at `point` when MAITRE_KILL names it (`POINT` or `POINT@RUN_ID`)."""
    wanted = os.environ.get("MAITRE_KILL", "")
    at, _, run_id = wanted.partition("@")
    if at == point and (not run_id or (run is not None and run.run_id == run_id)):
        os.kill(os.getpid(), signal.SIGKILL)


def _ledger() -> Path:
    return Path(os.environ["MAITRE_LEDGER"])


def _effects(tool: str) -> list[str]:
    path = _ledger()
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line.startswith(tool + " ")]


def box() -> Toolbox:
    tools = Toolbox("trip")

    @tools.tool
    def find_flight(day: str) -> dict[str, Any]:
        """Find the flight for a day."""
        return {"flight": FLIGHT["flight"], "day": day, "fare_inr": 5400}

    def reconcile_booking(key: IdempotencyKey) -> str | None:
        for line in _effects("book_flight"):
            if line.split(" ")[1] == str(key):
                return f"Booked {line.split(' ')[3]} (reference {str(key)[-8:]})."
        return None

    @tools.tool(effect="write", reconcile=reconcile_booking)
    def book_flight(flight: str, day: str, key: IdempotencyKey, run: RunContext) -> str:
        """Book a seat on a flight (has a reconcile check)."""
        _kill("before:book_flight", run)
        with _ledger().open("a") as f:
            f.write(f"book_flight {key} {run.run_id} {flight} {day}\n")
        _kill("inside:book_flight", run)
        return f"Booked {flight} (reference {str(key)[-8:]})."

    @tools.tool(effect="write")
    def charge_card(amount_inr: int, key: IdempotencyKey, run: RunContext) -> str:
        """Charge the card (no reconcile check: an in-doubt charge needs a person)."""
        with _ledger().open("a") as f:
            f.write(f"charge_card {key} {run.run_id} {amount_inr}\n")
        _kill("inside:charge_card", run)
        return f"Charged {amount_inr} INR."

    @tools.tool(effect="write", requires_approval=True)
    def upgrade_seat(flight: str, key: IdempotencyKey, run: RunContext) -> str:
        """Upgrade the seat (needs approval)."""
        with _ledger().open("a") as f:
            f.write(f"upgrade_seat {key} {run.run_id} {flight}\n")
        _kill("inside:upgrade_seat", run)
        return f"Upgraded on {flight}."

    return tools


class KillGate(Gate):
    async def call(self, call: ToolCall, *args: Any, **kwargs: Any) -> ToolResult:
        result = await super().call(call, *args, **kwargs)
        run = args[1] if len(args) > 1 else kwargs.get("run")
        _kill(f"after:{call.name.rsplit('.', 1)[-1]}", run)
        return result


class TripModel:
    """find_flight -> book_flight -> charge_card -> [upgrade_seat] -> answer (by what the goal asks);
    with "together" in the goal, find_flight and book_flight come in one step."""

    name = "scripted-trip"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        goal = next(getattr(m, "content", "") for m in request.messages if getattr(m, "role", "") == "user")
        log = os.environ.get("MAITRE_MODEL_LOG")
        if log:
            with open(log, "a") as f:  # noqa: ASYNC230 - a line, in a test
                f.write(f"{os.getpid()} {self.calls} {goal}\n")
        _kill(f"model:{self.calls}")
        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        step = len(done)
        plan: list[tuple[str, dict[str, Any]]] = [("trip.find_flight", {"day": FLIGHT["day"]})]
        plan.append(("trip.book_flight", dict(FLIGHT)))
        if "charge" in goal:
            plan.append(("trip.charge_card", {"amount_inr": 5400}))
        if "upgrade" in goal:
            plan.append(("trip.upgrade_seat", {"flight": FLIGHT["flight"]}))
        usage = Usage(input_tokens=10, output_tokens=5)
        if "together" in goal and step == 0:  # two calls in one step: the gate runs them in order
            calls = [
                ToolCall(id=f"call_{i}", name=name, arguments=args) for i, (name, args) in enumerate(plan[:2])
            ]
            return ModelResponse(tool_calls=calls, usage=usage, stop_reason="tool_use", model="scripted")
        if step < len(plan):
            name, arguments = plan[step]
            return ModelResponse(
                tool_calls=[ToolCall(id=f"call_{step}", name=name, arguments=arguments)],
                usage=usage,
                stop_reason="tool_use",
                model="scripted",
            )
        text = " | ".join(getattr(m, "content", "") for m in done)
        return ModelResponse(text=f"Done: {text}", usage=usage, model="scripted")


def make_agent(stores: Any) -> Agent:
    gate = KillGate(box(), stores=stores)
    return Agent(TripModel(), gate=gate, limits=Limits(max_steps=8))
