"""What a tool may ask of the MCP request that reached it - without the gate knowing about MCP.

Every `tools/call` goes through `Gate.call`, which speaks only `ToolCall` and `ToolResult`. Some
tools want more from the MCP door: report progress, return an image rather than text, or ask the
client a question over the 2026-07-28 multi-round-trip flow. The server sets a `McpCallContext`
in a context variable around `Gate.call`; a tool reads it with `current_call()` (None when the
call came through another door, so the same tool still works in an agent loop).

Nothing here bypasses the gate: the tool is still resolved, validated, authorised, executed and
recorded by it. `set_content` and `input_required` leave a note beside the tool's ordinary return
value; the server uses the note to shape the MCP result, while the gate records the return value.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from ..context import NeedsInput
from ..fence import fence_untrusted

__all__ = ["McpCallContext", "current_call", "upstream_blocks"]

_BLOCKS: TypeAdapter[list[types.ContentBlock]] = TypeAdapter(list[types.ContentBlock])
_MAITRE_META = "io.maitre/"
"""The `_meta` prefix of maitre's own labels (trust, source, errors): never taken from an upstream."""

_current: contextvars.ContextVar[McpCallContext | None] = contextvars.ContextVar(
    "maitre_mcp_call", default=None
)


def current_call() -> McpCallContext | None:
    """The MCP request the running tool is serving, or None outside an MCP `tools/call`."""
    return _current.get()


@dataclass(kw_only=True, eq=False)
class McpCallContext:
    """One `tools/call` as the MCP door sees it."""

    protocol_version: str
    """The wire version of this request (`2026-07-28` or a handshake version)."""
    client_capabilities: types.ClientCapabilities | None = None
    """What the client declared (per request on 2026-07-28, per session before)."""
    input_responses: Mapping[str, Any] = field(default_factory=dict)
    """Answers to an earlier `input_required` round, by key (2026-07-28)."""
    request_state: str | None = None
    """The tool's own state from the earlier round, verified by the server before it gets here."""
    session: Any = None
    """The SDK's `ServerSession` for this request (progress, logs, legacy server→client requests)."""
    request_id: Any = None
    log_level: types.LoggingLevel | None = None
    """The lowest `notifications/message` level the client takes on this request (2026-07-28: its
    `_meta` opt-in; before: the level it set for the session); None: it takes none."""
    content: list[types.ContentBlock] | None = None
    """Set by `set_content`: the MCP content blocks to send instead of the text of the result."""
    pending_input: dict[str, Any] | None = None
    """Set by `input_required`: the input requests to send back instead of a result."""
    pending_state: str | None = None
    protocol_error: Exception | None = None
    """Set by `reject`: answer the request with this JSON-RPC error instead of a tool result."""

    # -- results ----------------------------------------------------------------------------------

    def set_content(self, blocks: list[types.ContentBlock]) -> None:
        """Send these content blocks (images, audio, embedded resources) as the MCP result content."""
        self.content = list(blocks)

    def input_required(self, requests: Mapping[str, Any], *, state: str | None = None) -> dict[str, Any]:
        """Ask the client for input (2026-07-28 `InputRequiredResult`); return what the tool returns.

        `requests` maps keys to `elicitation/create`, `sampling/createMessage` or `roots/list`
        requests (typed models or wire dicts). The client answers by retrying the same call with
        `inputResponses` under the same keys; `state` comes back as `request_state`, verified.
        Use: `return ctx.input_required({...})`.
        """
        self.pending_input = {
            key: (
                req.model_dump(by_alias=True, mode="json", exclude_none=True)
                if hasattr(req, "model_dump")
                else req
            )
            for key, req in requests.items()
        }
        self.pending_state = state
        return NeedsInput(input_required=sorted(self.pending_input))

    def reject(self, error: Exception) -> dict[str, Any]:
        """Answer with a JSON-RPC error (an `mcp.shared.exceptions.MCPError`), for MCP-level refusals
        such as a missing client capability (-32021). Use: `return ctx.reject(MCPError(...))`."""
        self.protocol_error = error
        return NeedsInput(rejected=type(error).__name__)

    def supports(self, capability: str) -> bool:
        """Whether the client declared `elicitation`, `sampling` or `roots` on this request."""
        caps = self.client_capabilities
        return caps is not None and getattr(caps, capability, None) is not None

    @property
    def modern(self) -> bool:
        return self.protocol_version in MODERN_PROTOCOL_VERSIONS

    # -- notifications on this request's stream --------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Progress for this call; a no-op unless the client sent a progress token."""
        if self.session is not None:
            await self.session.report_progress(progress, total, message)

    async def log(self, level: types.LoggingLevel, data: Any, logger: str | None = None) -> None:
        """A `notifications/message` on this request (dropped unless the client opted in)."""
        if self.session is not None:
            await self.session.send_log_message(level, data, logger, related_request_id=self.request_id)

    # -- legacy (2025-11-25) server→client requests -----------------------------------------------

    @property
    def can_ask(self) -> bool:
        """Whether a server→client request can be sent right now (a 2025-11-25 session)."""
        return self.session is not None and not self.modern and bool(self.session.can_send_request)

    async def elicit(self, message: str, requested_schema: dict[str, Any]) -> types.ElicitResult:
        """Ask the user through the client (2025-11-25 sessions with the elicitation capability)."""
        result: types.ElicitResult = await self.session.elicit_form(
            message, requested_schema, related_request_id=self.request_id
        )
        return result

    async def sample(
        self, messages: list[types.SamplingMessage], *, max_tokens: int
    ) -> types.CreateMessageResult:
        """Ask the client's model (2025-11-25 sessions with the sampling capability)."""
        result: types.CreateMessageResult = await self.session.create_message(
            messages, max_tokens=max_tokens, related_request_id=self.request_id
        )
        return result


