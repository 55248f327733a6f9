"""The gate: one pipeline every proposed tool call passes through, whatever door it came in by.

```
resolve → decode → loop guard → validate → [authorize → budget → approval → idempotency] → execute
        → shape → record
```

`Gate.call` never raises into the caller's loop: a missing tool, broken JSON, a 10 MB payload, a
tool that raises (even `SystemExit` or `KeyboardInterrupt`), hangs or returns garbage - each comes
back as a `ToolResult` with `is_error=True` and a `ToolError` the model can act on, and each is
audited. Only the caller's own cancellation propagates: that is the host stopping work.

Stages are plain async callables (`maitre.gate.base.Stage`) in an ordered list, so a host can
insert its own; recorders run after every call, refused or executed. After `resolve`, a call runs
its tool's plan (`maitre.gate.plan`): only the stages that can act on that tool, built once.

Identity is part of every piece of state: the gate tracks runs by (tenant, user, run id), so a
second user of the same tenant who names another user's run id gets a fresh run of their own -
never its loop counters, taint, budgets or (through the idempotency key) its results. A call with
no run id at all is a run of its own; the taint it causes follows its principal for
`GateLimits.taint_window_s`, so a client that simply omits the run id cannot shed taint.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal

import anyio
from opentelemetry import trace

from .._sync import run_sync
from ..context import RunContext
from ..policy import DefaultPolicy, Policy, PolicyDecision, as_policy
from ..stores import MemoryStores, Stores
from ..tools import Tool, Toolbox
from ..tracing import end_tool_span, start_tool_span
from ..tracing import tracing_enabled as _tracing
from ..types import ErrorCode, Principal, TaintSource, ToolCall, ToolError, ToolResult, Trust
from .approval import ApprovalService, approval
from .authorize import authorize, validated_arguments
from .base import CallContext, CallOptions, GateLimits, SettlingStage, Stage
from .budget import Budgets, budget
from .decode import decode
from .execute import execute
from .handles import builtin_toolbox
from .idempotency import idempotency
from .loop_guard import confirm_loop_guard, loop_guard, note_outcome
from .plan import Plan, build_plan, steps_of
from .record import AuditRecorder
from .resolve import resolve
from .shape import shape_error, shape_output
from .validate import check_invalid_budget, count_invalid, validate

__all__ = ["DEFAULT_STAGES", "Gate", "Recorder"]

logger = logging.getLogger("maitre.gate")
_tracer = trace.get_tracer("maitre.gate")


DEFAULT_STAGES: tuple[Stage, ...] = (
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
"""Every stage in order. A `SettlingStage` (one with `settle(ctx, result)`) is called back after shaping."""

Recorder = Callable[[CallContext, ToolResult], Awaitable[None]]
"""**Protocol:** `async recorder(ctx, result)` - runs after every call (audit, metrics)."""

_MAX_TRACKED_RUNS = 10_000
_INTERNAL_MESSAGE = (
    "The tool call could not be processed because of an internal error in the runtime. It was "
    "not executed. Retrying the same call will not help; continue without it or tell the user."
)


class Gate:
    """Governs tool calls for one toolbox.

    Args:
        toolbox: the tools the gate may run.
        policy: decides allow / deny / needs approval (default: seed 003's risk matrix).
        stores: approvals, idempotency, audit, handles, rate limits (`maitre.stores.open_stores`);
            in-process by default. With durable stores, every call is audited.
        budgets: per-run, per-tool, per-class limits and rate limits.
        limits: guard rails (argument size, invalid-call budget, loop limits, backoff).
        audit: record every call in `stores.audit` (default: when `stores` is given).
        audit_arguments: "digest" (default) or "redacted" arguments in the audit log (a personal
            tool's are keyed digests or sealed under the user's key in either mode).
        approval_ttl_s: how long an approval request stays decidable and usable.
        stages: the ordered stages; defaults to `DEFAULT_STAGES`.
        recorders: extra callables run after every call with the context and the result.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        *,
        policy: Policy | None = None,
        stores: Stores | None = None,
        budgets: Budgets | None = None,
        limits: GateLimits | None = None,
        audit: bool | None = None,
        audit_arguments: Literal["digest", "redacted"] = "digest",
        approval_ttl_s: float = 24 * 3600.0,
        stages: Sequence[Stage] | None = None,
        recorders: Sequence[Recorder] = (),
    ) -> None:
        self._plans: dict[str, Plan] = {}
        self._static: dict[str, tuple[Tool, PolicyDecision | None]] = {}
        self._unwatch: Callable[[], None] | None = None
        self._toolbox = toolbox
        self._policy: Policy = as_policy(policy) if policy is not None else DefaultPolicy()
        self._budgets = budgets or Budgets()
        self._stages = _StageList(stages if stages is not None else DEFAULT_STAGES, self._rebuild)
        self.stores: Stores = stores if stores is not None else MemoryStores()
        self._own_stores = stores is None
        """True when the gate made its own in-process stores: they cannot hold records written
        before the hash format changed, so a missed idempotency key is never looked up again
        under its version-1 form (see `maitre.gate.hashing`)."""
        self.limits = limits or GateLimits()
        self.approval_ttl_s = approval_ttl_s
        self.approvals = ApprovalService(self)
        self.handles = self.stores.handles
        self.builtins = builtin_toolbox(self.handles, getattr(self.stores, "subject_keys", None))
        self.builtin_names = frozenset(self.builtins.names())
        self.recorders: list[Recorder] = list(recorders)
        if audit if audit is not None else stores is not None:
            self.recorders.insert(0, AuditRecorder(self.stores.audit, arguments=audit_arguments))
        self._runs: OrderedDict[tuple[str, str, str], RunContext] = OrderedDict()
        self._principal_taint: OrderedDict[tuple[str, str], tuple[float, TaintSource]] = OrderedDict()
        self._watch(toolbox)
        self._rebuild()

    # -- what the plans are built from (replacing one rebuilds them) -----------------------------

    @property
    def toolbox(self) -> Toolbox:
        """The tools the gate may run."""
        return self._toolbox

    @toolbox.setter
    def toolbox(self, toolbox: Toolbox) -> None:
        self._toolbox = toolbox
        self._watch(toolbox)
        self._rebuild()

    @property
    def policy(self) -> Policy:
        """Decides allow / deny / needs approval."""
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self._policy = as_policy(policy)
        self._rebuild()

    @property
    def budgets(self) -> Budgets:
        """Per-run, per-tool, per-class limits and rate limits."""
        return self._budgets

    @budgets.setter
    def budgets(self, budgets: Budgets) -> None:
        self._budgets = budgets
        self._rebuild()

    @property
    def stages(self) -> list[Stage]:
        """The ordered stages (a list: changing it, in place or by assignment, rebuilds the plans)."""
        return self._stages

    @stages.setter
    def stages(self, stages: Sequence[Stage]) -> None:
        self._stages = _StageList(stages, self._rebuild)
        self._rebuild()

    def _watch(self, toolbox: Toolbox) -> None:
        """Rebuild the plans when a tool is added or removed (without the toolbox keeping us alive)."""
        if self._unwatch is not None:
            self._unwatch()
        gate = weakref.ref(self)
        unsubscribe: Callable[[], None] | None = None

        def changed(event: str, tool: Tool) -> None:
            alive = gate()
            if alive is not None:
                alive._rebuild()
            elif unsubscribe is not None:
                unsubscribe()

        unsubscribe = self._unwatch = toolbox.subscribe(changed)

    def _rebuild(self) -> None:
        """Forget every plan and cached policy decision; split the stages at `resolve` (the
        stages after it are planned per tool)."""
        self._plans.clear()
        self._static.clear()
        stages = list(self._stages)
        at = next((i for i, stage in enumerate(stages) if stage is resolve), None)
        self._pre = steps_of(stages if at is None else stages[: at + 1])
        self._planned = tuple(stages[at + 1 :]) if at is not None else None
        self._settlers = tuple((s.settle, True) for s in stages if isinstance(s, SettlingStage))

    def plan(self, tool: Tool) -> Plan:
        """The plan this gate runs for `tool`'s calls (built on first use; see `maitre.gate.plan`)."""
        plan = self._plans.get(tool.name)
        if plan is None or plan.tool is not tool:
            plan = build_plan(self, tool, self._planned if self._planned is not None else ())
            self._plans[tool.name] = plan
        return plan

    # -- lookups used by stages ------------------------------------------------------------------

    def find_tool(self, name: str) -> Tool | None:
        return self.toolbox.get(name) or self.builtins.get(name)

    def static_decision(self, tool: Tool) -> PolicyDecision | None:
        """The policy's per-tool decision when it does not depend on the call (cached), else None."""
        cached = self._static.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = (tool, self.policy.static_decision(tool))
            self._static[tool.name] = cached
        return cached[1]

    def visible_names(self, run: RunContext) -> list[str]:
        names = self.toolbox.names()
        if run.visible_tools is not None:
            names = [n for n in names if n in run.visible_tools]
        return names + sorted(self.builtin_names)

    def new_run(self, principal: Principal | None = None, run_id: str | None = None) -> RunContext:
        """A fresh run context (the agent loop owns one per run)."""
        run = (
            RunContext(principal=principal)
            if run_id is None
            else RunContext(run_id=run_id, principal=principal)
        )
        return run

    def _run_for(self, call: ToolCall, principal: Principal, run: RunContext | None) -> RunContext:
        """The run this call belongs to, always one of `principal`'s own.

        A run object the host passes is used when it is this principal's (or has none yet). A run
        id alone is looked up by (tenant, user, id), so another principal naming it gets its own
        fresh run. No run id: a throwaway run. Both start with the principal's recent taint (`_taint`).
        """
        if run is not None:
            if run.principal is None:
                run.principal = principal
            if _same_identity(run.principal, principal):
                return run
            run_id: str | None = run.run_id  # someone else's run object: never share its state
        else:
            run_id = call.run_id if isinstance(call.run_id, str) and call.run_id else None
        if run_id is None:
            return self._carry_taint(RunContext(principal=principal, ephemeral=True))
        key = (principal.tenant, principal.user, run_id)
        tracked = self._runs.get(key)
        if tracked is None:
            # A run id the caller names for the first time is a fresh run, but not a clean slate:
            # a client (or an injected model driving one) must not shed taint by naming a new id.
            tracked = self._carry_taint(RunContext(run_id=run_id, principal=principal))
            self._runs[key] = tracked
            if len(self._runs) > _MAX_TRACKED_RUNS:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        return tracked

    def _carry_taint(self, fresh: RunContext) -> RunContext:
        """`fresh`, tainted when its principal read untrusted content within the taint window."""
        assert fresh.principal is not None
        key = (fresh.principal.tenant, fresh.principal.user)
        taint = self._principal_taint.get(key)
        if taint is not None:
            until, source = taint
            if until > time.monotonic():
                fresh.tainted, fresh.taint_source = True, source
            else:
                del self._principal_taint[key]
        return fresh

    def _taint(self, ctx: CallContext) -> None:
        """Untrusted output entered the run: mark it, remember the source, and for a run the gate
        keeps for a door (no run id, or one a client names) let the taint follow the principal for
        the configured window, into its runless calls and the runs it names next. A run object the
        host passes (an agent's, which traces its own data in `RunContext.provenance`) keeps its
        taint to itself."""
        run = ctx.run
        tool = ctx.tool
        assert tool is not None
        source = TaintSource(tool=tool.name, call_id=str(ctx.call.id)[:200], at=time.time())
        if not run.tainted:
            run.tainted, run.taint_source = True, source
        principal = ctx.principal
        door_run = run.ephemeral or self._runs.get((principal.tenant, principal.user, run.run_id)) is run
        if door_run and run.provenance is None and self.limits.taint_window_s > 0:
            key = (principal.tenant, principal.user)
            self._principal_taint[key] = (time.monotonic() + self.limits.taint_window_s, source)
            self._principal_taint.move_to_end(key)
            if len(self._principal_taint) > _MAX_TRACKED_RUNS:
                self._principal_taint.popitem(last=False)

    # -- the pipeline ----------------------------------------------------------------------------

    async def call(
        self,
        call: ToolCall,
        principal: Principal,
        run: RunContext | None = None,
        options: CallOptions | None = None,
        *,
        approval_id: str | None = None,
    ) -> ToolResult:
        """Run one proposed call through every stage. Never raises.

        Args:
            call: what the model proposed.
            principal: who is asking, as the host or the authenticated transport established it.
            run: the run the call belongs to (the agent loop keeps one per run); without it the
                gate tracks `call.run_id` per principal, or treats the call as a run of its own.
            options: what the door says about the call (an approval to use, a host idempotency
                key, a deadline).
            approval_id: shorthand for `CallOptions(approval_id=...)`.
        """
        if options is None:
            options = CallOptions(approval_id=approval_id) if approval_id else _NO_OPTIONS
        elif approval_id:
            options = dataclasses.replace(options, approval_id=approval_id)
        ctx: CallContext | None = None
        try:
            call, options = _sendable_ids(call, options)
            if not (_plain(principal.user) and _plain(principal.tenant)):
                principal = _sendable_principal(principal)
            ctx = CallContext(
                gate=self,
                call=call,
                principal=principal,
                run=self._run_for(call, principal, run),
                options=options,
            )
            result = await (self._traced(ctx) if _tracing() else self._run_stages(ctx))
            for recorder in self.recorders:
                await recorder(ctx, result)
            return result
        except anyio.get_cancelled_exc_class():
            raise  # the host cancelled its own work
        except GeneratorExit:
            raise  # this coroutine is being closed; swallowing it would be a RuntimeError
        except BaseException as exc:  # the last line of defence: a bug in a stage, a store or a tool
            logger.error("gate failure on call %r", getattr(call, "id", None), exc_info=exc)
            return await self._internal(call, ctx, exc)

    def call_sync(
        self,
        call: ToolCall,
        principal: Principal,
        run: RunContext | None = None,
        options: CallOptions | None = None,
        *,
        approval_id: str | None = None,
    ) -> ToolResult:
        """`call`, from synchronous code (a script, a notebook). Never raises either.

        Runs on a new event loop, or on one in a worker thread where a loop is already running
        (see `maitre._sync`); with stores bound to one loop (Postgres), use `await gate.call`."""
        return run_sync(self.call, call, principal, run, options, approval_id=approval_id)

    async def _internal(self, call: ToolCall, ctx: CallContext | None, exc: BaseException) -> ToolResult:
        error = ToolError(ErrorCode.INTERNAL, _INTERNAL_MESSAGE, details={"exception": type(exc).__name__})
        result = ToolResult(
            call_id=str(getattr(call, "id", "")),
            name=str(getattr(call, "name", ""))[:200],
            is_error=True,
            content=error.message,
            error=error,
        )
        if ctx is not None:  # still audit it: a call that broke the runtime is the one to look at
            ctx.error = error
            for recorder in self.recorders:
                try:
                    await recorder(ctx, result)
                except Exception:
                    logger.exception("recorder failed while recording an internal error")
        return result

    async def _traced(self, ctx: CallContext) -> ToolResult:
        """The stages inside an `execute_tool {tool}` span (only once the host installed a tracer;
        see `maitre.tracing`). The span is current while the tool runs, so what the tool traces
        nests under it."""
        span = start_tool_span(_tracer, ctx)
        with trace.use_span(span, end_on_exit=True):
            result = await self._run_stages(ctx)
            end_tool_span(span, ctx, result)
        return result

    async def _run_stages(self, ctx: CallContext) -> ToolResult:
        error: ToolError | None = None
        settlers = self._settlers
        for fn, wait in self._pre:
            outcome = fn(ctx)
            error = await outcome if wait else outcome
            if error is not None:
                break
        else:
            tool = ctx.tool
            if self._planned is not None and tool is not None:
                plan = self._plans.get(tool.name)
                if plan is None or plan.tool is not tool:
                    plan = self.plan(tool)
                settlers = plan.settlers
                if plan.policy is not None:
                    ctx.policy = plan.policy
                for fn, wait in plan.steps:
                    outcome = fn(ctx)
                    error = await outcome if wait else outcome
                    if error is not None:
                        break
        return await self._finish(ctx, error, settlers)

    async def _finish(
        self,
        ctx: CallContext,
        error: ToolError | None,
        settlers: Sequence[tuple[Callable[..., Any], bool]],
        *,
        contained: bool = False,
    ) -> ToolResult:
        """The end of every call: shape the output (or the error), run the plan's settle steps (the
        idempotency key completed, released or marked uncertain) and taint the run after an
        untrusted result. `contained` (a write finished after its caller was cancelled: nobody
        reads the result) logs a failing settle step and goes on to the next."""
        result: ToolResult | None = None
        if error is None:
            shaped = await shape_output(ctx)
            if isinstance(shaped, ToolError):
                error = shaped
            else:
                result = shaped
        if error is not None:
            error = count_invalid(ctx, error)
        error = note_outcome(ctx, error)
        if error is not None:
            ctx.error = error
            result = shape_error(ctx, error)
        assert result is not None
        result.approval = ctx.ticket
        for settle, wait in settlers:
            try:
                settled = settle(ctx, result)
                if wait:
                    await settled
            except Exception:
                if not contained:
                    raise
                logger.exception("settling call %s after its caller was cancelled failed", ctx.call.id)
        tool = ctx.tool
        if (ctx.executed or ctx.replayed) and tool is not None:
            if ctx.run.provenance is not None:
                _follow_data(ctx, tool, result)
            if tool.trust is Trust.UNTRUSTED:
                self._taint(ctx)
        return result


