"""Scope challenges on HTTP: a 401 names the scopes; a tools/call lacking a tool's scopes is a 403.

The gate refuses a call whose principal lacks a tool's scopes (PERMISSION_DENIED) at every door,
and stays the line of defence for stdio and in-process callers. Over HTTP the MCP authorization
spec (Scope Challenge Handling, RFC 6750 §3.1) also wants the transport to say so, so that a
client can step up its token instead of showing the model an error:

    HTTP 403
    WWW-Authenticate: Bearer error="insufficient_scope", scope="orders:write payments:refund",
                      resource_metadata="https://host/.well-known/oauth-protected-resource/mcp"

`ScopeChallenge` replaces the SDK's `RequireAuthMiddleware` (same 401/403 body) and adds:

- the `scope` parameter on the 401: the server's required scopes, or, when it has none, the union
  of the scopes the served tools declare (the same set the protected-resource metadata publishes
  as `scopes_supported`). The body of an unauthenticated request is never read.
- for an authenticated POST, the JSON-RPC body is read (buffered up to the SDK's 4 MiB body
  limit, then replayed unchanged so the SDK reads it again and responses still stream); a
  `tools/call` naming a tool whose scopes, plus the server's required ones, are not all granted
  is answered 403 with every scope the operation needs in one challenge. The name comes from
  the body, not the `Mcp-Name` header (the SDK refuses a header that disagrees). A body that
  names a tool twice (duplicate keys) is checked for every name it could mean.

Scopes are compared as the gate compares them: exact strings, no hierarchy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..tools import Toolbox

__all__ = ["ScopeChallenge", "declared_scopes"]

_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def declared_scopes(toolbox: Toolbox, required: Iterable[str] = ()) -> list[str]:
    """The scopes a client is told to ask for up front: `required`, else every tool's scopes."""
    wanted = set(required)
    if not wanted:
        for tool in toolbox:
            wanted |= tool.scopes
    return sorted(wanted)


class ScopeChallenge:
    """Require a verified bearer token and the scopes of the called tool (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        toolbox: Toolbox,
        required_scopes: Sequence[str] = (),
        resource_metadata_url: str | None = None,
        max_body_size: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ) -> None:
        self.app = app
        self.toolbox = toolbox
        self.required_scopes = frozenset(required_scopes)
        self.resource_metadata_url = resource_metadata_url
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not isinstance(scope.get("user"), AuthenticatedUser):
            challenge = declared_scopes(self.toolbox, self.required_scopes)
            await self._refuse(send, 401, "invalid_token", "Authentication required", challenge)
            return
        auth = scope.get("auth")
        granted = frozenset(auth.scopes) if auth is not None else frozenset()
        needed = set(self.required_scopes)
        if scope.get("method") == "POST":
            messages, body = await self._buffer(scope, receive)
            for name in _called_tools(body):
                tool = self.toolbox.get(name)
                if tool is not None:
                    needed |= tool.scopes
            receive = _replay(messages, receive)
        if not needed <= granted:
            missing = " ".join(s for s in sorted(needed - granted) if _SCOPE_TOKEN.fullmatch(s))
            await self._refuse(send, 403, "insufficient_scope", f"Missing scope: {missing}", sorted(needed))
            return
        await self.app(scope, receive, send)

    async def _buffer(self, scope: Scope, receive: Receive) -> tuple[list[Message], bytes | None]:
        """The request messages read so far, and the whole body (None when too large to inspect)."""
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_size:
            return [], None  # the SDK answers 413 without our help
        return await _buffer_body(receive, self.max_body_size)

    async def _refuse(self, send: Send, status: int, error: str, description: str, scopes: list[str]) -> None:
        params = [f'error="{error}"', f'error_description="{description}"']
        tokens = [s for s in scopes if _SCOPE_TOKEN.fullmatch(s)]  # RFC 6749 §3.3: nothing to escape
        if tokens:
            params.append(f'scope="{" ".join(tokens)}"')
        if self.resource_metadata_url:
            params.append(f'resource_metadata="{self.resource_metadata_url}"')
        body = json.dumps({"error": error, "error_description": description}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", f"Bearer {', '.join(params)}".encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _buffer_body(receive: Receive, limit: int) -> tuple[list[Message], bytes | None]:
    """The request's messages read so far, and its whole body (None past `limit`, or when the
    client went away): what a middleware that must look at a body before the app reads it keeps."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > limit:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


def _called_tools(body: bytes | None) -> set[str]:
    """Every tool name a `tools/call` in `body` could mean (empty when it is not one, or unparsable).

    Objects are plain dicts (C-speed parsing of a large body); only one whose keys repeat keeps
    its pairs on the side, so a duplicated `method`, `params` or `name` yields every value.
    """
    if body is None:
        return set()
    repeated: dict[int, list[tuple[str, Any]]] = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            repeated[id(obj)] = pairs
        return obj

    def values(obj: object, key: str) -> list[Any]:
        if not isinstance(obj, dict):
            return []
        pairs = repeated.get(id(obj))
        if pairs is not None:
            return [v for k, v in pairs if k == key]
        return [obj[key]] if key in obj else []

    try:
        parsed = json.loads(body, object_pairs_hook=pairs_hook)
    except ValueError:
        return set()  # the SDK answers the parse error
    names: set[str] = set()
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if "tools/call" in values(message, "method"):
            for params in values(message, "params"):
                names.update(n for n in values(params, "name") if isinstance(n, str))
    return names