def upstream_blocks(value: Any, *, tool: str, source: str) -> list[types.ContentBlock] | None:
    """An upstream MCP tool's content blocks, from the value its imported tool returned, to send on.

    `McpUpstream` returns a result with any non-text block as the list of its blocks (wire dicts),
    which is also what the gate records and an idempotent replay gives back; an agent reads that
    list as data. The MCP door passes the blocks on as blocks instead (an image stays an image),
    rebuilt from the recorded value so a replay answers the same blocks. Every text the upstream
    wrote (a text block, an embedded text resource) is fenced as untrusted data, and `_meta` keys
    claiming maitre's labels are dropped. None when `value` is not such a list (the gate cut the
    result to a handle or a shorter text, or it is text or structured content): then the ordinary
    fenced text is sent.
    """
    if not isinstance(value, list) or not value or not all(isinstance(b, dict) for b in value):
        return None
    try:
        blocks = _BLOCKS.validate_python(value)
    except ValidationError:
        return None
    return [_fenced(block, tool=tool, source=source) for block in blocks]


def _fenced(block: types.ContentBlock, *, tool: str, source: str) -> types.ContentBlock:
    update: dict[str, Any] = {}
    if block.meta:
        update["meta"] = {k: v for k, v in block.meta.items() if not str(k).startswith(_MAITRE_META)}
    if isinstance(block, types.TextContent):
        update["text"] = fence_untrusted(block.text, tool=tool, source=source)
    elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.TextResourceContents):
        resource = block.resource
        inner: dict[str, Any] = {"text": fence_untrusted(resource.text, tool=tool, source=source)}
        if resource.meta:
            inner["meta"] = {k: v for k, v in resource.meta.items() if not str(k).startswith(_MAITRE_META)}
        update["resource"] = resource.model_copy(update=inner)
    return block.model_copy(update=update) if update else block


def _enter(ctx: McpCallContext) -> contextvars.Token[McpCallContext | None]:
    return _current.set(ctx)


def _leave(token: contextvars.Token[McpCallContext | None]) -> None:
    _current.reset(token)