_NO_OPTIONS = CallOptions()


def _follow_data(ctx: CallContext, tool: Tool, result: ToolResult) -> None:
    """Keep the run's provenance (`maitre.dataflow`) up to date after an executed call: in a
    tainted run the call's untraced values become suspects (so a trusted tool echoing them back
    does not launder them), then a trusted result's text joins the trusted corpus (cheap: kept as
    given until a tainted call needs tracing) - unless the call itself carried an untraced value."""
    provenance = ctx.run.provenance
    assert provenance is not None
    echoes_untraced = False
    if ctx.run.tainted:
        arguments = validated_arguments(ctx) if ctx.validated is not None else (ctx.arguments or {})
        echoes_untraced = provenance.note_arguments(arguments, tool.input_schema)
    if tool.trust is Trust.TRUSTED and not result.is_error and not echoes_untraced:
        # A trusted tool called with an untraced value may echo it (whole, in part, re-spaced):
        # its answer is not trusted text for this run.
        provenance.add_trusted(result.content)


class _StageList(list[Stage]):
    """The gate's stages: a list whose every change rebuilds the gate's plans."""

    def __init__(self, stages: Iterable[Stage], changed: Callable[[], None]) -> None:
        super().__init__(stages)
        self._changed = changed


def _rebuilding(name: str) -> Callable[..., Any]:
    method = getattr(list, name)

    def changed(self: _StageList, *args: Any, **kwargs: Any) -> Any:
        result = method(self, *args, **kwargs)
        self._changed()
        return result

    changed.__name__ = name
    return changed


