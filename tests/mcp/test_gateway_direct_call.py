"""The gateway's direct 2026-07-28 `tools/call` (`maitre.mcp.direct_call`) against the SDK session's.

A real SDK `MCPServer` in this event loop records every `tools/call` POST it receives (headers and
JSON body); each call is made once through the SDK session (`direct_calls=False`) and once
directly, and the two requests, answers and errors must be the same, so the speed-up changes
nothing on the wire or in what the gate sees.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import anyio
import httpcore2
import pytest
from mcp.client.session import ClientSession
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from maitre.mcp.client import McpUpstream
from maitre.mcp.direct_call import COALESCE_LIMIT, CoalescingBackend, CoalescingStream
from maitre.types import ToolError

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_upstream import serving

pytestmark = pytest.mark.anyio

IGNORED_HEADERS = {"content-length"}
"""What may differ between the two requests: the body's length (the SDK's JSON has spaces)."""


class Forecast(BaseModel):
    city: str
    celsius: int


def recorder_app(seen: list[dict[str, Any]]) -> Any:
    app = MCPServer("rec")

    @app.tool()
    def region(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], ctx: Context
    ) -> str:
        """The Mcp-Param-Region header this call carried."""
        return (ctx.headers or {}).get("mcp-param-region", "(none)")

    @app.tool()
    def forecast(city: str) -> Forecast:
        """A structured answer, held to its output schema."""
        return Forecast(city=city, celsius=21)

    @app.tool()
    def broken(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"broken: {reason}")

    @app.tool()
    async def slow(delay: float) -> str:
        """Answers after `delay` seconds."""
        await anyio.sleep(delay)
        return "late"

    inner = app.streamable_http_app(host="127.0.0.1")

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await inner(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        parsed = json.loads(body)
        if parsed.get("method") == "tools/call":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            seen.append({"headers": headers, "body": parsed})
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await inner(scope, replay, send)

    return recording


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    async with serving(recorder_app(seen)) as url:
        yield url, seen


def _upstream(url: str, *, direct: bool, timeout_s: float = 30.0) -> McpUpstream:
    return McpUpstream(
        url,
        namespace="rec",
        allow_loopback=True,
        scan="off",
        mode="2026-07-28",
        direct_calls=direct,
        timeout_s=timeout_s,
    )


async def _outcome(upstream: McpUpstream, name: str, arguments: dict[str, Any]) -> Any:
    try:
        return ("ok", await upstream.call(name, arguments))
    except ToolError as exc:
        return ("error", exc.code, exc.message, exc.retryable)


@pytest.fixture
def sdk_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the calls that went through the SDK session's `call_tool`."""
    counted: list[str] = []
    original = ClientSession.call_tool

    async def call_tool(self: ClientSession, name: str, *args: Any, **kwargs: Any) -> Any:
        counted.append(name)
        return await original(self, name, *args, **kwargs)

    monkeypatch.setattr(ClientSession, "call_tool", call_tool)
    return counted


CALLS = [
    ("region", {"region": "eu-west1"}),
    ("forecast", {"city": "Lyon"}),
    ("broken", {"reason": "on purpose"}),
]


async def test_direct_calls_send_what_the_sdk_sends_and_read_the_same_answers(recorded, sdk_calls):
    url, seen = recorded
    outcomes: dict[bool, list[Any]] = {}
    requests: dict[bool, list[dict[str, Any]]] = {}
    for direct in (False, True):
        async with _upstream(url, direct=direct) as upstream:
            await upstream.toolbox()
            seen.clear()
            outcomes[direct] = [await _outcome(upstream, name, args) for name, args in CALLS]
            requests[direct] = list(seen)
        # Through the SDK session only when asked; the direct path never touches its call_tool.
        assert sdk_calls == ([] if direct else [name for name, _ in CALLS])
        sdk_calls.clear()
    assert outcomes[True] == outcomes[False]
    # The Mcp-Param-Region header reached the server:
    assert outcomes[True][0] == ("ok", {"result": "eu-west1"})
    assert outcomes[True][1] == ("ok", {"city": "Lyon", "celsius": 21})
    assert outcomes[True][2][0] == "error"
    assert len(requests[True]) == len(requests[False]) == len(CALLS)
    for via_sdk, direct in zip(requests[False], requests[True], strict=True):
        sdk_headers = {k: v for k, v in via_sdk["headers"].items() if k not in IGNORED_HEADERS}
        direct_headers = {k: v for k, v in direct["headers"].items() if k not in IGNORED_HEADERS}
        assert direct_headers == sdk_headers
        assert {**direct["body"], "id": 0} == {**via_sdk["body"], "id": 0}
    assert requests[True][0]["headers"]["mcp-param-region"] == "eu-west1"
    assert requests[True][0]["headers"]["mcp-method"] == "tools/call"
    assert requests[True][0]["headers"]["mcp-name"] == "region"


