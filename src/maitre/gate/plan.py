"""A tool's plan: the stages that can act on its calls, built once and reused for every call.

Most stages cannot act on most tools: a read tool has no idempotency key to mint, a tool the
policy allows outright (by its metadata alone, `Policy.static_decision`) and that has no owner
check never reaches an approval, and with no budget that can apply there is nothing to count. So
after `resolve` has found the tool, the gate runs that tool's plan, not the whole list:

- each of the gate's own stages decides for itself, per tool, whether it is in the plan (and the
  ones that never wait are called as plain functions, without a coroutine);
- a host's stage is always in the plan, unless it declares `applies(tool, gate) -> bool`
  (`ApplicableStage`) and says no;
- when a host's stage is in the list, the approval stage stays in every plan: a host stage may ask
  for an approval (`ctx.decision = Decision.APPROVAL_REQUIRED`) that the policy did not.

A plan is rebuilt when the toolbox changes (`Toolbox.subscribe`) and when the gate's policy,
budgets, stages or toolbox are replaced. A policy or budgets object mutated in place is not seen;
assign a new one (the same rule as for the policy's cached per-tool decisions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..policy import Action, PolicyDecision
from ..tools import Tool
from ..types import ToolError, ToolResult
from .approval import approval
from .authorize import authorize
from .base import ApplicableStage, CallContext, SettlingStage, Stage
from .budget import bucket_for, budget, budget_counts, can_limit, charge_now
from .decode import decode, decode_now
from .execute import execute
from .idempotency import idempotency, needs_key
from .loop_guard import confirm_loop_guard, confirm_now, loop_guard, loop_guard_now
from .resolve import resolve, resolve_now
from .validate import check_invalid_budget, invalid_budget_now, validate, validate_now, validate_step

if TYPE_CHECKING:
    from .pipeline import Gate

__all__ = ["Plan", "Settler", "Step", "SyncStep", "build_plan", "steps_of"]

SyncStep = Callable[[CallContext], ToolError | None]
Step = tuple[Callable[[CallContext], Any], bool]
"""A stage as the plan runs it: (callable, True when what it returns must be awaited)."""
Settler = tuple[Callable[[CallContext, ToolResult], Any], bool]
"""A settle step: (callable, True when what it returns must be awaited)."""


@dataclass(kw_only=True, frozen=True)
class Plan:
    """What the gate runs for one tool's calls after `resolve`."""

    tool: Tool
    """The tool the plan was built for (a new tool under the same name gets a new plan)."""
    steps: tuple[Step, ...]
    """The stages that can act on this tool's calls, in order."""
    settlers: tuple[Settler, ...]
    """`settle(ctx, result)` of the settling stages in `steps`, as settle steps."""
    policy: PolicyDecision | None = None
    """The policy's decision when it is known from the tool alone (the authorize stage is then
    not in the plan; the decision is still set on every call's context)."""


_SYNC: dict[int, SyncStep] = {
    id(resolve): resolve_now,
    id(decode): decode_now,
    id(check_invalid_budget): invalid_budget_now,
    id(loop_guard): loop_guard_now,
    id(validate): validate_now,
    id(confirm_loop_guard): confirm_now,
}
"""The gate's stages that never wait, as the plain functions behind them (by identity: a host's
stage need not be hashable)."""

_OWN: frozenset[int] = frozenset(
    id(stage)
    for stage in (
        resolve,
        decode,
        check_invalid_budget,
        loop_guard,
        validate,
        authorize,
        budget,
        approval,
        confirm_loop_guard,
        idempotency,
        execute,
    )
)


def _static_allow(tool: Tool, gate: Gate) -> PolicyDecision | None:
    """The policy's decision for `tool` when it is allow whatever the call (and no owner check)."""
    if tool.owner is not None:
        return None
    static = gate.static_decision(tool)
    return static if static is not None and static.action is Action.ALLOW else None


def _own_step(stage: object, tool: Tool, gate: Gate, *, foreign: bool) -> Step | None:
    """How one of the gate's own stages runs for `tool`, or None when it cannot act on it."""
    if stage is authorize:
        return None if _static_allow(tool, gate) is not None else (authorize, True)
    if stage is approval:
        # Only the policy (through authorize) or a host stage can ask for an approval.
        return None if not foreign and _static_allow(tool, gate) is not None else (approval, True)
    if stage is budget:
        budgets = gate.budgets
        if not can_limit(budgets, tool):
            return None
        return (budget, True) if bucket_for(budgets, tool) is not None else (budget_counts, False)
    if stage is idempotency:
        return (idempotency, True) if needs_key(tool) else None
    if stage is validate:
        return (validate_step(tool), False)
    return _step(stage)  # type: ignore[arg-type]


def _step(stage: Stage) -> Step:
    sync = _SYNC.get(id(stage))
    return (sync, False) if sync is not None else (stage, True)


def steps_of(stages: Sequence[Stage]) -> tuple[Step, ...]:
    """Stages as steps, without a tool (the stages before `resolve`, or a list without it)."""
    return tuple(_step(stage) for stage in stages)


def build_plan(gate: Gate, tool: Tool, stages: Sequence[Stage]) -> Plan:
    """The plan of `tool` over `stages` (the gate's stages after `resolve`)."""
    foreign = any(id(stage) not in _OWN for stage in stages)
    steps: list[Step] = []
    settlers: list[Settler] = []
    preset: PolicyDecision | None = None
    for stage in stages:
        if id(stage) in _OWN:
            step = _own_step(stage, tool, gate, foreign=foreign)
            if step is None and stage is authorize:
                preset = _static_allow(tool, gate)
        elif isinstance(stage, ApplicableStage) and not stage.applies(tool, gate):
            step = None
        else:
            step = (stage, True)
        if step is None:
            continue
        steps.append(step)
        if isinstance(stage, SettlingStage):
            settlers.append((charge_now, False) if stage is budget else (stage.settle, True))
    return Plan(tool=tool, steps=tuple(steps), settlers=tuple(settlers), policy=preset)
