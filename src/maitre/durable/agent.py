"""Agent runs as DBOS workflows: each model call and each gate call a recorded step.

```python
durable = DurableAgent(agent)                       # before launch: recovery finds it by name
launch(system_database_for("maitre.db"), executor_id="worker-1")
run = await durable.run("refund order A1042", alice, run_id="r-1")
```

The agent loop is not changed: `DurableAgent` gives it a model and a gate that record what they
return through the protocols it already calls (`Model.complete`, `Gate.call`), and a run store whose
`load` is recorded too. When the process dies, DBOS runs the workflow again (on restart, or on
another worker that found this executor dead, see `maitre.durable.worker`): the loop runs from the
start, every recorded step returns what it returned the first time without running (no model call
is repeated, no tool is called again), and the first step that was not recorded runs for real.

A write that ran and then broke (raised a bug rather than a `ToolError`, or ran past its timeout)
is in doubt the same way: its reconcile hook, asked in the same step, settles it, or the run stops
as needing a person - the model never reads "continue without it" about a refund that may have
gone through.

Exactly-once effects are the gate's: a step killed inside a write runs again, and its idempotency
key - minted from the run id and the arguments, the same in the new attempt - decides. A key left
in flight by a dead process is in doubt: the tool's `reconcile` hook says whether the effect
happened (the call replays it or runs once); without a hook the run stops as needing a person
(`NeedsHuman`), with the call named, instead of handing the model a refusal it might read past.

A write the gate finds in flight in another process (a twin, or the attempt of a dead host whose
lease still runs) is waited for, within the call's lease, instead of being reported to the model.

What the gate changes in the run (loop guard, budgets, taint, provenance) is recorded with each
gate step and restored when the step replays. Gate calls of one step run one at a time in a
durable run, in the order the model proposed them, so the replay meets them in the same order.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
from dbos import DBOS, SetWorkflowID
from dbos._error import DBOSWorkflowIDInUseError

from ..context import RunContext, new_run_id
from ..exceptions import UserError
from ..gate import CallOptions, Gate
from ..gate.idempotency import call_lease_s, needs_key
from ..messages import Message, UserMessage, message_from_dict
from ..models.base import Model, ModelError, ModelRequest, ModelResponse
from ..storage.base import ApprovalStateError, RunState
from ..types import ErrorCode, Principal, ToolCall, ToolResult
from ._codec import (
    apply_context,
    decode_model,
    decode_result,
    encode_model,
    encode_model_error,
    encode_result,
)

if TYPE_CHECKING:
    from ..agent import Agent, ApprovalDecision, Run

__all__ = [
    "DurableAgent",
    "DurableGate",
    "DurableModel",
    "NeedsHuman",
    "NeedsHumanInfo",
    "RESUME_MARK",
    "RecordedRuns",
    "SAGA_RUN_PREFIX",
    "Sealer",
    "durable_run",
    "get_agent",
    "in_doubt",
    "in_workflow",
]

logger = logging.getLogger("maitre.durable")

_AGENTS: dict[str, DurableAgent] = {}

_PRINCIPAL: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "maitre_durable_principal", default=None
)
"""Who the workflow running in this task acts for (the model proxy is not told)."""

_PURPOSE = "maitre.durable.step"

RESUME_MARK = ":resume:"
"""What a resumption's workflow id holds between the run id and the pause's digest; a run id may
not hold it (a run started under `r1:resume:...` would take the id of r1's resumption)."""

SAGA_RUN_PREFIX = "saga:"
"""The run id a saga's calls carry starts with this (`maitre.durable.saga`): no run may."""

_RUN_WORKFLOW = "maitre.durable.run"


def _owns(principal: Principal, owner: Principal) -> bool:
    return owner.tenant == principal.tenant and owner.user == principal.user


def _taken(run_id: str) -> UserError:
    return UserError(f"the run id {run_id!r} is taken; start the run with another id")


class Sealer:
    """Seals what a step records under the run's subject key when the agent has personal tools
    (`Tool.personal`), so forgetting a user (`Stores.erase_subject`) reaches DBOS's records too:
    a step recorded for an erased user no longer opens, and its workflow cannot replay it."""

    def __init__(self, stores: Any) -> None:
        self.keys = getattr(stores, "subject_keys", None)

    async def seal(self, principal: Principal | None, text: str) -> str:
        if self.keys is None or principal is None:
            return text
        key = await self.keys.key(principal.tenant, principal.user)
        sealed: str = key.seal(text, _PURPOSE)
        return sealed

    async def open(self, principal: Principal | None, text: str) -> str:
        if self.keys is None or principal is None:
            return text
        key = await self.keys.key(principal.tenant, principal.user, create=False)
        plain = None if key is None else key.open(text, _PURPOSE)
        if plain is None:
            raise UserError(
                "a recorded step of this run belongs to a user who was forgotten (their key was "
                "erased): the run cannot be replayed"
            )
        return str(plain)


def get_agent(name: str) -> DurableAgent:
    """The durable agent registered under `name` in this process."""
    found = _AGENTS.get(name)
    if found is None:
        raise UserError(
            f"no durable agent named {name!r} in this process: build DurableAgent(..., name={name!r}) "
            "before launch (a worker builds it from its FILE:FACTORY)"
        )
    return found


def in_doubt(result: ToolResult, approval_id: str | None = None) -> bool:
    """True when the gate says an earlier attempt of this write may or may not have happened.

    That is an idempotency key left uncertain (or in flight by a dead process), and - for an
    approved call - its own approval found already used without a stored result to replay: the
    gate consumes an approval just before the call runs and replays a completed one, so a used
    approval that does not replay means the attempt that used it never finished."""
    error = result.error
    if error is None or error.code is not ErrorCode.INVALID_STATE:
        return False
    if error.details.get("idempotency") == "uncertain":
        return True
    return (
        approval_id is not None
        and error.details.get("approval_id") == approval_id
        and error.details.get("status") == "used"
    )


@dataclass(frozen=True)
class NeedsHumanInfo:
    """The call a run stopped at because its outcome is in doubt."""

    tool: str
    call_id: str
    message: str


class NeedsHuman(BaseException):
    """A write is in doubt after a crash and its tool has no `reconcile` hook: the run stops here.

    A BaseException on purpose: it passes through the agent loop (which turns every `Exception`
    into an ordinary stop) to the workflow, which stops the run as needing a person."""

    def __init__(self, info: NeedsHumanInfo) -> None:
        super().__init__(info.message)
        self.info = info


def in_workflow() -> bool:
    """Is this code running inside a DBOS workflow (the durable agent's own run of the loop)?"""
    return DBOS.workflow_id is not None


def _needs_human_in(exc: BaseException) -> NeedsHuman | None:
    if isinstance(exc, NeedsHuman):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _needs_human_in(inner)
            if found is not None:
                return found
    return None


def _in_flight_elsewhere(result: ToolResult) -> bool:
    error = result.error
    return (
        error is not None
        and error.code is ErrorCode.CONFLICT
        and error.details.get("idempotency") == "in_flight"
    )


def _broke(result: ToolResult, tool: Any) -> bool:
    """A write that ran and then raised (a bug, not a `ToolError`) or ran past its timeout: the gate
    marked its key uncertain, because the side effect may have happened. In a durable run that is
    a call in doubt, not an error for the model to read past."""
    error = result.error
    return (
        error is not None
        and error.code in (ErrorCode.TIMEOUT, ErrorCode.INTERNAL)
        and error.details.get("executed") is not False
        and needs_key(tool)
    )


def _require_launched() -> None:
    from .runtime import is_launched

    if not is_launched():
        raise UserError(
            "DBOS is not launched in this process: enter maitre.durable.executor(system_db, "
            "executor_id=...) (or call maitre.durable.launch) after building the durable agents"
        )


class DurableModel:
    """A model whose `complete` is a DBOS step inside a workflow (plain pass-through outside)."""

    def __init__(self, model: Model, sealer: Sealer | None = None) -> None:
        self.inner = model
        self.name = model.name
        self.sealer = sealer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not in_workflow():
            return await self.inner.complete(request)
        text = await DBOS.run_step_async({"name": "maitre.model.complete"}, self._step, request)
        if self.sealer is not None:
            text = await self.sealer.open(_PRINCIPAL.get(), text)
        return decode_model(text)

    async def _step(self, request: ModelRequest) -> str:
        try:
            response = await self.inner.complete(request)
        except ModelError as exc:
            text = encode_model_error(exc)
        except Exception as exc:
            # A bug in the adapter: recorded as a failed call (JSON, like every step), not left for
            # DBOS to pickle the exception - its message, perhaps holding the user's words, unsealed.
            logger.error("model %s raised %s in a durable step", self.name, type(exc).__name__, exc_info=True)
            failed = ModelError(f"the model adapter raised {type(exc).__name__}", retryable=False)
            text = encode_model_error(failed)
        else:
            text = encode_model(response)
        return await self.sealer.seal(_PRINCIPAL.get(), text) if self.sealer is not None else text


class DurableGate:
    """A gate whose `call` is a DBOS step inside a workflow, recording the result and the run's gate
    state after it; everything else is the wrapped gate's."""

    def __init__(self, gate: Gate, sealer: Sealer | None = None) -> None:
        self.inner = gate
        if sealer is None and any(getattr(tool, "personal", False) for tool in gate.toolbox):
            sealer = Sealer(gate.stores)  # a personal tool's recorded results are sealed, always
        self.sealer = sealer
        self._locks: dict[int, tuple[anyio.Lock, int]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def call(
        self,
        call: ToolCall,
        principal: Principal,
        run: RunContext | None = None,
        options: CallOptions | None = None,
        *,
        approval_id: str | None = None,
    ) -> ToolResult:
        if not in_workflow() or run is None:
            return await self.inner.call(call, principal, run, options, approval_id=approval_id)
        key = id(run)
        lock, users = self._locks.get(key, (anyio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:  # FIFO: the calls of one step reach DBOS in the order they were proposed
                text = await DBOS.run_step_async(
                    {"name": "maitre.gate.call"}, self._step, call, principal, run, options, approval_id
                )
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
        if self.sealer is not None:
            text = await self.sealer.open(principal, text)
        result, recorded = decode_result(text)
        if recorded is not None:
            apply_context(run, recorded)
        used = approval_id or (options.approval_id if options is not None else None)
        if in_doubt(result, used) or _broke(result, self.inner.toolbox.get(call.name)):
            raise NeedsHuman(
                NeedsHumanInfo(
                    tool=result.name,
                    call_id=call.id,
                    message=(
                        f"The run stopped: an attempt of {result.name} (call {call.id}) was "
                        "interrupted or broke and may or may not have taken effect, and no reconcile "
                        "check settled it. A person must check it before the run goes on."
                    ),
                )
            )
        return result

    async def _step(
        self,
        call: ToolCall,
        principal: Principal,
        run: RunContext,
        options: CallOptions | None,
        approval_id: str | None,
    ) -> str:
        before = run.to_dict()
        result = await self.inner.call(call, principal, run, options, approval_id=approval_id)
        if _in_flight_elsewhere(result):
            # The same operation is running in another process (a twin, or the attempt of a process
            # on another host whose lease still runs). A durable run waits for it - its result then
            # replays, or once the lease is over the key is in doubt - rather than telling the model.
            tool = self.inner.toolbox.get(call.name)
            limit = call_lease_s(tool, self.inner.limits) + 1.0 if tool is not None else 0.0
            deadline = time.monotonic() + limit
            while _in_flight_elsewhere(result) and time.monotonic() < deadline:
                error = result.error
                assert error is not None
                pause = max(0.05, min(error.retry_after_s or 0.5, 0.5, deadline - time.monotonic()))
                await anyio.sleep(pause)
                apply_context(run, before)  # the same call again, not a repeat for the loop guard
                result = await self.inner.call(call, principal, run, options, approval_id=approval_id)
        tool = self.inner.toolbox.get(call.name)
        if _broke(result, tool) and tool is not None and tool.reconcile is not None:
            # The same call again, in the same step: the gate finds its key uncertain and the tool's
            # reconcile check says whether the effect happened (replayed) or not (run once more).
            apply_context(run, before)
            result = await self.inner.call(call, principal, run, options, approval_id=approval_id)
        text = encode_result(result, run)
        return await self.sealer.seal(principal, text) if self.sealer is not None else text


class RecordedRuns:
    """A run store whose `load` is a DBOS step inside a workflow: a resumed run starts from the state
    it had when the workflow began, however often the loop saved since."""

    def __init__(self, inner: Any, sealer: Sealer | None = None) -> None:
        self.inner = inner
        self.sealer = sealer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        if not in_workflow():
            loaded: RunState | None = await self.inner.load(run_id, tenant=tenant)
            return loaded
        text = await DBOS.run_step_async({"name": "maitre.runs.load"}, self._step, run_id, tenant)
        if self.sealer is not None:
            text = await self.sealer.open(_PRINCIPAL.get(), text)
        data = json.loads(text)
        return None if data is None else RunState(data["status"], data["state_json"])

    async def _step(self, run_id: str, tenant: str | None) -> str:
        saved = await self.inner.load(run_id, tenant=tenant)
        text = json.dumps(None if saved is None else {"status": saved.status, "state_json": saved.state_json})
        return await self.sealer.seal(_PRINCIPAL.get(), text) if self.sealer is not None else text


def _with_recorded_runs(stores: Any, sealer: Sealer | None) -> Any:
    if isinstance(stores.runs, RecordedRuns):
        return stores
    import copy

    view = copy.copy(stores)  # the same stores, but the agent's run loads are recorded
    view.runs = RecordedRuns(stores.runs, sealer)
    return view


class DurableAgent:
    """An `Agent` whose runs and resumptions are DBOS workflows. See the module docstring.

    Args:
        agent: the agent (its model, gate and stores are wrapped in place: build one per durable
            agent, and use the durable agent from then on).
        name: what recovered workflows look the agent up by; every process that may recover this
            agent's runs builds it under the same name before `launch`.
    """

    agent: Agent
    name: str

    def __init__(self, agent: Agent, *, name: str = "default") -> None:
        registered = _AGENTS.get(name)
        if registered is not None and registered.agent is not agent:
            raise UserError(f"a durable agent named {name!r} is already registered in this process")
        self.agent = agent
        self.name = name
        personal = any(getattr(tool, "personal", False) for tool in agent.gate.toolbox)
        self.sealer = Sealer(agent.gate.stores) if personal else None
        """Set when the agent has personal tools: what its steps record is sealed per subject."""
        if not isinstance(agent.model, DurableModel):
            agent.model = cast(Model, DurableModel(agent.model, self.sealer))
        if not isinstance(agent.gate, DurableGate):
            agent.gate = cast(Gate, DurableGate(agent.gate, self.sealer))
        agent.stores = _with_recorded_runs(agent.stores, self.sealer)
        _AGENTS[name] = self

    @property
    def gate(self) -> Gate:
        return self.agent.gate

    @property
    def stores(self) -> Any:
        return self.agent.stores

    def _runs(self) -> Any:
        """The agent's run store itself (its loads not recorded)."""
        runs = self.agent.stores.runs
        return runs.inner if isinstance(runs, RecordedRuns) else runs

    def unregister(self) -> None:
        if _AGENTS.get(self.name) is self:
            del _AGENTS[self.name]

    async def run(
        self, goal_or_messages: str | Sequence[Message], principal: Principal, *, run_id: str | None = None
    ) -> Run:
        """`Agent.run` as a workflow whose id is the run id (run again with the same id: the
        recorded outcome, nothing runs twice)."""
        from ..agent import Run

        messages = (
            [UserMessage(content=goal_or_messages)]
            if isinstance(goal_or_messages, str)
            else list(goal_or_messages)
        )
        _require_launched()
        run_id = run_id or new_run_id()
        if RESUME_MARK in run_id:
            raise UserError(f"a run id may not contain {RESUME_MARK!r}: it is reserved for resumptions")
        if run_id.startswith(SAGA_RUN_PREFIX):
            raise UserError(f"a run id may not start with {SAGA_RUN_PREFIX!r}: it is reserved for sagas")
        await self._claim(run_id, principal)
        given = await self._seal(principal, json.dumps([m.to_dict() for m in messages], default=str))
        try:
            # "reject": DBOS would hand anyone who starts a workflow under an id in use its recorded
            # output; only the principal who started it gets that (checked below, then asked again)
            with SetWorkflowID(run_id, workflow_id_reuse_policy="reject"):
                text = await _run_workflow(self.name, run_id, given, principal.to_dict())
        except DBOSWorkflowIDInUseError:
            await self._started_by(run_id, principal)
            with SetWorkflowID(run_id):
                text = await _run_workflow(self.name, run_id, given, principal.to_dict())
        run = Run.from_json(await self._open(principal, text))
        if not _owns(principal, run.principal):  # pragma: no cover - the checks above refuse first
            raise _taken(run_id)
        return run

    async def _claim(self, run_id: str, principal: Principal) -> None:
        """A run id another principal's run already has (saved by the agent, durable or not) is
        not theirs to start under: refused before a workflow is started under it."""
        from ..agent import Run

        saved = await self._runs().load(run_id)
        if saved is not None and not _owns(principal, Run.from_json(saved.state_json).principal):
            raise _taken(run_id)

    async def _started_by(self, run_id: str, principal: Principal) -> None:
        """The workflow `run_id` is this agent's run of `principal`, or the id is taken."""
        found = await DBOS.list_workflows_async(workflow_ids=[run_id], load_input=True, load_output=False)
        for status in found:
            inputs: Any = status.input
            arguments = tuple(inputs.get("args") or ()) if isinstance(inputs, dict) else ()
            if status.name != _RUN_WORKFLOW or len(arguments) < 4 or arguments[0] != self.name:
                raise _taken(run_id)
            who = arguments[3]
            if not isinstance(who, dict) or not _owns(principal, Principal.from_dict(who)):
                raise _taken(run_id)

    async def resume(
        self,
        run_id: str,
        decisions: Mapping[str, ApprovalDecision] | None = None,
        *,
        principal: Principal | None = None,
    ) -> Run:
        """`Agent.resume` as a workflow. Its id names the pause it resumes (the run and the approvals
        it waits on), so two workers resuming the same pause run one workflow."""
        from ..agent import Run

        _require_launched()
        tenant = principal.tenant if principal else None
        saved = await self._runs().load(run_id, tenant=tenant)
        if saved is None:
            raise UserError(f"no run {run_id!r} in this agent's store")
        run = Run.from_json(saved.state_json)
        if principal is not None and not _owns(principal, run.principal):
            # another user's run is, to them, no run at all: nothing is decided, no workflow starts
            raise UserError(f"no run {run_id!r} in this agent's store")
        if not run.paused:
            return run
        pending = ",".join(sorted(p.approval_id for p in run.pending))
        workflow_id = f"{run_id}{RESUME_MARK}{hashlib.sha256(pending.encode()).hexdigest()[:16]}"
        encoded = {
            approval_id: {
                "approve": d.approve,
                "approver": d.approver.to_dict() if isinstance(d.approver, Principal) else d.approver,
                "message": d.message,
                "edited_arguments": d.edited_arguments,
            }
            for approval_id, d in (decisions or {}).items()
        }
        with SetWorkflowID(workflow_id):
            text = await _resume_workflow(
                self.name, run_id, principal.to_dict() if principal else None, encoded
            )
        return Run.from_json(await self._open(run.principal, text))

    async def continue_abandoned(self, run_id: str, *, principal: Principal | None = None) -> Run:
        """A durable run left `running` is continued by DBOS's recovery, not by asking the model again:
        wait (bounded) for its workflow, then return the run as saved."""
        from ..agent import Run

        tenant = principal.tenant if principal else None
        saved = await self._runs().load(run_id, tenant=tenant)
        if saved is None or (
            principal is not None and not _owns(principal, Run.from_json(saved.state_json).principal)
        ):
            raise UserError(f"no run {run_id!r} in this agent's store")
        workflows = await DBOS.list_workflows_async(
            workflow_id_prefix=run_id, status=["PENDING", "ENQUEUED"], load_input=False, load_output=False
        )
        for status in workflows:
            if status.workflow_id != run_id and not status.workflow_id.startswith(run_id + RESUME_MARK):
                continue  # another run whose id merely starts with this one
            handle: Any = await DBOS.retrieve_workflow_async(status.workflow_id)
            with anyio.move_on_after(60.0):
                await handle.get_result(polling_interval_sec=0.1)
        saved = await self._runs().load(run_id, tenant=tenant)
        if saved is None:
            raise UserError(f"no run {run_id!r} in this agent's store")
        return Run.from_json(saved.state_json)

    # -- inside the workflows ----------------------------------------------------------------------

    async def _seal(self, principal: Principal | None, text: str) -> str:
        return await self.sealer.seal(principal, text) if self.sealer is not None else text

    async def _open(self, principal: Principal | None, text: str) -> str:
        return await self.sealer.open(principal, text) if self.sealer is not None else text

    async def _run_body(self, run_id: str, messages: str, principal: dict[str, Any]) -> str:
        who = Principal.from_dict(principal)
        _PRINCIPAL.set(who)
        given = json.loads(await self._open(who, messages))
        try:
            run = await self.agent.run([message_from_dict(m) for m in given], who, run_id=run_id)
        except BaseException as exc:
            stop = _needs_human_in(exc)
            if stop is None:
                raise
            return await self._seal(who, await self._stop_for_human(run_id, who, stop))
        return await self._seal(who, run.to_json())

    async def _resume_body(
        self, run_id: str, principal: dict[str, Any] | None, decisions: dict[str, dict[str, Any]]
    ) -> str:
        who = Principal.from_dict(principal) if principal else None
        if who is None:
            saved = await self._runs().load(run_id)
            if saved is not None:
                from ..agent import Run

                who = Run.from_json(saved.state_json).principal
        _PRINCIPAL.set(who)
        if decisions:
            await DBOS.run_step_async({"name": "maitre.approvals.decide"}, self._decide, decisions)
        try:
            run = await self.agent.resume(run_id, None, principal=who)
        except BaseException as exc:
            stop = _needs_human_in(exc)
            if stop is None:
                raise
            assert who is not None  # the run was loaded, so its principal is known
            return await self._seal(who, await self._stop_for_human(run_id, who, stop))
        return await self._seal(run.principal, run.to_json())

    async def _decide(self, decisions: dict[str, dict[str, Any]]) -> str:
        approvals = self.agent.gate.approvals
        for approval_id, d in decisions.items():
            approver = d["approver"]
            who = Principal.from_dict(approver) if isinstance(approver, dict) else approver
            try:
                if d["approve"]:
                    await approvals.approve(
                        approval_id, who, d.get("edited_arguments"), note=d.get("message")
                    )
                else:
                    await approvals.deny(approval_id, who, d.get("message") or "denied")
            except ApprovalStateError:
                logger.info("approval %s was already decided", approval_id)
        return "ok"

    async def _stop_for_human(self, run_id: str, principal: Principal, stop: NeedsHuman) -> str:
        await DBOS.run_step_async(
            {"name": "maitre.runs.needs_human"}, self._save_needs_human, run_id, principal, stop.info
        )
        saved = await self._runs().load(run_id, tenant=principal.tenant)
        assert saved is not None
        text: str = saved.state_json
        return text

    async def _save_needs_human(self, run_id: str, principal: Principal, info: NeedsHumanInfo) -> str:
        from ..agent import Run, RunStatus, StopReason

        runs = self._runs()
        saved = await runs.load(run_id, tenant=principal.tenant)
        run = Run.from_json(saved.state_json) if saved is not None else Run(id=run_id, principal=principal)
        run.status = RunStatus.STOPPED
        run.stop_reason = StopReason.NEEDS_HUMAN
        run.final_text = info.message
        run.pending = []
        run.events.append(
            {
                "type": "needs_human",
                "run_id": run_id,
                "tool": info.tool,
                "call_id": info.call_id,
                "at": time.time(),
            }
        )
        personal = any(tool.personal for tool in self.agent.gate.toolbox)
        await runs.save(
            run_id,
            tenant=principal.tenant,
            status=str(run.status),
            state_json=run.to_json(),
            now=time.time(),
            user=principal.user if personal else None,
        )
        logger.warning("run %s needs a person: %s", run_id, info.message)
        return "saved"


@DBOS.workflow(name=_RUN_WORKFLOW)
async def _run_workflow(agent_name: str, run_id: str, messages: str, principal: dict[str, Any]) -> str:
    return await get_agent(agent_name)._run_body(run_id, messages, principal)


@DBOS.workflow(name="maitre.durable.resume")
async def _resume_workflow(
    agent_name: str, run_id: str, principal: dict[str, Any] | None, decisions: dict[str, dict[str, Any]]
) -> str:
    return await get_agent(agent_name)._resume_body(run_id, principal, decisions)


async def durable_run(
    agent: Agent | DurableAgent,
    goal_or_messages: str | Sequence[Message],
    principal: Principal,
    *,
    run_id: str | None = None,
    name: str = "default",
) -> Run:
    """Run `agent` durably once (wrapping it in a `DurableAgent` named `name` if it is not one)."""
    durable = (
        agent if isinstance(agent, DurableAgent) else _AGENTS.get(name) or DurableAgent(agent, name=name)
    )
    if durable.agent is not (agent.agent if isinstance(agent, DurableAgent) else agent):
        raise UserError(f"another agent is registered as {name!r}; pass name=")
    return await durable.run(goal_or_messages, principal, run_id=run_id)
