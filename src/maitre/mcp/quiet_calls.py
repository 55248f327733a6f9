"""A 2026-07-28 request that cannot emit a notification, served without the SDK's per-request stream.

Why: in its default (SSE-capable) mode the SDK serves every 2026-07-28 POST with a task group, two
tasks (the handler, a disconnect watcher), a zero-buffer memory stream and a 15 s keep-alive timer,
so that a notification the handler emits can commit the response to `text/event-stream`. A request
that carries no progress token and asks for no log level has nothing to emit (progress needs the
token, logs need the level), and for those that machinery was ~10% of the gateway's CPU per call
(benchmarks/gateway_profile.py `--variants base,json_response`, gateway/upstream CPU 2.55-2.68x ->
2.28-2.42x).

What it does instead, for such a request (`QuietModernCalls`): the SDK's own
`handle_modern_request` in its JSON mode - the same validation ladder, dispatch and JSON answer with
its table-mapped status - with the two things SSE mode adds kept by cheaper means:

- **cancel on disconnect**: one watcher task waits for `http.disconnect` and cancels the handler
  (the 2026-07-28 way to cancel a request is to close its response stream), as the SDK's does;
- **keep-alive**: a timer, not a task: if no answer has started when the SDK's keep-alive interval
  passes, the response is committed to `text/event-stream` with the SDK's headers and pinged every
  interval, and the JSON-RPC answer, when it comes, is sent as the final `event: message` (status
  200), byte for byte what the SDK's SSE path writes.

Everything else goes the SDK's way unchanged: a request whose body mentions `progressToken`,
`logLevel` or `subscriptions/listen`, or holds a `\\u` escape (which could spell one of them), one
that does not accept both JSON and SSE (the SDK's 406), a body over the size limit (its 413), a
2025-11-25 request, and every request when the server is in JSON mode already.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import anyio
from mcp.server import _streamable_http_modern as modern
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .scope_check import _buffer_body, _replay

__all__ = ["QuietModernCalls", "is_quiet"]

_VERSION_HEADER = b"mcp-protocol-version"
_LOUD = (b"progressToken", b"logLevel", b"subscriptions/listen", b"\\u")
"""What in a body could make its request emit notifications (or spell such a key in escapes)."""
_PING = b": ping\r\n\r\n"


def is_quiet(body: bytes) -> bool:
    """Whether the request in `body` can emit no notification: no progress token, no log level, not
    a listen stream (checked on the raw bytes, so a key written with escapes counts as present)."""
    return not any(marker in body for marker in _LOUD)


class QuietModernCalls:
    """ASGI wrapper around the session manager's app (module docstring)."""

    def __init__(self, app: ASGIApp, manager: StreamableHTTPSessionManager) -> None:
        self.app = app
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self.manager
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or manager.json_response
            or manager._task_group is None
            or not _modern(scope)
        ):
            await self.app(scope, receive, send)
            return
        messages, body = await _buffer_body(receive, manager.max_request_body_size)
        replay = _replay(messages, receive)
        has_json, has_sse = check_accept_headers(Request(scope))
        if body is None or not (has_json and has_sse) or not is_quiet(body):
            await self.app(scope, replay, send)
            return
        state = manager._lifespan_state

        async def handle(out: Send) -> None:
            await modern.handle_modern_request(
                manager.app, manager.security_settings, True, state, scope, replay, out
            )

        await _watched(handle, receive, send)


def _modern(scope: Scope) -> bool:
    """The session manager's own routing rule: a version header that is not a handshake version."""
    for name, value in scope["headers"]:
        if name == _VERSION_HEADER:
            return value.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
    return False


class _Exchange:
    """The response of one quiet request: passed through as JSON, or turned into SSE once the
    keep-alive interval passed before it started."""

    def __init__(self, send: Send) -> None:
        self.out = send
        self.started = False
        self.committed = False
        self.finished = False
        self.pinger: asyncio.Task[None] | None = None
        self.lock = anyio.Lock()
        self.body: list[bytes] = []

    def keep_alive(self) -> None:
        """The timer's callback: commit to SSE and ping, unless the answer has started."""
        if not self.started and not self.finished:
            self.pinger = asyncio.get_running_loop().create_task(self._ping())

    async def _ping(self) -> None:
        async with self.lock:
            if self.started:
                return
            self.started = self.committed = True
            await self.out({"type": "http.response.start", "status": 200, "headers": modern._SSE_HEADERS})
        while True:
            async with self.lock:
                await self.out({"type": "http.response.body", "body": _PING, "more_body": True})
            await anyio.sleep(modern._SSE_PING_INTERVAL)

    async def send(self, message: Message) -> None:
        pinger = self.pinger
        if pinger is not None and not self.committed:
            pinger.cancel()  # the timer fired, but the answer came before the pinger ran
            self.pinger = pinger = None
        if pinger is None:
            if message["type"] == "http.response.start":
                self.started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                self.finished = True
            await self.out(message)
            return
        if message["type"] != "http.response.body":
            return  # committed: the JSON answer's status and headers are not sent
        self.body.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        async with self.lock:  # the pinger is between pings, not writing
            pinger.cancel()
            self.finished = True
            data = b"".join(self.body)
            await self.out(
                {
                    "type": "http.response.body",
                    "body": b"event: message\r\ndata: " + data + b"\r\n\r\n",
                    "more_body": False,
                }
            )

    async def stop(self) -> None:
        pinger, self.pinger = self.pinger, None
        if pinger is not None:
            pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinger


async def _watched(handle: Callable[[Send], Awaitable[None]], receive: Receive, send: Send) -> None:
    """`handle(send)` in this task, cancelled if the client goes away, kept alive by SSE pings."""
    exchange = _Exchange(send)
    loop = asyncio.get_running_loop()
    with anyio.CancelScope() as scope:

        async def until_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not exchange.finished:
                scope.cancel()

        watcher = loop.create_task(until_gone())
        timer = loop.call_later(modern._SSE_PING_INTERVAL, exchange.keep_alive)
        try:
            await handle(exchange.send)
        finally:
            timer.cancel()
            watcher.cancel()
            await exchange.stop()