for _name in (
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
):
    setattr(_StageList, _name, _rebuilding(_name))


def _sendable(value: str) -> str:
    """`value`, or with lone surrogates and NUL escaped (`\\ud800`, `\\x00`) so it can be hashed,
    stored (PostgreSQL text cannot hold NUL) and sent."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    if value.isascii():
        return value
    try:
        value.encode()
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode()
    return value


def _plain(value: object) -> bool:
    return type(value) is str and value.isascii() and "\x00" not in value


def _sendable_principal(principal: Principal) -> Principal:
    """A principal whose user or tenant holds NUL or a lone surrogate (a token's claim can) is
    escaped like the ids, so it is stored and audited as what it is instead of failing the store."""
    return dataclasses.replace(principal, user=_sendable(principal.user), tenant=_sendable(principal.tenant))


def _sendable_ids(call: ToolCall, options: CallOptions) -> tuple[ToolCall, CallOptions]:
    """The names and ids a door passes through (call id, tool name, run id, approval id, host key)
    are hashed, audited and echoed back: one that is not valid Unicode is escaped, deterministically,
    so it stays distinct and the call is refused or run on its merits instead of breaking the audit."""
    if (
        _plain(call.id)
        and _plain(call.name)
        and (call.run_id is None or _plain(call.run_id))
        and (
            options is _NO_OPTIONS
            or (
                (options.approval_id is None or _plain(options.approval_id))
                and (options.idempotency_key is None or _plain(options.idempotency_key))
            )
        )
    ):
        return call, options  # the common case, checked without building anything (hot path)
    # replace(), not a field-by-field copy: a field added to either record later is kept, not dropped
    call = dataclasses.replace(
        call,
        id=_sendable(str(call.id)),
        name=_sendable(call.name) if type(call.name) is str else call.name,  # a door may pass a non-str
        run_id=_sendable(call.run_id) if isinstance(call.run_id, str) else None,
    )
    options = dataclasses.replace(
        options,
        approval_id=_sendable(options.approval_id) if options.approval_id else None,
        idempotency_key=_sendable(options.idempotency_key) if options.idempotency_key else None,
    )
    return call, options


def _same_identity(a: Principal | None, b: Principal) -> bool:
    return a is not None and a.tenant == b.tenant and a.user == b.user
