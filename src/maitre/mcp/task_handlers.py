"""The Tasks extension on the wire: start a long-running call as a task, run it, answer `tasks/*`.

`maitre.mcp.tasks` says what a task is and where its state lives (a `TaskStore` shared by every
process of a server); this module is the server's side of it:

- **start**: `tools/call` for a long-running tool from a client that declared the extension
  answers a `CreateTaskResult` only after the task row is committed (SEP-2663), then runs the call
  in the background of the server's task group.
- **run**: the work is an ordinary governed `Gate.call`; its wire result (or the JSON-RPC error a
  tool asked for) is stored as the task's outcome. A failure of the machinery itself is reported
  as an internal error, never as the tool's.
- **watch**: while it runs the worker heartbeats (a dead process's task is reported failed after
  the lease) and notices a cancel that arrived at another process.
- **`tasks/get`, `tasks/cancel`, `tasks/update`**: answered by any process sharing the store,
  for the task's own tenant and user only ("not found" for anyone else's: no existence oracle).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from ..gate import CallOptions, Gate
from ..types import Principal, ToolCall
from .context import McpCallContext
from .tasks import TASKS_EXTENSION, TERMINAL, TaskRecord, TaskStore, new_task_id, task_to_wire
from .wire import call_tool_result, governed_call

__all__ = ["TaskHandlers", "client_has_tasks"]

logger = logging.getLogger("maitre.mcp.server")


class _TaskIdParams(RequestParams):
    task_id: str = Field(alias="taskId")


class _TaskUpdateParams(_TaskIdParams):
    input_responses: dict[str, Any] | None = Field(default=None, alias="inputResponses")


def client_has_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared the Tasks extension on this request."""
    caps = ctx.session.client_capabilities
    return caps is not None and bool(caps.extensions) and TASKS_EXTENSION in (caps.extensions or {})


