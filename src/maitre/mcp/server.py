"""Serve an `MCPApp` over MCP with every `tools/call` going through the gate.

Built on the SDK's low-level `Server`, which already speaks the stateless 2026-07-28 revision
(`server/discover`, per-request `_meta`, header/body checks, `resultType`, cache hints, sealed
`requestState`) and 2025-11-25 sessions on one endpoint. This module is the thin adapter the
design asks for: wire request → `ToolCall` + `Principal` → `Gate.call` → `ToolResult` → wire
result. No governance decision is made here.

`GovernedServer` assembles the parts, one module per concept, each handed what it needs:

- **Tools** (here): `tools/list` in registration order, annotations from tool metadata, output
  schemas passed through (object-rooted only on 2025-11-25); `tools/call` reads the request's
  `_meta` (run id, idempotency key, an approval id) and sends the call to the gate, a task, or an
  approval branch.
- **The wire** (`maitre.mcp.wire`): the call context, the gate call made with it, and the result
  shape: errors teach, untrusted text is fenced.
- **Approval over MCP** (`maitre.mcp.approvals`): APPROVAL_REQUIRED becomes an `input_required`
  result with a signed claim (2026-07-28), an inline `elicitation/create` (2025-11-25), or an
  approval id decided out of band.
- **Tasks** (`maitre.mcp.task_handlers`, state in `maitre.mcp.tasks`): long-running tools become
  tasks for clients that declare the extension.
- **Resources, prompts, completions** (`maitre.mcp.resources`).
- **List changes** (here): when the toolbox changes, or a source of the app's (the gateway's
  upstreams) says its resources or prompts changed, every client is told, in its era: a
  `subscriptions/listen` stream (2026-07-28) gets the event, and every 2025-11-25 session
  (recorded when its `notifications/initialized` arrives, forgotten when its connection closes)
  gets `notifications/{tools,resources,prompts}/list_changed` on its standalone stream; so the
  capabilities say `listChanged` in both eras. A burst of changes (an upstream's tools coming up
  one by one) is told once. Nothing of this runs on a `tools/call`.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types import LOG_LEVEL_META_KEY, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.propagate import get_global_textmap

from ..gate import CallOptions
from ..tools import Tool
from ..tracing import tracing_enabled
from ..types import Principal, ToolCall, ToolResult, Trust
from .app import ListKind, MCPApp
from .approvals import APPROVAL_INPUT_KEY, APPROVAL_META_KEY, McpApprovals
from .auth import principal_from_request
from .context import McpCallContext, upstream_blocks
from .resources import ResourceHandlers
from .signing import Signer, load_secret
from .task_handlers import TaskHandlers, client_has_tasks
from .tasks import TASKS_EXTENSION, MemoryTaskStore, TaskStore
from .wire import (
    call_context,
    call_tool_result,
    call_tool_wire,
    governed_call,
    input_required_result,
    meta_id,
    request_state,
)

logger = logging.getLogger("maitre.mcp.server")

__all__ = [
    "APPROVAL_INPUT_KEY",
    "APPROVAL_META_KEY",
    "GovernedServer",
    "IDEMPOTENCY_META_KEY",
    "RUN_META_KEY",
    "ServerOptions",
    "TASK_REQUIRED_TAG",
    "build_server",
]

TASK_REQUIRED_TAG = "task-required"
"""Tag of a long-running tool that must not run synchronously (clients without tasks get -32021)."""
RUN_META_KEY = "io.maitre/runId"
"""Request `_meta` key naming the host's agent run: the gate then keeps loop guards, budgets and
taint across that run's calls. The id is namespaced by the verified principal (the gate keys runs
by tenant, user and id), so naming another user's run id only starts a run of one's own. Without
it every MCP call is a run of its own: writes are still deduplicated per principal within the
gate's window, and taint follows the principal for its window."""
IDEMPOTENCY_META_KEY = "io.maitre/idempotencyKey"
"""Request `_meta` key a host (not the model) sets to name one logical operation: the same key from
the same principal for the same tool replays the first result instead of executing again."""
_PLAIN_CALL = CallOptions()
"""The options of a call whose `_meta` names no approval and no host key (never mutated: the
approval branch derives its own with `dataclasses.replace`)."""


_ANNOUNCE_DELAY_S = 0.02
"""How long a list change waits for the rest of its burst before clients are told."""
_NOTIFY_TIMEOUT_S = 2.0
"""The longest one 2025-11-25 session's notification may take (a stalled stream is skipped)."""
_LISTEN_EVENTS: dict[ListKind, Any] = {
    "tools": ToolsListChanged,
    "resources": ResourcesListChanged,
    "prompts": PromptsListChanged,
}
_ALL_LISTS = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)


