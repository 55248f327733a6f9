"""Sagas: a host groups calls, and when one fails for good the runtime compensates - never the model.

Seed 003 §6: an operation that cannot roll back ("book flight and create calendar event") gets a
compensating action, "deterministic software design, never generated ad hoc by LLMs". Here:

```python
compensates(box.get("trip.book_flight"), cancel_box.get("trip.cancel_flight"))

async with Saga(gate, alice, saga_id="trip-42") as saga:
    await saga.call("trip.book_flight", {"flight": "AI-101"})
    await saga.call("trip.create_event", {"title": "Pune trip"}, policy=RETRY_THEN_COMPENSATE)
saga.outcome.status        # "completed", "compensated" or "needs_human"
```

- A tool declares its compensation once (`compensates(tool, compensation)`, the attribute
  `Tool.compensate`); the compensation is itself a governed tool, called with the original call's
  arguments (those it declares) and `result`, the original call's result text.
- Each step has a policy: retry a failed call up to `retries` times (a failure the gate marks not
  retryable is not retried), then either compensate the completed steps in reverse order
  (`on_failure="compensate"`) or leave them as they are and flag the saga for a person
  (`on_failure="flag"`: seed 003's "without cancelling confirmed flight tickets").
- Compensations run through the gate, under a gate of their own (same stores, same policy) whose
  toolbox holds only compensations: no model-facing toolbox offers them, so a model can neither
  call nor skip one. Their idempotency keys are minted by the runtime from the saga id and the
  arguments, so running the saga again with its id replays what already ran - steps and
  compensations - instead of running it twice; every call is audited by the gate.
- A compensation that fails, needs an approval, or is in doubt stops the saga as `needs_human`
  with that compensation named; the earlier ones are not run past it (never skipped).
- A step whose write is in doubt (an attempt was interrupted, no reconcile hook) stops the saga as
  `needs_human` without compensating: nobody knows whether it happened.
- A call that another run of the same saga (same id) is executing right now is waited for, within
  the call's lease, and its stored result taken: it is not a failure, so it is neither retried
  nor compensated (that would undo a step the other run completes).

With a `DurableGate` inside a DBOS workflow every call of the saga is a recorded step; a call the
durable gate stops as in doubt (`NeedsHuman`: a write that broke or was interrupted, no reconcile
check) ends the saga as `needs_human` like any in-doubt call, instead of escaping the saga.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import anyio

from ..context import RunContext, new_run_id
from ..exceptions import UserError
from ..gate import Gate
from ..gate.idempotency import call_lease_s
from ..tools import Tool, Toolbox
from ..tools.tool import COMPENSATION_RESULT
from ..types import Principal, ToolCall, ToolResult
from .agent import SAGA_RUN_PREFIX as _SAGA_RUN_PREFIX
from .agent import DurableGate, NeedsHuman, _in_flight_elsewhere, in_doubt

__all__ = [
    "FLAG_FOR_HUMAN",
    "RESULT_PARAMETER",
    "RETRY_THEN_COMPENSATE",
    "SAGA_RUN_PREFIX",
    "Saga",
    "SagaFailed",
    "SagaOutcome",
    "SagaStep",
    "StepPolicy",
    "compensates",
    "compensation_of",
]

logger = logging.getLogger("maitre.durable.saga")

SAGA_RUN_PREFIX = _SAGA_RUN_PREFIX
"""The run id a saga's calls carry is this followed by the saga id (a durable run id may not start
with it), so an agent run whose id is the saga's shares no idempotency key with the saga."""

RESULT_PARAMETER = COMPENSATION_RESULT
"""The compensation's parameter that receives the original call's result text."""


@dataclass(frozen=True, kw_only=True)
class StepPolicy:
    """What a saga does when a step fails."""

    retries: int = 0
    """Attempts after the first, for failures the gate says are retryable."""
    on_failure: Literal["compensate", "flag"] = "compensate"
    """`compensate`: undo the completed steps in reverse order. `flag`: keep them, flag a person."""

    def __post_init__(self) -> None:
        if not 0 <= self.retries <= 10:
            raise UserError("StepPolicy.retries must be between 0 and 10")
        if self.on_failure not in ("compensate", "flag"):
            raise UserError("StepPolicy.on_failure must be 'compensate' or 'flag'")


RETRY_THEN_COMPENSATE = StepPolicy(retries=2, on_failure="compensate")
FLAG_FOR_HUMAN = StepPolicy(retries=2, on_failure="flag")


