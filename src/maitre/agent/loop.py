"""The agent loop: "a while loop with an LLM deciding what goes inside it" (seed 001), with real brakes.

```python
agent = Agent(model, box, stores=stores, limits=Limits(max_steps=8), system="You plan weekends.")
run = await agent.run("Plan my Saturday in Pune. Budget 1,000 rupees.", Principal(user="u1"))
run.status, run.stop_reason, run.final_text
```

Each step: check the brakes, fit the conversation into the context budget, ask the model, run every
tool call it proposed *concurrently* through the gate (results matched back by call id), and look
for progress. A call that needs a human approval pauses the run: its state is saved in the store and
`Agent.resume(run_id, decisions=...)` - in this process or another, after a restart - continues it;
the approved call executes once, with exactly the approved arguments, and a denial goes back to the
model. Nothing here raises for anything a model does: every ending is a `Run` with a `stop_reason`
and a final message a person can read.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

import anyio
from opentelemetry.trace import Span

from .._sync import run_sync
from ..context import RunContext, new_run_id
from ..dataflow import Provenance
from ..exceptions import UserError
from ..gate import CallOptions, Gate
from ..gate.budget import Budgets
from ..jsonutil import sha256_hex
from ..messages import AssistantMessage, Message, ToolResultMessage, UserMessage, conversation_tokens
from ..models.base import Model, ModelError, ModelRequest, Usage
from ..models.tracing import provider_of, traced_complete
from ..policy import Policy
from ..stores import Stores
from ..tokens import count_tokens
from ..tools import Tool, Toolbox
from ..tracing import agent_span, end_agent_span, tracing_enabled
from ..types import ErrorCode, Principal, TaintSource, ToolCall, ToolError, ToolResult, Trust
from .context_manager import ContextManager
from .limits import Limits, StopReason
from .notes import notes_toolbox
from .run import PendingCall, Run, RunStatus

__all__ = ["Agent", "ApprovalDecision"]

logger = logging.getLogger("maitre.agent")

_REASONS = {
    StopReason.MAX_STEPS: "it reached its step limit",
    StopReason.MAX_SECONDS: "it ran out of time",
    StopReason.MAX_INPUT_TOKENS: "it reached its input-token budget",
    StopReason.MAX_OUTPUT_TOKENS: "it reached its output-token budget",
    StopReason.MAX_TOTAL_TOKENS: "it reached its token budget",
    StopReason.MAX_COST: "it reached its cost budget",
    StopReason.LOOP_DETECTED: "it kept repeating the same call or error",
    StopReason.NO_PROGRESS: "several steps in a row brought no new information",
    StopReason.BUDGET_EXCEEDED: "the tool budget for this run is used up",
    StopReason.MODEL_ERROR: "the model could not be reached",
    StopReason.NEEDS_HUMAN: "a step's outcome is unknown and needs a person to check it",
}


_SUMMARY_HEADER = "[Summary of the earlier conversation, written to save context]"
"""Starts the user message that replaces summarised turns: the model wrote it, so it is not the
user's request (`Agent._seed` leaves it out)."""