class TaskHandlers:
    """Starts, runs and answers for the tasks of one server process."""

    def __init__(
        self,
        gate: Gate,
        store: TaskStore,
        *,
        principal: Callable[[], Principal],
        ttl_ms: int,
        poll_ms: int,
        lease_s: float,
    ) -> None:
        self.gate = gate
        """Runs each task's call, exactly as a synchronous call would be run."""
        self.store = store
        """Where task state lives (shared by every process of the server)."""
        self.principal = principal
        """Who is asking, for the current request (tasks are read by their owner only)."""
        self.ttl_ms = ttl_ms
        self.poll_ms = poll_ms
        self.lease_s = lease_s
        """A running task whose worker has not heartbeated for this long is reported failed."""
        self.owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        """This process, as recorded on the tasks it runs."""
        self._scopes: dict[str, anyio.CancelScope] = {}

    def register(self, server: Server[Any]) -> None:
        """Add `tasks/get`, `tasks/cancel` and `tasks/update` to the SDK server."""
        server.add_request_handler("tasks/get", _TaskIdParams, self.get)
        server.add_request_handler("tasks/cancel", _TaskIdParams, self.cancel)
        server.add_request_handler("tasks/update", _TaskUpdateParams, self.update)

    # -- a task's life -----------------------------------------------------------------------------

    async def start(
        self,
        call: ToolCall,
        principal: Principal,
        call_ctx: McpCallContext,
        options: CallOptions,
        *,
        task_group: anyio.abc.TaskGroup | None,
    ) -> dict[str, Any]:
        """Commit a task for `call`, run it in `task_group`, and answer the `CreateTaskResult`."""
        if task_group is None:
            raise MCPError(code=INVALID_PARAMS, message="tasks need the server lifespan to be running")
        task = TaskRecord(
            task_id=new_task_id(),
            tenant=principal.tenant,
            user=principal.user,
            tool=str(call.name),
            ttl_ms=self.ttl_ms,
            poll_ms=self.poll_ms,
            owner=self.owner,
            status_message="The operation is now in progress.",
        )
        await self.store.create(task)  # committed before the client hears of it (SEP-2663)
        background = McpCallContext(
            protocol_version=call_ctx.protocol_version, client_capabilities=call_ctx.client_capabilities
        )
        task_group.start_soon(self._run, task.task_id, call, principal, background, options)
        return task_to_wire(task, lease_s=self.lease_s, result_type="task")

    async def _run(
        self,
        task_id: str,
        call: ToolCall,
        principal: Principal,
        call_ctx: McpCallContext,
        options: CallOptions,
    ) -> None:
        outcome: dict[str, Any] = {}
        with anyio.CancelScope() as scope:
            self._scopes[task_id] = scope
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch, task_id, scope)
                    result = await governed_call(self.gate, call, principal, call_ctx, options)
                    if isinstance(call_ctx.protocol_error, MCPError):
                        error = call_ctx.protocol_error.error.model_dump(
                            by_alias=True, mode="json", exclude_none=True
                        )
                        outcome = {"status": "failed", "status_message": error.get("message"), "error": error}
                    else:
                        wire = call_tool_result(result, call_ctx, self.gate.toolbox.get(call.name))
                        outcome = {
                            "status": "completed",
                            "status_message": "done",
                            "result": wire.model_dump(by_alias=True, mode="json", exclude_none=True),
                        }
                    tg.cancel_scope.cancel()
            except Exception as exc:  # a failure of the machinery, not of the tool (the gate never raises)
                logger.exception("task %s failed", task_id)
                outcome = {
                    "status": "failed",
                    "status_message": f"internal error ({type(exc).__name__})",
                    "error": {"code": -32603, "message": "Internal error"},
                }
            finally:
                self._scopes.pop(task_id, None)
        if scope.cancelled_caught or not outcome:
            outcome = {"status": "cancelled", "status_message": "cancelled by the client"}
        with anyio.CancelScope(shield=True):
            await self.store.update(task_id, **outcome)

    async def _watch(self, task_id: str, scope: anyio.CancelScope) -> None:
        """Heartbeat the task and notice a cancel that arrived at another process."""
        interval = max(self.poll_ms / 1000, 0.05)
        beat = time.monotonic()
        while True:
            await anyio.sleep(interval)
            task = await self.store.get(task_id)
            if task is not None and task.cancel_requested:
                scope.cancel()
                return
            if time.monotonic() - beat > self.lease_s / 3:
                beat = time.monotonic()
                await self.store.update(task_id, heartbeat_at=time.time())

    # -- tasks/* -------------------------------------------------------------------------------------

    async def get(self, ctx: ServerRequestContext[Any, Any], params: _TaskIdParams) -> dict[str, Any]:
        """`tasks/get`: the task's state (and its result once completed)."""
        self._require_tasks(ctx, params.task_id)
        task = await self._owned(params.task_id)
        return task_to_wire(task, lease_s=self.lease_s)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: _TaskIdParams) -> dict[str, Any]:
        """`tasks/cancel`: ask the work to stop (here at once, at another process within a poll)."""
        self._require_tasks(ctx, params.task_id)
        task = await self._owned(params.task_id)
        if task.status not in TERMINAL:
            await self.store.update(task.task_id, cancel_requested=True)
            scope = self._scopes.get(task.task_id)
            if scope is not None:
                scope.cancel()
        return {"resultType": "complete"}

    async def update(self, ctx: ServerRequestContext[Any, Any], params: _TaskUpdateParams) -> dict[str, Any]:
        """`tasks/update`: input for a waiting task."""
        self._require_tasks(ctx, params.task_id)
        await self._owned(params.task_id)  # no task of ours waits on input yet: answers are ignored
        return {"resultType": "complete"}

    def _require_tasks(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
        if not client_has_tasks(ctx):
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"Client did not declare the {TASKS_EXTENSION} extension",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            name = headers.get("mcp-name")
            if name != task_id:
                raise MCPError(code=HEADER_MISMATCH, message="Mcp-Name header must equal params.taskId")

    async def _owned(self, task_id: str) -> TaskRecord:
        principal = self.principal()
        task = await self.store.get(task_id)
        if task is None or (task.tenant, task.user) != (principal.tenant, principal.user):
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return task
