"""Run every case k times against an agent, each trial on fresh in-memory stores.

The agent comes from a factory - the same `FILE.py:NAME` function `maitre runs resume --agent`
and `maitre console --resume-agent` take: it receives the stores and returns an `Agent`. It is
called once per trial with new `MemoryStores`, so no trial sees another's approvals,
idempotency keys, runs or audit log (state the factory keeps elsewhere - a module-level dict its
tools write to - is the factory's to reset). A `model_factory` replaces the agent's model with a
fresh one per trial: any adapter (`AnthropicModel`, `OpenAIChatModel`, `OpenAICompatibleModel`),
`ScriptedModel`, or `maitre.testing.TestModel`.

What a trial records comes from two places that every model and toolbox share: the run's events
(which call the model proposed in which step, with which arguments) and `capture_calls` on the
agent's gate (what governance decided, whether the tool ran, retries, replays, approvals). A call
that needs approval ends the trial paused unless the case says `on_approval: approve` or `deny`;
then a stand-in approver (`maitre-eval-approver`, holding the policy's approver role) decides every
request and the run resumes, at most `MAX_RESUMES` times.

A case that sets `expected_route` is also routed (`maitre.evals.routing`): a routing case - one with
nothing for an agent to do - only routed, so a file of routing cases needs no agent factory, and a
file that mixes both needs the factory and a router. Without a `router`, the process-wide
`maitre.routing.default_router()` routes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..agent import Agent, ApprovalDecision, Run
from ..exceptions import UserError
from ..progress import Progress, report
from ..stores import MemoryStores
from ..testing import CapturedCall, capture_calls
from ..types import Principal
from .matching import check_trial
from .records import CallRecord, Check, TrialRecord
from .routing import AnyRouter, route_into, route_trial, router_name, scoring_costs

if TYPE_CHECKING:
    from ..models.base import Model
    from ..routing import CostMatrix
    from ..stores import Stores
    from .cases import EvalCase

__all__ = [
    "APPROVER",
    "AgentFactory",
    "EvalResult",
    "MAX_RESUMES",
    "ModelFactory",
    "calls_of",
    "run_eval",
    "run_trial",
]

AgentFactory = Callable[["Stores"], Agent]
"""`factory(stores) -> Agent`: builds the agent under test on the stores it is given."""
ModelFactory = Callable[[], "Model"]
"""`factory() -> Model`: a fresh model for each trial, in place of the agent's own."""

MAX_RESUMES = 5
APPROVER = "maitre-eval-approver"


@dataclass(kw_only=True)
class EvalResult:
    """Every trial of every case, in case order."""

    cases: list[EvalCase]
    trials: dict[str, list[TrialRecord]]
    """Case id -> its trials, in trial order."""
    trials_per_case: int
    agent: str = ""
    """How the agent was named (`examples/evals/agent.py:make_agent`)."""
    model: str = ""
    """The model's name (`scripted`, `claude-...`)."""
    cases_file: str = ""
    started_at: float = field(default_factory=time.time)
    elapsed_s: float = 0.0
    router: str = ""
    """How the router was named (`keyword`, `examples/router/score.py:make_router`); "" when no
    case was routed."""
    route_costs: CostMatrix | None = None
    """The matrix routed cases were priced under; None when no case was routed."""


async def run_eval(
    cases: Sequence[EvalCase],
    factory: AgentFactory | None,
    *,
    trials: int = 1,
    model_factory: ModelFactory | None = None,
    concurrency: int = 1,
    progress: Progress | None = None,
    agent_name: str = "",
    cases_file: str = "",
    router: AnyRouter | None = None,
    router_label: str = "",
) -> EvalResult:
    """Run `trials` trials of each case (`concurrency` at a time) and check each against its case.

    `factory` may be None when every case is a routing case; `router` routes the cases that set
    `expected_route` (default: `maitre.routing.default_router()`), priced under its own cost matrix
    or seed 002's (`maitre.evals.routing.scoring_costs`)."""
    if trials < 1:
        raise UserError("trials must be at least 1")
    if concurrency < 1:
        raise UserError("concurrency must be at least 1")
    runs = [case.id for case in cases if case.runs_agent]
    if runs and factory is None:
        raise UserError(
            f"{len(runs)} case(s) need an agent run ({', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''}); "
            "give an agent factory (--agent FILE:FACTORY)"
        )
    routed = any(case.is_routed for case in cases)
    if routed and router is None:
        from ..routing import default_router

        router = default_router()
    costs = scoring_costs(router) if routed else None
    started, clock = time.time(), time.perf_counter()
    slots: dict[str, list[TrialRecord | None]] = {case.id: [None] * trials for case in cases}
    total = len(cases) * trials
    done = 0
    model_names: set[str] = set()
    limiter = anyio.CapacityLimiter(concurrency)
    report(progress, 0, total)

    async def one(case: EvalCase, index: int) -> None:
        nonlocal done
        async with limiter:
            if case.runs_agent:
                assert factory is not None  # checked above
                record, model = await run_trial(
                    case, factory, trial=index, model_factory=model_factory, router=router, costs=costs
                )
            else:
                assert router is not None and costs is not None and case.expected_route is not None
                record = await route_trial(
                    case.id, case.input, case.expected_route, router, costs, trial=index
                )
                model = ""
        if model:
            model_names.add(model)
        slots[case.id][index] = record
        done += 1
        report(progress, done, total)

    try:
        async with anyio.create_task_group() as group:
            for case in cases:
                for index in range(trials):
                    group.start_soon(one, case, index)
    except ExceptionGroup as failed:  # a usage error stops every trial: raise it, not the group
        usage = next((e for e in _leaves(failed) if isinstance(e, UserError)), None)
        if usage is not None:
            raise usage from None
        raise
    return EvalResult(
        cases=list(cases),
        trials={key: [r for r in records if r is not None] for key, records in slots.items()},
        trials_per_case=trials,
        agent=agent_name,
        model=", ".join(sorted(model_names)),
        cases_file=cases_file,
        started_at=started,
        elapsed_s=time.perf_counter() - clock,
        router=(router_label or router_name(router)) if routed else "",
        route_costs=costs,
    )


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


