"""Sagas: seed 003's flight + calendar with a failing calendar, in both policies, and what must hold."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from maitre import Principal, Toolbox, ToolError
from maitre.agent import Agent, Limits
from maitre.audit import verify_store
from maitre.durable.saga import (
    FLAG_FOR_HUMAN,
    RETRY_THEN_COMPENSATE,
    Saga,
    StepPolicy,
    compensates,
    compensation_of,
)
from maitre.exceptions import UserError
from maitre.gate import Gate
from maitre.models.base import ModelRequest, ModelResponse
from maitre.stores import open_stores
from maitre.types import ToolCall

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saga" / "trip.py"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("saga_trip_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["saga_trip_example"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TRIP_LEDGER", str(tmp_path / "ledger.txt"))
    return _example()


def lines(tmp_path: Path, prefix: str) -> int:
    path = tmp_path / "ledger.txt"
    return sum(1 for line in path.read_text().splitlines() if line.startswith(prefix)) if path.exists() else 0


async def test_failing_calendar_retried_then_the_flight_is_cancelled_once_by_the_runtime(tmp_path, trip):
    box = trip.toolbox()
    async with await open_stores(str(tmp_path / "m.db")) as stores:
        gate = Gate(box, stores=stores)
        outcome = await trip.plan_trip(gate, policy="compensate", saga_id="trip-1")
        assert outcome.status == "compensated"
        assert [s.status for s in outcome.steps] == ["compensated", "failed"]
        assert outcome.steps[1].attempts == 3  # retried twice, then compensated
        assert lines(tmp_path, "booked") == 1 and lines(tmp_path, "calendar-attempt") == 3
        assert lines(tmp_path, "cancelled") == 1
        # the compensation got the booking's arguments and its result
        assert "PNR" in (tmp_path / "ledger.txt").read_text().splitlines()[-1]

        # Run again under the same id (a host retrying, or after a crash): nothing twice.
        again = await trip.plan_trip(gate, policy="compensate", saga_id="trip-1")
        assert again.status == "compensated"
        assert again.steps[0].result is not None and again.steps[0].result.replayed
        assert again.steps[0].compensation is not None and again.steps[0].compensation.replayed
        assert lines(tmp_path, "booked") == 1 and lines(tmp_path, "cancelled") == 1

        entries = await stores.audit.entries(since_seq=0)
        assert [e.tool for e in entries].count("trip.cancel_flight") == 2  # ran, then replayed: both audited
        assert (await verify_store(stores.audit)).ok


async def test_failing_calendar_flagged_for_a_person_keeps_the_confirmed_flight(tmp_path, trip):
    box = trip.toolbox()
    async with await open_stores(str(tmp_path / "m.db")) as stores:
        outcome = await trip.plan_trip(Gate(box, stores=stores), policy="flag", saga_id="trip-2")
        assert outcome.status == "needs_human"
        assert "kept" in outcome.reason and "calendar service is down" in outcome.reason
        assert [s.status for s in outcome.steps] == ["kept", "failed"]
        assert lines(tmp_path, "booked") == 1 and lines(tmp_path, "cancelled") == 0
        assert (await verify_store(stores.audit)).ok


class _Greedy:
    """A model that tries to run the compensation itself, then answers."""

    name = "greedy"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not any(getattr(m, "role", "") == "tool" for m in request.messages):
            call = ToolCall(
                id="c1",
                name="trip.cancel_flight",
                arguments={"flight": "AI-101", "day": "2026-12-24", "result": "x"},
            )
            return ModelResponse(tool_calls=[call], stop_reason="tool_use")
        return ModelResponse(text="ok")


async def test_a_model_cannot_invoke_a_compensation(tmp_path, trip):
    box = trip.toolbox()
    agent = Agent(_Greedy(), box, limits=Limits(max_steps=3))
    run = await agent.run("cancel my flight", ALICE)
    assert run.status == "finished"
    result = next(m for m in run.messages if getattr(m, "role", "") == "tool")
    assert result.is_error  # not a tool the model can reach
    assert "trip.cancel_flight" not in [t.name for t in agent.visible_tools(run)]
    assert lines(tmp_path, "cancelled") == 0


def _three_steps(ledger: list[str], *, failing_undo: bool = False, approval: bool = False) -> Toolbox:
    box, undo = Toolbox("s"), Toolbox("s")

    @box.tool(effect="write")
    def first(n: int) -> str:
        """First."""
        ledger.append(f"first {n}")
        return "first done"

    @box.tool(effect="write")
    def second(n: int) -> str:
        """Second."""
        ledger.append(f"second {n}")
        return "second done"

    @box.tool(effect="write")
    def third(n: int) -> str:
        """Third: always fails for good."""
        raise ToolError("INVALID_ARGUMENTS", "no")

    @undo.tool(effect="write")
    def undo_first(n: int, result: str) -> str:
        """Undo first."""
        ledger.append(f"undo first {n} {result}")
        return "undone"

    @undo.tool(effect="write", requires_approval=approval)
    def undo_second(n: int) -> str:
        """Undo second."""
        if failing_undo:
            raise ToolError("INVALID_ARGUMENTS", "cannot undo")
        ledger.append(f"undo second {n}")
        return "undone"

    compensates(box.get("s.first"), undo.get("s.undo_first"))  # type: ignore[arg-type]
    compensates(box.get("s.second"), undo.get("s.undo_second"))  # type: ignore[arg-type]
    return box


async def _saga(box: Toolbox) -> Any:
    async with Saga(Gate(box), ALICE, saga_id="s-1") as saga:
        await saga.call("s.first", {"n": 1})
        await saga.call("s.second", {"n": 2})
        await saga.call("s.third", {"n": 3}, policy=RETRY_THEN_COMPENSATE)
    return saga.outcome


async def test_compensations_run_last_first():
    ledger: list[str] = []
    outcome = await _saga(_three_steps(ledger))
    assert outcome.status == "compensated"
    assert ledger == ["first 1", "second 2", "undo second 2", "undo first 1 first done"]
    assert outcome.steps[2].attempts == 1  # a failure that is not retryable is not retried


@pytest.mark.parametrize("kind", ["fails", "needs approval"])
async def test_a_compensation_that_does_not_go_through_stops_the_saga_and_is_never_skipped(kind):
    ledger: list[str] = []
    box = _three_steps(ledger, failing_undo=kind == "fails", approval=kind == "needs approval")
    outcome = await _saga(box)
    assert outcome.status == "needs_human"
    assert "s.undo_second" in outcome.reason
    assert ledger == ["first 1", "second 2"]  # undo_first was not run past the stuck one
    assert [s.status for s in outcome.steps] == ["done", "done", "failed"]


async def test_the_host_block_raising_compensates_what_was_done():
    ledger: list[str] = []
    box = _three_steps(ledger)
    with pytest.raises(RuntimeError):
        async with Saga(Gate(box), ALICE, saga_id="s-2", policy=FLAG_FOR_HUMAN) as saga:
            await saga.call("s.first", {"n": 1})
            raise RuntimeError("host bug")
    assert saga.outcome.status == "compensated"
    assert ledger == ["first 1", "undo first 1 first done"]


def test_declaring_a_compensation_is_checked(trip):
    box = trip.toolbox()
    booking = box.get("trip.book_flight")
    cancel = compensation_of(booking)
    # @box.tool(compensate=fn): a governed write of the box's namespace that is in no toolbox
    assert cancel is not None and cancel.name == "trip.cancel_flight" and cancel.effect == "write"
    assert "trip.cancel_flight" not in box and cancel.argument_names == ["flight", "day", "result"]
    with pytest.raises(UserError, match="nothing to compensate"):
        read = Toolbox()

        @read.tool
        def look(flight: str) -> str:
            """Look."""
            return flight

        compensates(read.get("look"), cancel)  # type: ignore[arg-type]
    other = Toolbox()

    @other.tool(effect="write")
    def refund(order_id: str) -> str:
        """Refund."""
        return order_id

    with pytest.raises(UserError, match="does not have"):
        compensates(booking, other.get("refund"))  # type: ignore[arg-type]
    with pytest.raises(UserError):
        StepPolicy(retries=11)
    with pytest.raises(UserError, match="does not have"):

        def undo_refund(order_id: str, amount: str) -> str:
            """Undo."""
            return order_id

        other.add_tool(refund, name="refund_again", effect="write", compensate=undo_refund)
    assert "refund_again" not in other  # a refused declaration adds nothing
