"""One stateless 2026-07-28 `tools/call`, posted straight on the session's own HTTP connection pool.

Why: through the SDK `Client`, a call to an upstream goes through the session's dispatcher, a pair
of memory streams, the transport's writer loop and a task per request; at the gateway that
machinery, not the HTTP exchange, was most of the MCP client's CPU per call (gateway_profile:
SDK Client + httpx2 ~3.5 ms of a ~7.7 ms governed call on a loaded machine, httpx2's send 1.3 ms
of it). A 2026-07-28 `tools/call` over Streamable HTTP needs none of it: it is one POST whose
answer is one JSON-RPC response (no session id, no handshake, no server-to-client request: a
server that needs input answers `input_required`).

What is the SDK's still, so the wire stays what the SDK sends (tests/mcp/test_direct_call.py
compares both, header by header):

- the request is stamped by the session's own stamp (`_meta` protocolVersion / clientInfo /
  clientCapabilities / log level, `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and the
  `Mcp-Param-*` headers from the tool's last listing);
- it is posted by the SDK's `stream_within_origin` (redirects followed only within the origin) on
  the very `httpx2.AsyncClient` the session's transport uses (`HttpLink`): same headers, egress
  hooks (address guard, byte cap, identity encoding) and OAuth `auth` flow, same connection pool;
- the result is checked as `ClientSession.send_request` checks it (the negotiated version's result
  shape, later revisions' fields dropped, the session's result adapter) and a tool's output schema
  by `ClientSession.validate_tool_result`;
- errors come out as the SDK raises them (`MCPError` with the server's JSON-RPC error, or the same
  stand-ins for a 4xx without one, `REQUEST_TIMEOUT` after the read timeout, PARSE_ERROR for a body
  that is not JSON-RPC), so `McpUpstream`'s error mapping reads them alike.

Posted on the pool itself (`_lean_exchange`): for the client the gateway builds (no `Auth` flow, no
cookies, no proxy, only the egress guard and byte cap as hooks) the request httpx2 would build - the
same headers in the same order - goes straight to the client's httpcore2 connection pool, and one
JSON answer within the cap is read without httpx2's request and response objects; the guard checks
the host first and the cap's rules are the same `CapHook`'s. Anything else (an error status, SSE, a
body the cap must count, a cookie set) is read as an `httpx2.Response` by the same code as before;
a redirect is sent again through `stream_within_origin`, which follows it within the origin. Measured
(benchmarks/gateway_ab.py, 8 clients): gateway CPU 2.54 -> 2.27 ms per call.

One write per request: httpcore2 writes a request's head and its body as two socket writes, so the
upstream wakes up twice and parses the head alone first. The link's HTTP client holds what is
written until the connection next reads (`CoalescingBackend`: the request is then complete, since
an HTTP/1.1 client reads only after sending it) or 64 KiB are waiting, then sends it in one write;
measured at the gateway (gateway_profile `one_write`): -13-21% CPU in the MCP client layer, and
less in the upstream.

Not here (`McpUpstream` sends those through the SDK session instead): a stdio or 2025-11-25
upstream, and a call whose caller takes progress or logs (relayed from the upstream's SSE stream).
A server that answers this call with an SSE stream anyway is read to its response (notifications on
it are dropped: nobody asked for them); one that ends the stream without a response, or asks to
resume it, fails the call as the SDK's does when it cannot resume (it is not sent again).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpcore2
import httpx2
import mcp_types as types
from httpx2 import EventSource
from httpx2._transports.default import AsyncResponseStream, map_httpcore_exceptions
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client, redirect_location, stream_within_origin
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    jsonrpc_message_adapter,
)
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .egress import IDENTITY, AddressGuard, CapHook, GuardHook, _hooks

__all__ = [
    "COALESCE_LIMIT",
    "CoalescingBackend",
    "CoalescingStream",
    "HttpLink",
    "coalesce_writes",
    "linked_http_transport",
    "post_tool_call",
    "supports_direct_calls",
]

logger = logging.getLogger("maitre.mcp.direct_call")

_ACCEPT = "application/json, text/event-stream"
_IDS = itertools.count(1)
"""Request ids of direct calls (each POST carries its own answer, so they need only be distinct
among this process's requests in flight; the SDK's own ids are not shared with them)."""


@dataclass
class HttpLink:
    """The `httpx2.AsyncClient` one Streamable HTTP session runs on, while it is open."""

    url: str
    max_response_bytes: int | None
    http: httpx2.AsyncClient | None = None


@asynccontextmanager
async def linked_http_transport(
    link: HttpLink,
    headers: dict[str, str],
    *,
    guard: AddressGuard | None,
    auth: httpx2.Auth | None = None,
) -> AsyncIterator[Any]:
    """`egress.guarded_http_transport`, with its HTTP client put on `link` for direct calls.

    Only these headers, the address guard and the byte cap (identity encoding asked for), `auth` on
    the client so the guard checks the OAuth flow's own requests too."""
    if guard is not None:
        await guard.check_url(link.url)
    cap = link.max_response_bytes
    sent = {**headers, **IDENTITY} if cap is not None else dict(headers)
    async with create_mcp_http_client(headers=sent or None, auth=auth) as http:
        http.event_hooks = _hooks(guard, cap)
        coalesce_writes(http)
        async with streamable_http_client(link.url, http_client=http, max_sse_event_size=cap) as streams:
            link.http = http
            try:
                yield streams
            finally:
                link.http = None