async def run_trial(
    case: EvalCase,
    factory: AgentFactory,
    *,
    trial: int = 0,
    model_factory: ModelFactory | None = None,
    router: AnyRouter | None = None,
    costs: CostMatrix | None = None,
) -> tuple[TrialRecord, str]:
    """One trial: a fresh agent on fresh stores, the case's input, its checks (and the route, for a
    case that sets `expected_route`, when a `router` is given). Returns the record and the name of
    the model that ran it."""
    record = TrialRecord(case_id=case.id, trial=trial)
    route: list[Check] = []
    if router is not None and case.expected_route is not None:
        from ..routing import SEED002_COSTS

        await route_into(record, router, case.input, case.expected_route, costs or SEED002_COSTS)
        route, record.checks = record.checks, []
    try:
        agent = factory(MemoryStores())
    except Exception as exc:  # the agent under test failed to build: that trial fails, the rest run
        record.error = f"the agent factory raised {type(exc).__name__}: {exc}"
        record.checks = [Check(name="agent", ok=False, detail=record.error), *route]
        return record, ""
    if not isinstance(agent, Agent):
        raise UserError(f"the agent factory returned a {type(agent).__name__}, not an Agent")
    made = model_factory() if model_factory is not None else None
    if made is not None:
        agent.model = made
    principal = case.principal.principal()
    try:
        with capture_calls(agent) as captured:
            run = await agent.run(case.input, principal)
            try:
                run = await _decide(agent, run, case, principal)
            except UserError as exc:  # the policy refused the stand-in approver
                record.error = f"the evaluation could not decide an approval: {exc}"
    finally:
        # A model made for this trial is this trial's to close (an HTTP adapter holds a client and
        # its connections; left to the garbage collector, they are closed in some later event loop).
        close = getattr(made, "aclose", None)
        if close is not None:
            await close()
    record.run_id = run.id
    record.status = str(run.status)
    record.stop_reason = str(run.stop_reason) if run.stop_reason else None
    record.final_text = run.final_text
    record.steps = run.steps
    record.calls = calls_of(run, captured)
    record.input_tokens = run.usage.input_tokens
    record.output_tokens = run.usage.output_tokens
    record.cost_usd = run.cost_usd
    record.elapsed_s = run.elapsed_s
    record.checks = check_trial(case, record) + route
    if record.error is not None:
        record.checks.append(Check(name="agent", ok=False, detail=record.error))
    return record, str(getattr(agent.model, "name", "") or type(agent.model).__name__)


async def _decide(agent: Agent, run: Run, case: EvalCase, principal: Principal) -> Run:
    if case.on_approval == "stop":
        return run
    role = getattr(agent.gate.policy, "approver_role", None)
    approver = Principal(user=APPROVER, tenant=principal.tenant, roles=frozenset({role or "approver"}))
    for _ in range(MAX_RESUMES):
        if not run.paused:
            break
        decisions = {
            pending.approval_id: ApprovalDecision.approved(approver)
            if case.on_approval == "approve"
            else ApprovalDecision.denied(approver, "The evaluation's approver denied this call.")
            for pending in run.pending
        }
        run = await agent.resume(run.id, decisions, principal=principal)
    return run


def _parsed(arguments: Any) -> dict[str, Any] | None:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


def calls_of(run: Run, captured: Sequence[CapturedCall]) -> list[CallRecord]:
    """The calls the model proposed in `run`, in order, each with its final outcome at the gate.

    Calls are matched to the gate's records by call id, in order: a model that reuses an id in a
    later step gets a record per call, and the gate's second pass over an approved call (on resume)
    stays with the call that asked.
    """
    records: list[CallRecord] = []
    by_id: dict[str, list[CallRecord]] = {}
    step = 0
    for event in run.events:
        kind = event.get("type")
        call_id = str(event.get("call_id"))
        if kind == "model_call":
            step = int(event.get("step", step + 1))
        elif kind == "tool_call":
            record = CallRecord(
                call_id=call_id,
                tool=str(event.get("name", "")),
                arguments=_parsed(event.get("arguments")),
                step=step,
            )
            records.append(record)
            by_id.setdefault(call_id, []).append(record)
        elif kind == "tool_result" and event.get("error_code"):
            for record in by_id.get(call_id, [])[-1:]:
                record.error_code = str(event["error_code"])
                record.schema_valid = (
                    record.error_code != "INVALID_ARGUMENTS" and record.arguments is not None
                )
    position: dict[str, int] = {}
    for seen in captured:
        call_id = str(seen.call.id)
        candidates = by_id.get(call_id, [])
        index = position.get(call_id, 0)
        if index >= len(candidates):
            continue
        record = candidates[index]
        result = seen.result
        if result.approval is None:  # the call's last pass at the gate: the next one is another call
            position[call_id] = index + 1
        record.known = seen.tool is not None
        if seen.tool is not None:
            record.tool = seen.tool
        record.decision = seen.decision
        record.executed = record.executed or seen.context.executed or result.replayed
        record.replayed = record.replayed or result.replayed
        record.attempts = max(record.attempts, seen.context.attempts)
        if result.approval is not None:
            record.approval_requested = True
            record.error_code = None
        else:
            record.error_code = str(result.error.code) if result.error is not None else None
        record.schema_valid = (
            record.known and record.arguments is not None and record.error_code != "INVALID_ARGUMENTS"
        )
    return records
