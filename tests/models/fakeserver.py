"""A provider API on 127.0.0.1 for the adapter tests: scripted replies in order, every request kept.

The real SDKs talk to it over real HTTP (an ephemeral port, a thread running
`http.server.ThreadingHTTPServer`), so retries, headers and JSON bodies go through the same code
as in production. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeProvider", "Received", "Reply"]


@dataclass(kw_only=True)
class Reply:
    """One scripted HTTP answer."""

    body: Any
    """JSON-ready body."""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hang_up: bool = False
    """Close the connection without answering (as llama-cpp-python's server does when it crashes)."""
    delay: float = 0.0
    """Seconds to "generate" before answering; a client that hangs up meanwhile is counted in
    `FakeProvider.disconnects` and gets no answer (as llama.cpp's server stops generating)."""


@dataclass(kw_only=True)
class Received:
    """One request the server got."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any
    """The parsed JSON body (None when empty)."""


class FakeProvider:
    """Answers queued replies in order; with none left it answers 500 with `x-should-retry: false`."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.validate: Callable[[Received], Reply | None] | None = None
        """A server's own checks of each request (see `tests/models/llamacpp.py`): a Reply it
        returns is answered instead of the queued one (which stays queued)."""
        self.disconnects = 0
        """Requests whose client hung up before the delayed answer was ready."""
        self._hung_up = threading.Event()

    def __enter__(self) -> FakeProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # the SDKs only POST for these endpoints
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                received = Received(
                    method="POST",
                    path=self.path,
                    headers={key.lower(): value for key, value in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
                refused = provider.validate(received) if provider.validate is not None else None
                with provider._lock:
                    provider.requests.append(received)
                    if refused is not None:
                        reply: Reply | None = refused
                    else:
                        reply = provider._replies.popleft() if provider._replies else None
                if reply is None:
                    reply = Reply(
                        status=500,
                        body={"error": {"type": "fake_server", "message": "no reply queued"}},
                        headers={"x-should-retry": "false"},
                    )
                if reply.hang_up:
                    self.close_connection = True
                    return
                if reply.delay and self._client_left(reply.delay):
                    with provider._lock:
                        provider.disconnects += 1
                    provider._hung_up.set()
                    self.close_connection = True
                    return
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def _client_left(self, delay: float) -> bool:
                """Wait up to `delay` s; True as soon as the client closes its end."""
                deadline = time.monotonic() + delay
                while (left := deadline - time.monotonic()) > 0:
                    ready, _, _ = select.select([self.connection], [], [], min(left, 0.02))
                    if ready:
                        try:
                            if not self.connection.recv(1, socket.MSG_PEEK):  # EOF: it hung up
                                return True
                        except OSError:
                            return True
                        time.sleep(0.02)
                return False

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reset(self) -> None:
        """Forget queued replies and received requests (one server serves a whole test session)."""
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.validate = None
            self.disconnects = 0
            self._hung_up.clear()

    def queue(self, *replies: Reply | dict[str, Any]) -> None:
        """Queue answers: a `Reply`, or a plain body answered with 200."""
        with self._lock:
            for reply in replies:
                self._replies.append(reply if isinstance(reply, Reply) else Reply(body=reply))

    def wait_for_hang_up(self, timeout: float = 2.0) -> bool:
        """Block until a client has hung up on a delayed answer (True), or `timeout` s pass."""
        return self._hung_up.wait(timeout)

    @property
    def last(self) -> Received:
        assert self.requests, "the server received nothing"
        return self.requests[-1]