COALESCE_LIMIT = 64 * 1024
"""The most bytes held back before they are written anyway (a large request body streams on)."""


class CoalescingStream(httpcore2.AsyncNetworkStream):
    """A connection whose writes wait for its next read (or `COALESCE_LIMIT` bytes), sent as one."""

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self.inner = inner
        self._pending: list[bytes] = []
        self._size = 0
        self._timeout: float | None = None
        self.writes = 0
        """Writes that reached the socket (for tests)."""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 - httpcore2's stream interface
        if not buffer:
            return
        self._pending.append(buffer)
        self._size += len(buffer)
        self._timeout = timeout
        if self._size >= COALESCE_LIMIT:
            await self._flush()

    async def _flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending, self._size = [], 0
        self.writes += 1
        await self.inner.write(data, timeout=self._timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 - httpcore2's stream interface
        await self._flush()
        return await self.inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        # What was never flushed belongs to a request that was abandoned before its answer was
        # awaited (a cancelled call): it is dropped with the connection, not sent.
        self._pending, self._size = [], 0
        await self.inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's stream interface
    ) -> httpcore2.AsyncNetworkStream:
        await self._flush()
        return CoalescingStream(await self.inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class CoalescingBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend, with every connection it opens a `CoalescingStream`."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend) -> None:
        self.inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's stream interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return CoalescingStream(
            await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's stream interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return CoalescingStream(await self.inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def coalesce_writes(http: httpx2.AsyncClient) -> bool:
    """Make the connections `http` opens from now on `CoalescingStream`s; False (nothing changed) when
    its transport is not httpx2's default one over an httpcore2 pool (a proxy, another version)."""
    pool = getattr(getattr(http, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore2.AsyncConnectionPool) or not isinstance(
        backend, httpcore2.AsyncNetworkBackend
    ):
        return False
    if not isinstance(backend, CoalescingBackend):
        pool._network_backend = CoalescingBackend(backend)
    return True


def supports_direct_calls(session: ClientSession) -> bool:
    """Whether the session negotiated 2026-07-28 (stateless: a call needs no session state) and has
    the SDK internals a direct call reuses (its stamp and result adapter; mcp is pinned)."""
    version = getattr(session, "_negotiated_version", None)
    return (
        version in MODERN_PROTOCOL_VERSIONS
        and callable(getattr(session, "_stamp", None))
        and getattr(session, "_call_tool_adapter", None) is not None
    )


async def post_tool_call(
    session: ClientSession,
    http: httpx2.AsyncClient,
    url: str,
    name: str,
    arguments: dict[str, Any],
    *,
    meta: dict[str, Any] | None,
    input_responses: types.InputResponses | None,
    request_state: str | None,
    timeout_s: float,
    max_response_bytes: int | None,
) -> types.CallToolResult | types.InputRequiredResult:
    """`session.call_tool(name, arguments, ..., allow_input_required=True)`, posted directly.

    Raises what the SDK raises: `MCPError` (the server's error, REQUEST_TIMEOUT, or a stand-in for
    an HTTP error without a JSON-RPC body), `pydantic.ValidationError` (a result that does not
    follow the protocol), `RuntimeError` (structured content against the output schema), and the
    transport's own errors (`httpx2.TransportError`, the egress guard's refusals)."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(
            name=name,
            arguments=arguments,
            input_responses=input_responses,
            request_state=request_state,
            _meta=meta,  # type: ignore[arg-type]  # RequestParamsMeta is a TypedDict, open to extensions
        )
    )
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # type: ignore[arg-type]  # CallOptions is a TypedDict
    request_id = next(_IDS)
    body = {"jsonrpc": "2.0", "id": request_id, "method": data["method"], "params": data.get("params") or {}}
    headers = {"accept": _ACCEPT, "content-type": "application/json", **opts.get("headers", {})}
    with anyio.move_on_after(timeout_s) as waited:
        raw = await _exchange(http, url, body, headers, request_id, max_response_bytes)
    if waited.cancelled_caught:
        raise MCPError(code=REQUEST_TIMEOUT, message="Request 'tools/call' timed out")
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0  # as the SDK does: a negative cache hint is floored, not a failed call
    version: str = session._negotiated_version or "2025-11-25"
    try:
        _methods.validate_server_result("tools/call", version, raw)
    except KeyError:
        pass
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if isinstance(result, types.CallToolResult) and not result.is_error:
        await session.validate_tool_result(name, result)
    if not isinstance(result, types.CallToolResult | types.InputRequiredResult):
        raise MCPError(code=INTERNAL_ERROR, message="the server answered tools/call with another result kind")
    return result


async def _exchange(
    http: httpx2.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    request_id: int,
    max_response_bytes: int | None,
) -> dict[str, Any]:
    """POST the request; the raw `result` object of its JSON-RPC response (an error raises)."""
    content = json.dumps(body, separators=(",", ":")).encode()
    route = _lean_route(http, url)
    if route is not None:
        answer = await _lean_exchange(http, route, url, content, headers, request_id, max_response_bytes)
        if answer is not None:
            return answer
        # A redirect: sent again the SDK's way, which follows it only within the origin.
    async with stream_within_origin(http, "POST", url, content=content, headers=headers) as response:
        return await _answer(response, request_id, max_response_bytes)


async def _answer(
    response: httpx2.Response, request_id: int, max_response_bytes: int | None
) -> dict[str, Any]:
    """The raw `result` of the JSON-RPC response `response` carries (an error raises)."""
    status = response.status_code
    kind = response.headers.get("content-type", "").lower()
    if status == 202:
        raise MCPError(code=INVALID_REQUEST, message="server answered a request with 202 Accepted")
    if redirect_location(response) is not None:
        raise MCPError(code=INVALID_REQUEST, message="Redirect not followed: it leaves the endpoint's origin")
    if status >= 400:
        if kind.startswith("application/json"):
            try:
                parsed = jsonrpc_message_adapter.validate_json(await response.aread(), by_name=False)
            except (httpx2.StreamError, ValidationError):
                parsed = None
            if isinstance(parsed, types.JSONRPCError):
                raise MCPError.from_error_data(parsed.error)
        if status == 404:  # no session on 2026-07-28: the HTTP spelling of METHOD_NOT_FOUND
            raise MCPError(code=METHOD_NOT_FOUND, message="Not Found")
        raise MCPError(code=INTERNAL_ERROR, message="Server returned an error response")
    if kind.startswith("application/json"):
        return _parsed(await response.aread(), request_id)
    if kind.startswith("text/event-stream"):
        return await _from_sse(response, request_id, max_response_bytes)
    raise MCPError(code=INVALID_REQUEST, message=f"Unexpected content type: {kind}")


def _parsed(raw: bytes, request_id: int) -> dict[str, Any]:
    try:
        message = jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError as exc:
        raise MCPError(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}") from None
    return _result_of(message, request_id)


# -- the lean exchange: httpx2's client configuration, sent on its connection pool directly ------------


@dataclass(frozen=True)
class _Route:
    """Where a lean request goes: the client's own connection pool, and its URL read once."""

    pool: httpcore2.AsyncConnectionPool
    url: httpcore2.URL
    host: str
    port: int | None
    netloc: bytes
    guards: tuple[GuardHook, ...]
    caps: tuple[CapHook, ...]


@functools.lru_cache(maxsize=256)
def _parts(url: str) -> tuple[bytes, bytes, int | None, bytes, str, bytes]:
    parsed = httpx2.URL(url)
    return parsed.raw_scheme, parsed.raw_host, parsed.port, parsed.raw_path, parsed.host, parsed.netloc


def _lean_route(http: httpx2.AsyncClient, url: str) -> _Route | None:
    """The pool to post on directly, or None when the client does something per request that only
    `AsyncClient.send` does: an `Auth` flow (OAuth), cookies to send, a proxy or mounted transport
    for this URL, or an event hook other than the egress guard and byte cap (`egress._hooks`)."""
    if http._auth is not None or len(http.cookies) or http._state == httpx2._client.ClientState.CLOSED:
        return None
    hooks = http.event_hooks
    guards = tuple(h for h in hooks["request"] if isinstance(h, GuardHook))
    caps = tuple(h for h in hooks["response"] if isinstance(h, CapHook))
    if len(guards) != len(hooks["request"]) or len(caps) != len(hooks["response"]):
        return None
    scheme, raw_host, port, target, host, netloc = _parts(url)
    transport = http._transport_for_url(httpx2.URL(url)) if http._mounts else http._transport
    if transport is not http._transport or not isinstance(transport, httpx2.AsyncHTTPTransport):
        return None
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore2.AsyncConnectionPool):
        return None
    return _Route(
        pool=pool,
        url=httpcore2.URL(scheme=scheme, host=raw_host, port=port, target=target),
        host=host,
        port=port,
        netloc=netloc,
        guards=guards,
        caps=caps,
    )


async def _lean_exchange(
    http: httpx2.AsyncClient,
    route: _Route,
    url: str,
    content: bytes,
    headers: dict[str, str],
    request_id: int,
    max_response_bytes: int | None,
) -> dict[str, Any] | None:
    """What `stream_within_origin(http, "POST", url, ...)` then `_answer` do, for a client `_lean_route`
    accepted, without building httpx2's request and response objects for the common answer (one
    JSON body within the cap). The request is the one httpx2 would send (the same headers in the
    same order: Host, the client's, the call's, Content-Length), the egress guard checks the host
    first and the byte cap's rules apply to the answer (`CapHook`). Anything else - an error
    status, SSE, a body the cap must count, a cookie set - is handed on as an `httpx2.Response`
    to the same reading as the SDK path (`_answer`). A redirect returns None: the caller sends the
    request again through `stream_within_origin`, which follows it only within the origin."""
    for guard in route.guards:
        await guard.guard.check_host(route.host, route.port or 443)
    merged = httpx2.Headers(http.headers)
    merged.update(headers)
    raw = [(b"Host", route.netloc), *merged.raw]
    if "content-length" not in merged and "transfer-encoding" not in merged:
        raw.append((b"Content-Length", str(len(content)).encode()))
    request = httpcore2.Request(
        b"POST", route.url, headers=raw, content=content, extensions={"timeout": http.timeout.as_dict()}
    )
    with map_httpcore_exceptions():
        answer = await route.pool.handle_async_request(request)
    try:
        caps = route.caps
        if answer.status == 200 and not any(k.lower() == b"set-cookie" for k, _ in answer.headers):
            response_headers = httpx2.Headers(answer.headers)
            if response_headers.get("content-type", "").lower().startswith("application/json") and not any(
                hook.needs_counting(response_headers) for hook in caps
            ):
                with map_httpcore_exceptions():
                    data = await answer.aread()
                return _parsed(data, request_id)
        response = httpx2.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=AsyncResponseStream(cast("AsyncIterable[bytes]", answer.stream)),
            extensions=answer.extensions,
            request=http.build_request("POST", url, content=content, headers=headers),
        )
        for hook in caps:
            await hook(response)
        http.cookies.extract_cookies(response)
        if response.has_redirect_location:
            return None
        return await _answer(response, request_id, max_response_bytes)
    finally:
        with map_httpcore_exceptions():
            await answer.aclose()


async def _from_sse(
    response: httpx2.Response, request_id: int, max_response_bytes: int | None
) -> dict[str, Any]:
    """The response on an SSE answer to the call; notifications before it are dropped."""
    try:
        async for event in EventSource(response, max_event_size=max_response_bytes):
            if not event.data:
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(event.data, by_name=False)
            except ValidationError:
                logger.debug("direct tools/call: an SSE event that is not JSON-RPC was skipped")
                continue
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id == request_id:
                return _result_of(message, request_id)
    except httpx2.SSEError as exc:
        raise MCPError(code=INTERNAL_ERROR, message=f"SSE stream failed: {exc}") from None
    raise MCPError(code=INTERNAL_ERROR, message="SSE stream ended without a response")


def _result_of(message: Any, request_id: int) -> dict[str, Any]:
    if isinstance(message, types.JSONRPCError):
        raise MCPError.from_error_data(message.error)
    if not isinstance(message, types.JSONRPCResponse) or message.id != request_id:
        raise MCPError(code=PARSE_ERROR, message="the server's answer is not the response to this request")
    return dict(message.result)