@dataclass(kw_only=True, frozen=True, init=False)
class ApprovalDecision:
    """A human's decision on a pending call, passed to `Agent.resume(decisions={approval_id: ...})`."""

    approve: bool
    """True to approve, False to deny."""
    approver: Principal | str
    """Who decided (a name is a principal of the request's tenant)."""
    message: str | None = None
    """For a denial: what the model reads. For an approval: a note."""
    edited_arguments: dict[str, Any] | None = None
    """For an approval: the arguments to run instead of the model's (validated like a model's
    call). The same name as the approval record's; the old name `edited_args` still works and
    warns (DeprecationWarning)."""

    def __init__(
        self,
        *,
        approve: bool,
        approver: Principal | str,
        message: str | None = None,
        edited_arguments: dict[str, Any] | None = None,
        edited_args: dict[str, Any] | None = None,
    ) -> None:
        edited_arguments = _deprecated_edits(edited_arguments, edited_args, "ApprovalDecision")
        object.__setattr__(self, "approve", approve)
        object.__setattr__(self, "approver", approver)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "edited_arguments", edited_arguments)

    @property
    def edited_args(self) -> dict[str, Any] | None:
        """Deprecated name of `edited_arguments` (warns)."""
        warnings.warn(
            "ApprovalDecision.edited_args is deprecated; use edited_arguments",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.edited_arguments

    @classmethod
    def approved(
        cls,
        approver: Principal | str,
        edited_arguments: dict[str, Any] | None = None,
        *,
        edited_args: dict[str, Any] | None = None,
    ) -> ApprovalDecision:
        """An approval, optionally with edited arguments."""
        edited_arguments = _deprecated_edits(edited_arguments, edited_args, "ApprovalDecision.approved")
        return cls(approve=True, approver=approver, edited_arguments=edited_arguments)

    @classmethod
    def denied(cls, approver: Principal | str, message: str) -> ApprovalDecision:
        """A denial; `message` is what the model reads."""
        return cls(approve=False, approver=approver, message=message)


def _deprecated_edits(
    edited_arguments: dict[str, Any] | None, edited_args: dict[str, Any] | None, where: str
) -> dict[str, Any] | None:
    """`edited_arguments`, or the value given under its old name `edited_args` (with a warning)."""
    if edited_args is None:
        return edited_arguments
    warnings.warn(
        f"{where}(edited_args=...) is deprecated; pass edited_arguments=...",
        DeprecationWarning,
        stacklevel=3,
    )
    if edited_arguments is not None:
        raise UserError(f"{where} got both edited_arguments= and its deprecated name edited_args=")
    return edited_args


class Agent:
    """A model, a toolbox and a gate, in a loop with brakes. See the module docstring.

    Args:
        model: anything with `async complete(ModelRequest) -> ModelResponse` (see `maitre.models`).
        tools: a Toolbox, or several to combine (required unless `gate` is given).
        policy, budgets: passed to the gate.
        stores: where paused runs, approvals, idempotency keys and the audit log live (in-process if
            omitted: then a paused run can only be resumed by this object). The same name as
            `Gate(stores=)`; the old keyword `store=` still works and warns (DeprecationWarning).
        limits: the brakes (every default finite).
        system: the system prompt.
        context: the short-term memory manager (token budget for the conversation).
        notes: give the run `write_notes` / `read_notes` (working memory). Off unless asked for
            (`notes=True`): two more tools in front of every model, and a small one wanders into them.
        on_event: called with each event as it happens (the demo prints them).
        gate: use this gate (its toolbox, policy, stores and budgets) instead of building one. The
            arguments that only build a gate (`tools`, `core_tools`, `search_index`, `notes`,
            `policy`, `stores`, `budgets`) cannot be given with it: that is a `UserError` naming
            them, rather than silently ignoring them.
        core_tools: turn on tool search (seed 000): the model starts with these tools (plus the notes
            tools) and `search_tools`; what a search returns becomes callable from the next step. The
            definitions sent to the model stay within core + revealed.
        search_index: the `maitre.search.ToolIndex` to search (default: one over `tools`).
        name: what traces call this agent (`gen_ai.agent.name`; spans are `invoke_agent {name}`).
        durable: run every run as a DBOS workflow (`pip install 'maitre[durable]'`,
            `maitre.durable`): model and gate calls become recorded steps, and a run a crash
            interrupted is continued from its last recorded step by a durable worker. DBOS must be
            launched in the process (`maitre.durable.executor(...)`) before a run starts.
        durable_name: what a recovering worker looks the agent up by (with `durable`).
    """

    def __init__(
        self,
        model: Model,
        tools: Toolbox | Sequence[Toolbox] | None = None,
        *,
        policy: Policy | None = None,
        stores: Stores | None = None,
        limits: Limits | None = None,
        system: str | None = None,
        budgets: Budgets | None = None,
        context: ContextManager | None = None,
        notes: bool | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        gate: Gate | None = None,
        core_tools: Sequence[str] | None = None,
        search_index: Any = None,
        store: Stores | None = None,
        name: str | None = None,
        durable: bool = False,
        durable_name: str = "default",
    ) -> None:
        stores_name = "stores"
        if store is not None:
            warnings.warn(
                "Agent(store=...) is deprecated; pass stores=... (the name Gate uses)",
                DeprecationWarning,
                stacklevel=2,
            )
            if stores is not None:
                raise UserError("Agent got both stores= and its deprecated name store=; pass stores= only")
            stores, stores_name = store, "store"
        if gate is not None:
            ignored = [
                name
                for name, value in (
                    ("tools", tools),
                    ("core_tools", core_tools),
                    ("search_index", search_index),
                    ("notes", notes),
                    ("policy", policy),
                    (stores_name, stores),
                    ("budgets", budgets),
                )
                if value is not None
            ]
            if ignored:
                raise UserError(
                    f"Agent(gate=...) uses the gate's own toolbox, policy, stores and budgets, so "
                    f"{', '.join(ignored)} would be ignored: configure them on the Gate, or drop gate="
                )
        self.model = model
        self.name = name
        self.limits = limits or Limits()
        self.system = system
        self.context = context or ContextManager()
        self.on_event = on_event
        self.core_tools: frozenset[str] | None = None
        self.reveals: Any = None
        if gate is None:
            if tools is None:
                raise UserError("Agent needs tools (a Toolbox or several) or a gate")
            box = Toolbox()
            for toolbox in [tools] if isinstance(tools, Toolbox) else list(tools):
                box.include(toolbox)
            core = list(core_tools) if core_tools is not None else None
            if core is not None:
                from ..search import RevealLog, ToolIndex, search_tools_toolbox

                index = search_index if search_index is not None else ToolIndex(box)
                self.reveals = RevealLog()
                meta = search_tools_toolbox(index, log=self.reveals)
                box.include(meta)
                core.extend(meta.names())
            if notes:
                notes_box = notes_toolbox()
                box.include(notes_box)
                if core is not None:
                    core.extend(notes_box.names())
            if core is not None:
                unknown = [name for name in core if box.get(name) is None]
                if unknown:
                    raise UserError(f"core_tools names tools that are not in the toolbox: {unknown}")
                self.core_tools = frozenset(box.get(name).name for name in core)  # type: ignore[union-attr]
            gate = Gate(box, policy=policy, stores=stores, budgets=budgets)
        self.gate = gate
        self.stores = gate.stores
        """The gate's stores: paused runs live here too."""
        self._live: dict[str, Run] = {}
        self._definition_cache: dict[tuple[str, ...], int] = {}
        self.durable: Any = None
        """With `durable=True`, the `maitre.durable.DurableAgent` that runs, resumes and continues
        this agent's runs as workflows (it wraps this agent's model, gate and stores in place)."""
        if durable:
            from ..durable.agent import DurableAgent

            self.durable = DurableAgent(self, name=durable_name)

    def _outside_workflow(self) -> bool:
        """A durable agent called by the host (not by its own workflow): hand the call to DBOS."""
        if self.durable is None:
            return False
        from ..durable.agent import in_workflow

        return not in_workflow()

    @property
    def store(self) -> Stores:
        """Deprecated name of `stores` (warns)."""
        warnings.warn("Agent.store is deprecated; use Agent.stores", DeprecationWarning, stacklevel=2)
        return self.stores

    # -- public API --------------------------------------------------------------------------------

    async def run(
        self, goal_or_messages: str | Sequence[Message], principal: Principal, *, run_id: str | None = None
    ) -> Run:
        """Run a task until the model answers, a brake stops it, or a call needs approval (paused)."""
        if self._outside_workflow():
            return cast(Run, await self.durable.run(goal_or_messages, principal, run_id=run_id))
        messages: list[Message] = (
            [UserMessage(content=goal_or_messages)]
            if isinstance(goal_or_messages, str)
            else list(goal_or_messages)
        )
        if run_id is None:
            run_id = new_run_id()
        else:
            await self._claim_run_id(run_id, principal)
        run = Run(
            id=run_id, principal=principal, messages=messages, context=self.gate.new_run(principal, run_id)
        )
        self._seed(run.context, messages)
        if self.core_tools is not None:
            run.context.visible_tools = set(self.core_tools)
        if not tracing_enabled():
            return await self._loop(run)
        with self._span(run, resumed=False) as span:
            usage = run.usage
            run = await self._loop(run)
            self._end_span(span, run, usage)
        return run

    def _seed(self, context: RunContext, messages: Sequence[Message]) -> None:
        """What the run starts with, from the conversation passed in.

        Provenance (`maitre.dataflow`): the developer's system prompt, what the user said, and the
        trusted tool results up to the first untrusted one. The gate adds trusted results; the
        policy traces a tainted run's write and egress arguments to it. The model's own turns, and
        the summaries of earlier turns it wrote, are not trusted text.

        Taint: a conversation that already holds an untrusted result starts the run tainted, as
        the gate would have marked it had the result come through this run - the model reads that
        text either way, so an instruction in it must not reach a write unasked."""
        provenance = Provenance()
        if self.system:
            provenance.add_request(self.system)
        for message in messages:
            if isinstance(message, UserMessage):
                if not message.content.startswith(_SUMMARY_HEADER):  # the model wrote a summary
                    provenance.add_request(message.content)
            elif isinstance(message, ToolResultMessage):
                if message.trust is not Trust.TRUSTED and not context.tainted:
                    # after it, a trusted result may echo what the model took from it
                    context.tainted = True
                    context.taint_source = TaintSource(
                        tool=message.name, call_id=message.call_id[:200], at=time.time()
                    )
                if not context.tainted and not message.is_error:
                    provenance.add_trusted(message.content)
        context.provenance = provenance

    def run_sync(
        self, goal_or_messages: str | Sequence[Message], principal: Principal, *, run_id: str | None = None
    ) -> Run:
        """`run`, from synchronous code (a script, a notebook; see `maitre._sync`)."""
        return run_sync(self.run, goal_or_messages, principal, run_id=run_id)

    def resume_sync(
        self,
        run_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        principal: Principal | None = None,
    ) -> Run:
        """`resume`, from synchronous code."""
        return run_sync(self.resume, run_id, decisions, principal=principal)

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        principal: Principal | None = None,
    ) -> Run:
        """Continue a paused run: record decisions, run approved calls once, return denials to the model."""
        if self._outside_workflow():
            return cast(Run, await self.durable.resume(run_id, decisions, principal=principal))
        run = await self._load(run_id, principal)
        if run.status is not RunStatus.PAUSED:
            return run
        if not tracing_enabled():
            return await self._resume(run, decisions)
        with self._span(run, resumed=True) as span:
            usage = run.usage
            run = await self._resume(run, decisions)
            self._end_span(span, run, usage)
        return run

    async def continue_abandoned(self, run_id: str, *, principal: Principal | None = None) -> Run:
        """Continue a run that a process left `running` when it stopped mid-way (killed after the
        run saved a step): for the host's tooling that knows the run was abandoned - the resume
        worker calls it only for a run whose worker's claim was left behind (`maitre.agent.worker`).

        The run goes on from its last saved step: the model is asked again, and the calls it
        proposes again go through the gate, whose idempotency keys replay what already ran instead
        of running it twice. Called for a run that some process is still running, it would run
        twice: `resume` never does that (it continues paused runs only). A run that is not
        `running` is returned as it is.
        """
        if self._outside_workflow():
            return cast(Run, await self.durable.continue_abandoned(run_id, principal=principal))
        run = await self._load(run_id, principal)
        if run.status is not RunStatus.RUNNING:
            return run
        if not tracing_enabled():
            return await self._continue(run)
        with self._span(run, resumed=True) as span:
            usage = run.usage
            run = await self._continue(run)
            self._end_span(span, run, usage)
        return run

    async def _continue(self, run: Run) -> Run:
        if run.pending:  # it stopped between resuming decided calls and saving: decide them again
            return await self._resume(run, None)
        self._emit(run, "run_resumed", ready=0, still_pending=0, abandoned=True)
        return await self._loop(run)

    async def _resume(self, run: Run, decisions: Mapping[str, ApprovalDecision] | None) -> Run:
        for approval_id, decision in (decisions or {}).items():
            if decision.approve:
                await self.gate.approvals.approve(
                    approval_id, decision.approver, decision.edited_arguments, note=decision.message
                )
            else:
                await self.gate.approvals.deny(approval_id, decision.approver, decision.message or "denied")
        run.status = RunStatus.RUNNING
        run.stop_reason = None
        still_pending: list[PendingCall] = []
        ready: list[PendingCall] = []
        for pending in run.pending:
            request = await self.gate.approvals.get(pending.approval_id)
            if request is not None and request.status == "pending":
                still_pending.append(pending)
                continue
            ready.append(pending)
            if request is not None:
                self._emit(
                    run,
                    "approval_decided",
                    approval_id=pending.approval_id,
                    tool=pending.tool,
                    status=request.status,
                    approver=request.approver,
                    edited=request.edited_arguments is not None,
                )
        self._emit(run, "run_resumed", ready=len(ready), still_pending=len(still_pending))
        results: list[tuple[PendingCall, ToolResult]] = []
        for pending in ready:
            result = await self.gate.call(
                pending.call, run.principal, run.context, CallOptions(approval_id=pending.approval_id)
            )
            results.append((pending, result))
        for pending, result in results:
            self._record_result(run, pending.call, result)
        run.pending = still_pending
        if still_pending:
            return await self._pause(run)
        return await self._loop(run)

    # -- tracing (see maitre.tracing) ---------------------------------------------------------------

    def _span(self, run: Run, *, resumed: bool) -> AbstractContextManager[Span]:
        """The run's `invoke_agent` span (a new one for each resumption, same conversation id)."""
        model_name = getattr(self.model, "name", None)
        return agent_span(
            run_id=run.id,
            agent_name=self.name,
            provider=provider_of(self.model),
            model=model_name if isinstance(model_name, str) else None,
            resumed=resumed,
            system=self.system,
            messages=[] if resumed else run.messages,
        )

    def _end_span(self, span: Span, run: Run, before: Usage) -> None:
        end_agent_span(
            span,
            status=str(run.status),
            stop_reason=str(run.stop_reason) if run.stop_reason else None,
            input_tokens=run.usage.input_tokens - before.input_tokens,
            output_tokens=run.usage.output_tokens - before.output_tokens,
            pending=len(run.pending),
            final_text=run.final_text,
        )

    # -- the loop ----------------------------------------------------------------------------------

    async def _loop(self, run: Run) -> Run:
        started = time.monotonic() - run.elapsed_s
        seen_contents: set[str] = set()
        idle_steps = 0
        loops = sum(
            1 for e in run.events if e.get("type") == "tool_result" and e.get("error_code") == "LOOP_DETECTED"
        )
        try:
            while True:
                run.elapsed_s = time.monotonic() - started
                brake = self._brake(run)
                if brake is not None:
                    return await self._stop(run, brake)
                response = await self._ask_model(run, started)
                if isinstance(response, _ModelFailure):
                    return await self._stop(run, response.reason, why=response.why)
                calls = response.tool_calls
                run.messages.append(
                    AssistantMessage(
                        text=response.text, tool_calls=calls, provider_state=response.provider_state
                    )
                )
                run.steps += 1
                if not calls:
                    run.final_text = response.text
                    return await self._finish(run)
                results = await self._run_calls(run, calls)
                pending = [(c, r.approval) for c, r in results if r.approval is not None]
                for call, result in results:
                    if result.approval is None:
                        self._record_result(run, call, result)
                if pending:
                    for call, ticket in pending:
                        run.pending.append(
                            PendingCall(
                                call=call,
                                approval_id=ticket.approval_id,
                                tool=ticket.tool,
                                arguments=ticket.arguments,
                                reason=ticket.reason,
                                ticket=ticket,
                            )
                        )
                        self._emit(
                            run,
                            "approval_requested",
                            call_id=call.id,
                            approval_id=ticket.approval_id,
                            tool=ticket.tool,
                            arguments=ticket.arguments,
                            rule=ticket.rule,
                        )
                    return await self._pause(run)
                codes = [r.error.code if r.error else None for _, r in results]
                loops += codes.count(ErrorCode.LOOP_DETECTED)
                if loops >= self.limits.loop_refusals:
                    return await self._stop(run, StopReason.LOOP_DETECTED)
                if codes and all(code is ErrorCode.BUDGET_EXCEEDED for code in codes):
                    return await self._stop(run, StopReason.BUDGET_EXCEEDED)
                new_info = False
                for _, result in results:
                    if not result.is_error:
                        digest = sha256_hex(result.content)
                        if digest not in seen_contents:
                            seen_contents.add(digest)
                            new_info = True
                idle_steps = 0 if new_info else idle_steps + 1
                if idle_steps >= self.limits.no_progress_steps:
                    looped = ErrorCode.LOOP_DETECTED in codes
                    return await self._stop(
                        run, StopReason.LOOP_DETECTED if looped else StopReason.NO_PROGRESS
                    )
                await self._save(run)
        except Exception:  # a bug of ours must not escape into the host either
            logger.exception("agent loop failed in run %s", run.id)
            run.final_text = "The run stopped because of an internal error in the runtime."
            return await self._stop(run, StopReason.MODEL_ERROR, keep_text=True)

    def _brake(self, run: Run) -> StopReason | None:
        limits = self.limits
        if run.steps >= limits.max_steps:
            return StopReason.MAX_STEPS
        if run.elapsed_s >= limits.max_seconds:
            return StopReason.MAX_SECONDS
        estimate = self._upcoming_input(run)
        run.context.extra["_input_estimate"] = estimate
        upcoming = int(estimate * _undercount(run))
        if run.usage.input_tokens + upcoming > limits.max_input_tokens:
            return StopReason.MAX_INPUT_TOKENS
        if run.usage.output_tokens >= limits.max_output_tokens:
            return StopReason.MAX_OUTPUT_TOKENS
        if run.usage.total_tokens + upcoming + _expected_output(run) > limits.max_total_tokens:
            return StopReason.MAX_TOTAL_TOKENS
        if run.cost_usd >= limits.max_cost_usd:
            return StopReason.MAX_COST
        return None

    def _upcoming_input(self, run: Run) -> int:
        """What the next model call will read at least: system, tool definitions, conversation."""
        tools = self.visible_tools(run)
        key = tuple(t.name for t in tools)
        cached = self._definition_cache.get(key)
        if cached is None:
            cached = self._definition_cache[key] = _definition_tokens(tools)
        return cached + count_tokens(self.system or "") + conversation_tokens(run.messages)

    def visible_tools(self, run: Run) -> list[Tool]:
        """The tools offered to the model in this step (tool search narrows them per run)."""
        visible = run.context.visible_tools
        tools = [t for t in self.gate.toolbox if visible is None or t.name in visible]
        if run.context.extra.get("handles"):
            tools.extend(self.gate.builtins)
        return tools

    async def _ask_model(self, run: Run, started: float) -> Any:
        messages = await self._fit_context(run)
        tools = self.visible_tools(run)
        request = ModelRequest(
            messages=list(messages),
            tools=tools,
            system=self.system,
            max_output_tokens=self.limits.max_output_tokens_per_call,
        )
        remaining = max(0.1, self.limits.max_seconds - (time.monotonic() - started))
        try:
            with anyio.fail_after(remaining):
                response = await traced_complete(self.model, request, conversation_id=run.id)
        except TimeoutError:
            # The run's own time limit: the request was cancelled (its connection closed, which is
            # how llama.cpp's server and vLLM learn to stop generating), not an unreachable model.
            logger.warning("run %s reached its time limit while the model was answering", run.id)
            self._emit(run, "model_call_cancelled", step=run.steps + 1, after_s=round(remaining, 3))
            why = (
                f"it reached its time limit ({self.limits.max_seconds:g} s) while the model was still "
                "answering (the request was cancelled)"
            )
            return _ModelFailure(StopReason.MAX_SECONDS, why)
        except ModelError as exc:
            logger.warning("model call failed in run %s: %s", run.id, exc)
            if exc.timed_out:
                return _ModelFailure(
                    StopReason.MODEL_ERROR,
                    f"the model did not answer within its request time limit ({str(exc)[:200]})",
                )
            return _ModelFailure(StopReason.MODEL_ERROR, f"the model call failed ({str(exc)[:200]})")
        self._account(run, response.usage, response.model or getattr(self.model, "name", ""))
        definition_tokens = self._definition_cache.get(tuple(t.name for t in tools))
        if definition_tokens is None:
            definition_tokens = _definition_tokens(tools)
        run.tool_definition_tokens += definition_tokens
        self._emit(
            run,
            "model_call",
            step=run.steps + 1,
            tools_offered=len(tools),
            definition_tokens=definition_tokens,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            stop_reason=response.stop_reason,
            estimated_input_tokens=run.context.extra.get("_input_estimate"),
        )
        return response

    async def _fit_context(self, run: Run) -> list[Message]:
        manager = self.context
        messages, dropped = manager.trim(run.messages)
        if dropped:
            run.messages = messages
            self._emit(run, "context_trimmed", tokens_dropped=dropped)
        if conversation_tokens(messages) <= manager.max_tokens or not manager.summarise:
            return messages
        split = manager.summary_split(messages)
        if split <= 1:
            return messages
        head, tail = messages[:split], messages[split:]
        request = ModelRequest(messages=[UserMessage(content=manager.summary_request_text(head))], tools=[])
        try:
            response = await traced_complete(self.model, request, conversation_id=run.id)
        except ModelError:
            return messages
        self._account(run, response.usage, response.model)
        summary = UserMessage(content=f"{_SUMMARY_HEADER}\n{response.text}")
        run.messages = [summary, *tail]
        self._emit(run, "context_summarised", messages_replaced=len(head))
        return run.messages

    async def _run_calls(self, run: Run, calls: list[ToolCall]) -> list[tuple[ToolCall, ToolResult]]:
        allowed = calls[: self.limits.max_tool_calls_per_step]
        results: dict[int, ToolResult] = {}
        for call in calls:
            self._emit(run, "tool_call", call_id=call.id, name=call.name, arguments=call.arguments)

        async def one(index: int, call: ToolCall) -> None:
            results[index] = await self.gate.call(call, run.principal, run.context)

        async with anyio.create_task_group() as group:
            for index, call in enumerate(allowed):
                group.start_soon(one, index, call)
        for index in range(len(allowed), len(calls)):
            error = ToolError(
                ErrorCode.BUDGET_EXCEEDED,
                f"At most {self.limits.max_tool_calls_per_step} tool calls per step; this one was not run. Ask "
                "for fewer calls at once.",
            )
            results[index] = ToolResult(
                call_id=calls[index].id,
                name=calls[index].name,
                is_error=True,
                content=error.message,
                error=error,
            )
        run.tool_calls += len(allowed)
        return [(calls[i], results[i]) for i in range(len(calls))]

    def _record_result(self, run: Run, call: ToolCall, result: ToolResult) -> None:
        if result.handle:
            run.context.extra.setdefault("handles", []).append(result.handle)
        run.messages.append(
            ToolResultMessage(
                call_id=call.id,
                name=call.name,
                content=result.content,
                is_error=result.is_error,
                trust=result.trust,
                source=result.provenance.source if result.provenance else "gate",
                error_code=str(result.error.code) if result.error else None,
            )
        )
        self._emit(
            run,
            "tool_result",
            call_id=call.id,
            name=call.name,
            is_error=result.is_error,
            error_code=str(result.error.code) if result.error else None,
            replayed=result.replayed,
            trust=str(result.trust),
            handle=result.handle,
            content=result.content,
        )

    def _account(self, run: Run, usage: Usage, model: str) -> None:
        run.usage = run.usage + usage
        cost = _cost(model, usage)
        if cost:
            run.cost_usd += cost

    # -- endings -------------------------------------------------------------------------------------

    async def _finish(self, run: Run) -> Run:
        run.status = RunStatus.FINISHED
        run.stop_reason = StopReason.COMPLETED
        self._emit(
            run, "run_finished", status=str(run.status), stop_reason=str(run.stop_reason), text=run.final_text
        )
        await self._save(run)
        return run

    async def _pause(self, run: Run) -> Run:
        run.status = RunStatus.PAUSED
        run.stop_reason = StopReason.APPROVAL_REQUIRED
        tools = ", ".join(p.tool for p in run.pending)
        run.final_text = f"Waiting for a human to approve: {tools}. The run resumes once it is decided."
        self._emit(run, "run_paused", pending=[p.approval_id for p in run.pending])
        await self._save(run)
        return run

    async def _stop(
        self, run: Run, reason: StopReason, *, keep_text: bool = False, why: str | None = None
    ) -> Run:
        run.status = RunStatus.STOPPED
        run.stop_reason = reason
        if not keep_text or not run.final_text:
            run.final_text = _brake_message(run, reason, why)
        self._emit(run, "run_finished", status=str(run.status), stop_reason=str(reason), text=run.final_text)
        await self._save(run)
        return run

    # -- persistence -----------------------------------------------------------------------------------

    async def _save(self, run: Run) -> None:
        # Keep only paused runs in process memory (a fallback if the store write fails); the store
        # is where runs live, so finished runs are not held for the life of the agent.
        if run.status is RunStatus.PAUSED:
            self._live[run.id] = run
        else:
            self._live.pop(run.id, None)
        # A run that could hold personal data (a tool of the box says `personal`) is sealed under
        # its user's key, so forgetting the user (`Stores.erase_subject`) shreds the transcript too.
        personal = any(tool.personal for tool in self.gate.toolbox)
        try:
            await self.stores.runs.save(
                run.id,
                tenant=run.principal.tenant,
                status=str(run.status),
                state_json=run.to_json(),
                now=time.time(),
                user=run.principal.user if personal else None,
            )
        except Exception:
            logger.exception("could not save run %s", run.id)

    async def _load(self, run_id: str, principal: Principal | None) -> Run:
        """The run `run_id`, if it belongs to `principal` (any principal when None: the host's own
        tooling, such as `maitre runs resume`). Another user's run is, to them, no run at all."""
        tenant = principal.tenant if principal else None
        saved = await self.stores.runs.load(run_id, tenant=tenant)
        run = Run.from_json(saved.state_json) if saved is not None else self._live.get(run_id)
        if run is not None and (principal is None or _owns(principal, run)):
            return run
        raise UserError(f"no run {run_id!r} in this agent's store")

    async def _claim_run_id(self, run_id: str, principal: Principal) -> None:
        """A host-chosen run id must not name another principal's run (it would be overwritten), nor
        a saga's (`saga:<id>`: a run under it would share the saga's idempotency keys and replay
        its calls)."""
        if run_id.startswith("saga:"):
            raise UserError(f"the run id {run_id!r} starts with 'saga:', which names sagas; use another id")
        saved = await self.stores.runs.load(run_id)
        existing = Run.from_json(saved.state_json) if saved is not None else self._live.get(run_id)
        if existing is not None and not _owns(principal, existing):
            raise UserError(f"the run id {run_id!r} is taken; start the run with another id")

    def _emit(self, run: Run, kind: str, **data: Any) -> None:
        event = {"type": kind, "run_id": run.id, **data}
        run.events.append(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:
                logger.exception("on_event callback failed")


def _undercount(run: Run) -> float:
    """How much the provider's count of the last call's input exceeded maitre's estimate of it (at
    least 1): the brakes scale the next estimate by it, so a budget is not overrun because the
    provider counts tokens its own way."""
    for event in reversed(run.events):
        if event.get("type") == "model_call":
            reported = int(event.get("input_tokens") or 0)
            estimated = int(event.get("estimated_input_tokens") or 0)
            return max(1.0, reported / estimated) if estimated > 0 and reported > 0 else 1.0
    return 1.0


def _expected_output(run: Run) -> int:
    """What the next model call will likely write: the most any call of this run wrote so far."""
    return max(
        (int(e.get("output_tokens") or 0) for e in run.events if e.get("type") == "model_call"), default=0
    )


@dataclass(frozen=True)
class _ModelFailure:
    """Why a model call gave no answer: the run's stop reason and the words that explain it."""

    reason: StopReason
    why: str


def _definition_tokens(tools: list[Tool]) -> int:
    if not tools:
        return 0
    from ..tools.export import export_definitions

    return export_definitions(tools, "anthropic").total_tokens


def _cost(model: str, usage: Usage) -> float | None:
    try:
        from ..models.pricing import cost_usd
    except ImportError:
        return None
    try:
        return cost_usd(model, usage)
    except Exception:
        return None


def _brake_message(run: Run, reason: StopReason, why: str | None = None) -> str:
    why = why or _REASONS.get(reason, str(reason))
    found = list(
        {m.content: m for m in run.messages if isinstance(m, ToolResultMessage) and not m.is_error}.values()
    )[-3:]
    last_text = next(
        (m.text for m in reversed(run.messages) if isinstance(m, AssistantMessage) and m.text), ""
    )
    text = f"I stopped before finishing because {why}."
    if found:
        text += " What I found so far: " + "; ".join(f"{m.name}: {m.content[:160]}" for m in found) + "."
    if last_text:
        text += f" My last note: {last_text[:300]}"
    return text


def _owns(principal: Principal, run: Run) -> bool:
    return run.principal.tenant == principal.tenant and run.principal.user == principal.user