def compensates(tool: Tool, compensation: Tool) -> Tool:
    """Declare `compensation` as what undoes `tool` (`Tool.declare_compensation`; the same as
    `@box.tool(compensate=...)`); returns `tool`."""
    return tool.declare_compensation(compensation)


def compensation_of(tool: Tool) -> Tool | None:
    """The compensation `tool` declares, or None."""
    return tool.compensate


@dataclass(kw_only=True)
class SagaStep:
    """One step of a saga, as it went."""

    index: int
    tool: str
    arguments: dict[str, Any]
    status: Literal["done", "failed", "in_doubt", "needs_approval", "compensated", "kept"] = "failed"
    attempts: int = 0
    result: ToolResult | None = None
    compensation: ToolResult | None = None
    """The compensation's result, once it ran."""


@dataclass(kw_only=True)
class SagaOutcome:
    saga_id: str
    status: Literal["running", "completed", "compensated", "needs_human"] = "running"
    steps: list[SagaStep] = field(default_factory=list)
    reason: str = ""
    """Why it did not complete (empty when it did)."""


class SagaFailed(Exception):
    """Raised by `Saga.call` when a step failed for good; `outcome` says what the runtime did."""

    def __init__(self, outcome: SagaOutcome) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


class Saga:
    """A host's block of calls with per-step policies and runtime-run compensations.

    Args:
        gate: the gate the steps go through (a `DurableGate` inside a workflow records them).
        principal: who the saga acts for.
        saga_id: names the saga's run: the same id replays what already ran (default: a new id).
        policy: the default policy of each step.
    """

    def __init__(
        self,
        gate: Gate | DurableGate,
        principal: Principal,
        *,
        saga_id: str | None = None,
        policy: StepPolicy = StepPolicy(),
    ) -> None:
        self.gate = gate
        self.principal = principal
        self.saga_id = saga_id or new_run_id()
        self.policy = policy
        self.outcome = SagaOutcome(saga_id=self.saga_id)
        self._compensation_gate: Gate | DurableGate | None = None

    async def __aenter__(self) -> Saga:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if exc is None:
            if self.outcome.status == "running":
                self.outcome.status = "completed"
            return False
        if isinstance(exc, SagaFailed) and exc.outcome is self.outcome:
            return True  # the saga ended as its outcome says; the host reads `saga.outcome`
        if isinstance(exc, Exception) and self.outcome.status == "running":
            # the host's own code failed inside the block: undo what the saga did, as for a step
            logger.warning("saga %s: the block raised %s; compensating", self.saga_id, type(exc).__name__)
            await self._compensate(f"the host's block raised {type(exc).__name__}")
        return False

    def _tool(self, name: str) -> Tool:
        toolbox: Toolbox = self.gate.toolbox
        tool = toolbox.get(name)
        if tool is None:
            raise UserError(f"no tool {name!r} in the saga's gate")
        return tool

    def _context(self) -> RunContext:
        # A fresh context per attempt: a retry is the saga's decision, not a loop to guard against;
        # the idempotency key is minted from the saga id and the arguments, the same every time.
        # The saga's own run id, apart from agent runs': a run started under the saga's id must not
        # replay the saga's calls (a booking the saga has since cancelled, reported as booked).
        return RunContext(run_id=SAGA_RUN_PREFIX + self.saga_id, principal=self.principal)

    async def call(
        self, tool: str, arguments: dict[str, Any], *, policy: StepPolicy | None = None
    ) -> ToolResult:
        """Run one step; on its final failure apply `policy` and raise `SagaFailed`."""
        if self.outcome.status != "running":
            raise SagaFailed(self.outcome)
        chosen = policy or self.policy
        self._tool(tool)  # an unknown tool is the host's mistake, before anything runs
        step = SagaStep(index=len(self.outcome.steps), tool=tool, arguments=dict(arguments))
        self.outcome.steps.append(step)
        for attempt in range(1 + chosen.retries):
            step.attempts = attempt + 1
            call = ToolCall(id=f"{self.saga_id}:{step.index}:{attempt}", name=tool, arguments=dict(arguments))
            try:
                result = await self._settled(self.gate, call)
            except NeedsHuman as stop:  # a durable gate's write in doubt: the saga stops, uncompensated
                step.status = "in_doubt"
                return await self._flag(f"{tool} may or may not have taken effect: {stop.info.message}")
            step.result = result
            if not result.is_error:
                step.status = "done"
                return result
            if result.approval is not None:
                step.status = "needs_approval"
                return await self._flag(f"{tool} needs a person's approval ({result.approval.approval_id})")
            if in_doubt(result):
                step.status = "in_doubt"
                return await self._flag(f"{tool} may or may not have taken effect (interrupted); check it")
            if _in_flight_elsewhere(result):
                step.status = "in_doubt"
                return await self._flag(f"{tool} is still running in another run of this saga; check it")
            if result.error is None or not result.error.retryable:
                break
        step.status = "failed"
        why = f"{tool} failed after {step.attempts} attempt(s): {result.content[:200]}"
        if chosen.on_failure == "flag":
            for earlier in self.outcome.steps[:-1]:
                if earlier.status == "done":
                    earlier.status = "kept"
            return await self._flag(why + "; the completed steps were kept")
        await self._compensate(why)
        raise SagaFailed(self.outcome)

    async def _settled(self, gate: Gate | DurableGate, call: ToolCall) -> ToolResult:
        """The call's result once no other run of this saga (same id, same arguments: the same
        idempotency key) has it in flight. A call another run is executing is not a failure to
        retry or compensate - compensating then would undo a step that goes through - so the saga
        waits for it (within the call's lease) and gets its stored result."""
        result = await gate.call(call, self.principal, self._context())
        if not _in_flight_elsewhere(result):
            return result
        tool = gate.toolbox.get(call.name)
        limit = call_lease_s(tool, gate.limits) + 1.0 if tool is not None else 0.0
        deadline = time.monotonic() + limit
        while _in_flight_elsewhere(result) and time.monotonic() < deadline:
            error = result.error
            assert error is not None
            await anyio.sleep(max(0.05, min(error.retry_after_s or 0.2, 0.2, deadline - time.monotonic())))
            result = await gate.call(call, self.principal, self._context())
        return result

    async def _flag(self, reason: str) -> ToolResult:
        self.outcome.status = "needs_human"
        self.outcome.reason = reason
        logger.warning("saga %s needs a person: %s", self.saga_id, reason)
        raise SagaFailed(self.outcome)

    def _compensations(self) -> Gate | DurableGate:
        if self._compensation_gate is None:
            tools = Toolbox()
            for step in self.outcome.steps:
                compensation = compensation_of(self._tool(step.tool))
                if compensation is not None and tools.get(compensation.name) is None:
                    tools.add(compensation)
            inner = self.gate.inner if isinstance(self.gate, DurableGate) else self.gate
            gate = Gate(tools, policy=inner.policy, stores=inner.stores)
            self._compensation_gate = DurableGate(gate) if isinstance(self.gate, DurableGate) else gate
        return self._compensation_gate

    async def _compensate(self, reason: str) -> None:
        """Undo the completed steps, last first; stop (never skip) at one that does not go through."""
        self.outcome.reason = reason
        gate = self._compensations()
        for step in reversed(self.outcome.steps):
            if step.status != "done":
                continue
            compensation = compensation_of(self._tool(step.tool))
            if compensation is None:
                self.outcome.status = "needs_human"
                self.outcome.reason = f"{reason}; {step.tool} declares no compensation and is still done"
                return
            arguments = {k: v for k, v in step.arguments.items() if k in compensation.argument_names}
            if RESULT_PARAMETER in compensation.argument_names:
                arguments[RESULT_PARAMETER] = step.result.content if step.result is not None else ""
            call = ToolCall(
                id=f"{self.saga_id}:{step.index}:compensate", name=compensation.name, arguments=arguments
            )
            try:
                result = await self._settled(gate, call)
            except NeedsHuman as stop:
                self.outcome.status = "needs_human"
                self.outcome.reason = (
                    f"{reason}; the compensation {compensation.name} of {step.tool} may or may not have "
                    f"taken effect: {stop.info.message}"
                )
                logger.warning("saga %s needs a person: %s", self.saga_id, self.outcome.reason)
                return
            step.compensation = result
            if result.is_error:
                what = (
                    "needs a person's approval"
                    if result.approval is not None
                    else "may or may not have taken effect"
                    if in_doubt(result)
                    else "is still running in another run of this saga"
                    if _in_flight_elsewhere(result)
                    else f"failed: {result.content[:200]}"
                )
                self.outcome.status = "needs_human"
                self.outcome.reason = f"{reason}; the compensation {compensation.name} of {step.tool} {what}"
                logger.warning("saga %s needs a person: %s", self.saga_id, self.outcome.reason)
                return
            step.status = "compensated"
        self.outcome.status = "compensated"
