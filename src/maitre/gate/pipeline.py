"""The gate: one pipeline every proposed tool call passes through, whatever door it came in by.

```
resolve → decode → loop guard → validate → [authorize → budget → approval → idempotency] → execute
        → shape → record
```

`Gate.call` never raises into the caller's loop: a missing tool, broken JSON, a 10 MB payload, a
tool that raises, hangs or returns garbage - each comes back as a `ToolResult` with `is_error=True`
and a `ToolError` the model can act on. (Cancellation of the caller's own task still propagates:
that is the host stopping work, not a model's input.)

Stages are plain async callables (`maitre.gate.base.Stage`) in an ordered list, so a host can
insert its own; recorders run after every call, refused or executed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from opentelemetry import trace

from ..context import RunContext
from ..policy import DefaultPolicy, Policy
from ..stores import MemoryStores, Stores
from ..tools import Tool, Toolbox
from ..types import ErrorCode, Principal, ToolCall, ToolError, ToolResult, Trust
from .approval import ApprovalService, approval
from .authorize import authorize
from .base import CallContext, GateLimits, Stage
from .budget import Budgets, budget
from .decode import decode
from .execute import execute
from .handles import builtin_toolbox
from .idempotency import idempotency
from .loop_guard import loop_guard, note_outcome
from .record import AuditRecorder
from .resolve import resolve
from .shape import shape_error, shape_output
from .validate import check_invalid_budget, count_invalid, validate

__all__ = ["DEFAULT_STAGES", "Gate", "Recorder"]

logger = logging.getLogger("maitre.gate")
_tracer = trace.get_tracer("maitre.gate")


def _tracing() -> bool:
    """True once the host has installed an OpenTelemetry SDK; until then spans would be no-ops,
    and skipping them keeps a call's fixed cost low."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


DEFAULT_STAGES: tuple[Stage, ...] = (
    resolve,
    decode,
    check_invalid_budget,
    loop_guard,
    validate,
    authorize,
    budget,
    approval,
    idempotency,
    execute,
)
"""Every stage in order. A stage with a `settle(ctx, result)` attribute is called back after shaping."""

Recorder = Callable[[CallContext, ToolResult], Awaitable[None]]
"""**Protocol:** `async recorder(ctx, result)` - runs after every call (audit, metrics)."""

_MAX_TRACKED_RUNS = 10_000
_UNSET: Any = object()


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
        audit_arguments: "digest" (default) or "redacted" arguments in the audit log.
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
        self.toolbox = toolbox
        self.policy: Policy = policy if policy is not None else DefaultPolicy()
        self.stores: Stores = stores if stores is not None else MemoryStores()
        self.budgets = budgets or Budgets()
        self.limits = limits or GateLimits()
        self.approval_ttl_s = approval_ttl_s
        self.approvals = ApprovalService(self)
        self.handles = self.stores.handles
        self.builtins = builtin_toolbox(self.handles)
        self.builtin_names = frozenset(self.builtins.names())
        self.stages: list[Stage] = list(stages) if stages is not None else list(DEFAULT_STAGES)
        self.recorders: list[Recorder] = list(recorders)
        if audit if audit is not None else stores is not None:
            self.recorders.insert(0, AuditRecorder(self.stores.audit, arguments=audit_arguments))
        self._settlers = [s.settle for s in self.stages if hasattr(s, "settle")]  # type: ignore[attr-defined]
        self._runs: OrderedDict[str, RunContext] = OrderedDict()
        self._static: dict[str, Any] = {}

    # -- lookups used by stages ------------------------------------------------------------------

    def find_tool(self, name: str) -> Tool | None:
        return self.toolbox.get(name) or self.builtins.get(name)

    def static_decision(self, tool: Tool) -> Any:
        """The policy's per-tool decision when it does not depend on the call (cached), else None."""
        cached = self._static.get(tool.name, _UNSET)
        if cached is _UNSET or cached[0] is not tool:
            compute = getattr(self.policy, "static_decision", None)
            cached = (tool, compute(tool) if compute is not None else None)
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

    def _run_for(self, call: ToolCall, principal: Principal) -> RunContext:
        # Calls without a run object: track state per (tenant, run_id) so loop guards still work;
        # without a run_id each call is its own run.
        if not call.run_id:
            # A standalone call: approvals bind to (principal, tool, arguments) without a run.
            return RunContext(principal=principal, extra={"ephemeral": True})
        key = f"{principal.tenant}\x00{call.run_id}"
        run = self._runs.get(key)
        if run is None:
            run = RunContext(run_id=call.run_id, principal=principal)
            self._runs[key] = run
            if len(self._runs) > _MAX_TRACKED_RUNS:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        return run

    # -- the pipeline ----------------------------------------------------------------------------

    async def call(
        self, call: ToolCall, principal: Principal, run: RunContext | None = None, **options: Any
    ) -> ToolResult:
        """Run one proposed call through every stage. Never raises."""
        try:
            return await self._call(call, principal, run, options)
        except Exception as exc:  # the last line of defence: a bug in a stage or a store
            logger.exception("gate failure on call %r", getattr(call, "id", None))
            error = ToolError(
                ErrorCode.INTERNAL,
                "The tool call could not be processed because of an internal error in the runtime. It was "
                "not executed. Retrying the same call will not help; continue without it or tell the user.",
                details={"exception": type(exc).__name__},
            )
            return ToolResult(
                call_id=str(getattr(call, "id", "")),
                name=str(getattr(call, "name", ""))[:200],
                is_error=True,
                content=error.message,
                error=error,
            )

    async def _call(
        self, call: ToolCall, principal: Principal, run: RunContext | None, options: dict[str, Any]
    ) -> ToolResult:
        if run is None:
            run = self._run_for(call, principal)
        if run.principal is None:
            run.principal = principal
        ctx = CallContext(gate=self, call=call, principal=principal, run=run)
        ctx.extra.update(options)
        if _tracing():
            with _tracer.start_as_current_span("maitre.tool_call") as span:
                result = await self._run_stages(ctx)
                if span.is_recording():
                    span.set_attribute("maitre.tool", ctx.tool.name if ctx.tool else str(call.name)[:200])
                    span.set_attribute("maitre.decision", ctx.decision)
                    span.set_attribute("maitre.is_error", result.is_error)
                    if result.error is not None:
                        span.set_attribute("maitre.error_code", str(result.error.code))
        else:
            result = await self._run_stages(ctx)
        for recorder in self.recorders:
            await recorder(ctx, result)
        return result

    async def _run_stages(self, ctx: CallContext) -> ToolResult:
        run = ctx.run
        error: ToolError | None = None
        for stage in self.stages:
            error = await stage(ctx)
            if error is not None:
                break
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
        for settle in self._settlers:
            await settle(ctx, result)
        if ctx.executed and ctx.tool is not None and ctx.tool.trust is Trust.UNTRUSTED:
            run.tainted = True
        return result