async def test_a_direct_call_that_outlasts_the_timeout_is_the_same_timeout(recorded):
    url, _ = recorded
    outcomes = []
    for direct in (False, True):
        async with _upstream(url, direct=direct, timeout_s=0.3) as upstream:
            await upstream.toolbox()
            outcomes.append(await _outcome(upstream, "slow", {"delay": 2.0}))
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][:2] == ("error", "TIMEOUT") and outcomes[1][3] is True


def test_direct_calls_go_through_the_sdk_when_the_caller_takes_progress():
    """A caller whose request carries a progress token gets the SDK path (it relays the upstream's
    progress); the check reads the SDK's own request channel."""
    from maitre.mcp.client import _wants_progress
    from maitre.mcp.context import McpCallContext

    class Outbound:
        def __init__(self, token: Any) -> None:
            self.progress_token = token

    class Session:
        def __init__(self, token: Any) -> None:
            self._request_outbound = Outbound(token)

    with_token = McpCallContext(protocol_version="2026-07-28", session=Session("p-1"))
    without = McpCallContext(protocol_version="2026-07-28", session=Session(None))
    unknown = McpCallContext(protocol_version="2026-07-28", session=object())
    assert _wants_progress(with_token) and not _wants_progress(without)
    assert _wants_progress(unknown)  # cannot tell: the SDK path, which relays whatever was asked


# -- one write per request --------------------------------------------------------------------------


class FakeStream(httpcore2.AsyncNetworkStream):
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 - httpcore2's interface
        self.sent.append(buffer)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 - httpcore2's interface
        return b"HTTP/1.1 200 OK\r\n"

    async def aclose(self) -> None:
        self.closed = True


async def test_writes_wait_for_the_next_read_and_go_out_as_one():
    inner = FakeStream()
    stream = CoalescingStream(inner)
    await stream.write(b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
    await stream.write(b"{}")
    await stream.write(b"")
    assert inner.sent == []  # nothing on the wire until the answer is awaited
    await stream.read(100)
    assert inner.sent == [b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"]
    await stream.read(100)
    assert len(inner.sent) == 1  # a read with nothing pending sends nothing


async def test_a_large_body_is_written_as_it_comes_and_an_abandoned_request_is_never_sent():
    inner = FakeStream()
    stream = CoalescingStream(inner)
    await stream.write(b"x" * (COALESCE_LIMIT - 1))
    assert inner.sent == []
    await stream.write(b"yy")
    assert [len(chunk) for chunk in inner.sent] == [COALESCE_LIMIT + 1]
    await stream.write(b"a request nobody waits for")
    await stream.aclose()
    assert inner.closed and len(inner.sent) == 1


async def test_every_upstream_request_is_one_socket_write(recorded, monkeypatch):
    """Through a real upstream: head and body of each call leave in one write, and the calls still
    get their answers (the SDK session's own requests share the pool, and the rule)."""
    url, seen = recorded
    streams: list[CoalescingStream] = []
    original = CoalescingBackend.connect_tcp

    async def connect_tcp(self: CoalescingBackend, *args: Any, **kwargs: Any) -> Any:
        stream = await original(self, *args, **kwargs)
        streams.append(stream)
        return stream

    monkeypatch.setattr(CoalescingBackend, "connect_tcp", connect_tcp)
    async with _upstream(url, direct=True) as upstream:
        await upstream.toolbox()
        before = sum(s.writes for s in streams)
        seen.clear()
        answers = [await upstream.call("region", {"region": f"r{i}"}) for i in range(5)]
        after = sum(s.writes for s in streams)
    assert answers == [{"result": f"r{i}"} for i in range(5)]
    assert len(seen) == 5 and after - before == 5