class _ListChangedServer(Server[Any]):
    """The SDK server, announcing `listChanged` to 2025-11-25 clients (it sends them: see
    `GovernedServer._announce`); 2026-07-28 derives it from `subscriptions/listen` already."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or _ALL_LISTS, experimental_capabilities, extensions
        )


def _is_sdk_tracing(middleware: object) -> bool:
    cls = type(middleware)
    return cls.__name__ == "OpenTelemetryMiddleware" and cls.__module__.startswith("mcp.")


class _SpanWhenTraced:
    """The SDK's per-request OpenTelemetry span, opened only when it can be seen.

    The SDK wraps every request in a SERVER span even when no OpenTelemetry SDK is installed; the
    span is then a no-op, but opening it (attributes, context extraction, attach/detach) costs
    about as much as the gate's own work on a small call. The gate's spans already follow this
    rule (`maitre.tracing.tracing_enabled`); this applies it to the SDK's: the span is opened,
    by the SDK's own middleware, as soon as a tracer provider is installed, or when the request
    carries trace context in `_meta` (so it still propagates to what the tool calls out to).
    Otherwise the request goes straight on, exactly as it would inside a span nobody records.
    """

    def __init__(self, inner: ServerMiddleware[Any]) -> None:
        self.inner = inner
        self._textmap: object = None
        self._fields: frozenset[str] = frozenset()

    def _carries_context(self, meta: Any) -> bool:
        if not meta or not isinstance(meta, Mapping):
            return False
        textmap = get_global_textmap()
        if textmap is not self._textmap:  # the host may set another propagator at any time
            self._fields = frozenset(textmap.fields)
            self._textmap = textmap
        return not self._fields.isdisjoint(meta.keys())

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if tracing_enabled() or self._carries_context(ctx.meta):
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


@dataclass(kw_only=True)
class ServerOptions:
    """How the adapter runs (the governance itself is the gate's)."""

    secret: bytes | None = None
    """Shared by every process of one server: signs approval state and seals `requestState`.
    Default: `MAITRE_MCP_SECRET`, else a per-process random key (single process only)."""
    principal: Principal = field(default_factory=lambda: Principal(user="local", tenant="local"))
    """Who calls when the request is not authenticated (stdio, or HTTP without a verifier)."""
    task_store: TaskStore | None = None
    """Where task state lives; default in-process. Use `SQLiteTaskStore` for several processes."""
    task_ttl_ms: int = 3_600_000
    """The `ttlMs` each task announces to the client (not enforced by the built-in stores)."""
    task_poll_ms: int = 500
    """The poll interval each task suggests to clients; also how often a worker checks for a cancel."""
    task_lease_s: float = 30.0
    """A running task whose worker has not heartbeated for this long is reported failed."""
    approval_ttl_s: float = 600.0
    """How long a signed approval claim (and the sealed `requestState`) stays valid."""
    list_ttl_ms: int = 0
    """`ttlMs` on list results (2026-07-28 caching hints); 0 = always revalidate."""


class GovernedServer:
    """The SDK server for one `MCPApp`; `.lowlevel` is what transports run."""

    def __init__(self, app: MCPApp, options: ServerOptions | None = None) -> None:
        self.app = app
        self.gate = app.gate
        self.options = options or ServerOptions()
        secret = load_secret(self.options.secret)
        state_key = Signer(secret, purpose="request-state")._keys[0]
        self.tasks: TaskStore = self.options.task_store or MemoryTaskStore()
        self.bus = InMemorySubscriptionBus()
        self._approvals = McpApprovals(
            self.gate, Signer(secret, purpose="approval-state"), ttl_s=self.options.approval_ttl_s
        )
        self._task_handlers = TaskHandlers(
            self.gate,
            self.tasks,
            principal=self.principal,
            ttl_ms=self.options.task_ttl_ms,
            poll_ms=self.options.task_poll_ms,
            lease_s=self.options.task_lease_s,
        )
        content = ResourceHandlers(app, list_ttl_ms=self.options.list_ttl_ms)
        self._tg: anyio.abc.TaskGroup | None = None
        self._log_level: str = "info"
        self._tool_cache: dict[bool, list[types.Tool]] = {}
        self._header_free: dict[str, tuple[object, bool]] = {}
        """Per tool name: its input schema last seen, and whether it declares no `x-mcp-header`."""
        self._sessions: set[ServerSession] = set()
        """The open 2025-11-25 sessions, told of list changes on their standalone streams."""
        self._pending: set[ListKind] = set()
        app.toolbox.subscribe(self._on_toolbox_change)
        for source in app.sources:
            source.on_change(self.lists_changed)

        with (
            warnings.catch_warnings()
        ):  # logging/setLevel is deprecated in 2026 but required for 2025 clients
            warnings.simplefilter("ignore")
            server: Server[Any] = _ListChangedServer(
                app.name,
                version=app.version,
                instructions=app.instructions,
                lifespan=self._lifespan,
                get_tool_input_schema=self._input_schema,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=content.list_resources,
                on_list_resource_templates=content.list_templates,
                on_read_resource=content.read_resource,
                on_subscribe_resource=content.subscribe,
                on_unsubscribe_resource=content.unsubscribe,
                on_subscriptions_listen=ListenHandler(self.bus),
                on_list_prompts=content.list_prompts,
                on_get_prompt=content.get_prompt,
                on_completion=content.complete,
                on_set_logging_level=self._set_level,
            )
        server.middleware[:] = [_SpanWhenTraced(m) if _is_sdk_tracing(m) else m for m in server.middleware]
        server.middleware.append(
            RequestStateBoundary(
                RequestStateSecurity(keys=[state_key], ttl=self.options.approval_ttl_s),
                default_audience=app.name,
            )
        )
        if any(t.long_running for t in app.toolbox):
            server.extensions[TASKS_EXTENSION] = {}
        self._task_handlers.register(server)
        server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._on_initialized
        )
        self.lowlevel = server

    # -- lifecycle ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield {}
            finally:
                self._tg = None
                self._pending.clear()
                tg.cancel_scope.cancel()

    def _on_toolbox_change(self, _event: str, _tool: Tool) -> None:
        self._tool_cache.clear()
        self.lists_changed(frozenset({"tools"}))

    def lists_changed(self, kinds: frozenset[ListKind]) -> None:
        """Tell every client, soon, that the lists of `kinds` changed (callable from sync code)."""
        if self._tg is None:  # not serving (yet): nobody to tell
            return
        first = not self._pending
        self._pending |= kinds
        if first:
            try:
                self._tg.start_soon(self._announce_soon)
            except RuntimeError:  # the server is stopping
                self._pending.clear()

    async def _announce_soon(self) -> None:
        await anyio.sleep(_ANNOUNCE_DELAY_S)
        kinds, self._pending = frozenset(self._pending), set()
        await self._announce(kinds)

    async def _announce(self, kinds: frozenset[ListKind]) -> None:
        """Publish `kinds` to the listen streams and notify every 2025-11-25 session."""
        for kind in ("tools", "resources", "prompts"):
            if kind in kinds:
                await self.bus.publish(_LISTEN_EVENTS[kind]())
        sessions = list(self._sessions)
        if not sessions:
            return
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(self._notify_session, session, kinds)

    async def _notify_session(self, session: ServerSession, kinds: frozenset[ListKind]) -> None:
        with anyio.move_on_after(_NOTIFY_TIMEOUT_S):
            try:
                if "tools" in kinds:
                    await session.send_tool_list_changed()
                if "resources" in kinds:
                    await session.send_resource_list_changed()
                if "prompts" in kinds:
                    await session.send_prompt_list_changed()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._sessions.discard(session)
            except Exception:
                logger.debug("a list_changed notification to a 2025-11-25 session failed", exc_info=True)

    async def _on_initialized(self, ctx: ServerRequestContext[Any, Any], _params: Any) -> None:
        """Record a 2025-11-25 session, to be told of list changes until its connection closes."""
        session = ctx.session
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        self._sessions.add(session)
        # The SDK hands handlers the session, whose connection (private) owns the teardown stack.
        connection = getattr(session, "_connection", None)
        exit_stack = getattr(connection, "exit_stack", None)
        if exit_stack is not None:
            exit_stack.callback(self._sessions.discard, session)

    async def notify_lists_changed(self) -> None:
        """Tell every client (both eras) that prompts and resources changed."""
        await self._announce(frozenset({"prompts", "resources"}))

    def principal(self) -> Principal:
        """The authenticated principal of this request, else the configured one."""
        return principal_from_request() or self.options.principal

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self._log_level = params.level
        return types.EmptyResult()

    # -- tools ----------------------------------------------------------------------------------------

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The schema the SDK holds a call's `Mcp-Param-*` headers to, or None (nothing to check).

        None also for a schema that declares no `x-mcp-header` anywhere: the SDK's check compares
        only annotated arguments with their headers, so for such a schema it never refuses, and
        walking the schema on every call (~3% of the gateway's CPU per call) finds nothing."""
        tool = self.app.toolbox.get(name)
        if tool is None:
            return None
        schema = tool.input_schema
        known = self._header_free.get(name)
        if known is None or known[0] is not schema:
            try:
                free = _X_MCP_HEADER not in json.dumps(schema, default=str)
            except (TypeError, ValueError):  # not plain JSON: let the SDK read it
                free = False
            known = (schema, free)
            self._header_free[name] = known
        return None if known[1] else schema

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], _params: Any) -> types.ListToolsResult:
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        tools = self._tool_cache.get(modern)
        if tools is None:
            tools = []
            for definition in self.app.toolbox.definitions("mcp"):
                output = definition.get("outputSchema")
                if output is not None and not modern and output.get("type") != "object":
                    definition = {k: v for k, v in definition.items() if k != "outputSchema"}
                tools.append(types.Tool.model_validate(definition))
            self._tool_cache[modern] = tools
        return types.ListToolsResult(tools=list(tools), ttl_ms=self.options.list_ttl_ms)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Any:
        principal = self.principal()
        call_ctx = call_context(ctx, params)
        state = request_state(params.request_state)
        call_ctx.request_state = state.get("tool")
        meta: Mapping[str, Any] = params.meta if isinstance(params.meta, dict) else {}
        level = meta.get(LOG_LEVEL_META_KEY) if call_ctx.modern else self._log_level
        call_ctx.log_level = _LOG_LEVELS.get(level) if isinstance(level, str) else None
        call = ToolCall(
            id=str(ctx.request_id),
            name=params.name,
            arguments=dict(params.arguments or {}),
            run_id=meta_id(meta, RUN_META_KEY),
        )
        # An approval id from _meta was decided out of band: only a claim, the gate verifies it.
        approval_id = meta_id(meta, APPROVAL_META_KEY)
        if "approval" in state:
            approval_id = await self._approvals.claim(state["approval"], params.name, principal, call_ctx)
        idempotency_key = meta_id(meta, IDEMPOTENCY_META_KEY)
        options = (
            CallOptions(approval_id=approval_id, idempotency_key=idempotency_key)
            if approval_id is not None or idempotency_key is not None
            else _PLAIN_CALL
        )
        tool = self.app.toolbox.get(params.name)
        if tool is not None and tool.long_running:
            if call_ctx.modern and client_has_tasks(ctx):
                return await self._task_handlers.start(
                    call, principal, call_ctx, options, task_group=self._tg
                )
            if TASK_REQUIRED_TAG in tool.tags:
                raise MCPError(
                    code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message=f"{tool.name} runs only as a task; declare the {TASKS_EXTENSION} extension",
                    data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
                )
        result = await governed_call(self.gate, call, principal, call_ctx, options)
        if call_ctx.protocol_error is not None:
            raise call_ctx.protocol_error
        if call_ctx.pending_input:
            return input_required_result(call_ctx.pending_input, {"tool": call_ctx.pending_state})
        if result.approval is not None:
            return await self._approvals.ask(call, principal, result, result.approval, call_ctx, options)
        if tool is not None and not result.is_error and call_ctx.content is None and _imported(tool):
            blocks = upstream_blocks(result.structured, tool=tool.name, source=tool.source)
            if blocks is not None:
                call_ctx.set_content(blocks)
        return call_tool_wire(result, call_ctx, tool)

    def to_call_tool_result(
        self, result: ToolResult, call_ctx: McpCallContext | None = None, tool: Tool | None = None
    ) -> types.CallToolResult:
        """The wire result for a gate result: teaching text + structured error, or content + data."""
        return call_tool_result(result, call_ctx, tool)


_X_MCP_HEADER = "x-mcp-header"
"""The schema keyword naming an argument's `Mcp-Param-*` header (searched in the schema's JSON text:
a key or value spelled so anywhere keeps the SDK's check on)."""

_LOG_LEVELS: dict[str, types.LoggingLevel] = {level: level for level in get_args(types.LoggingLevel)}


def _imported(tool: Tool) -> bool:
    """A tool `McpUpstream` imported from another MCP server (untrusted, source `mcp:NAME`)."""
    return tool.trust is Trust.UNTRUSTED and tool.source.startswith("mcp:") and "mcp" in tool.tags


def build_server(app: MCPApp, options: ServerOptions | None = None) -> GovernedServer:
    """The governed SDK server for `app` (run `.lowlevel` on stdio or mount it over HTTP)."""
    return GovernedServer(app, options)
