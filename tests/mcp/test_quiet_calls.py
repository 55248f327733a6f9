"""A 2026-07-28 request that cannot emit a notification skips the SDK's per-request stream
(`maitre.mcp.quiet_calls`), and still answers, cancels and keeps alive as the SDK's SSE mode does.

A governed server on 127.0.0.1 (`running_http`); raw 2026-07-28 POSTs with httpx, so the wire itself
(status, content type, SSE frames) is what is checked.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from mcp.server import _streamable_http_modern as modern

from maitre import Toolbox
from maitre.mcp import quiet_calls
from maitre.mcp.app import MCPApp
from maitre.mcp.context import current_call
from maitre.mcp.server import GovernedServer
from maitre.mcp.testing import MODERN, envelope
from maitre.mcp.transports import running_http

pytestmark = pytest.mark.anyio


class Probe:
    def __init__(self) -> None:
        self.cancelled = anyio.Event()
        self.started = anyio.Event()


def _server(probe: Probe) -> GovernedServer:
    box = Toolbox()

    @box.tool
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @box.tool
    async def wait(seconds: float) -> str:
        """Answer after `seconds`."""
        probe.started.set()
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            probe.cancelled.set()
            raise
        return "waited"

    @box.tool
    async def steps() -> str:
        """Report two progress steps, then answer."""
        call = current_call()
        assert call is not None
        await call.report_progress(1, 2, "half")
        await call.report_progress(2, 2, "done")
        return "stepped"

    return GovernedServer(MCPApp(box, name="quiet", version="1.0"))


def _body(name: str, arguments: dict[str, Any], *, progress: bool = False) -> dict[str, Any]:
    meta = envelope(None)
    if progress:
        meta["progressToken"] = "p-1"
    return {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }


def _headers(name: str, accept: str = "application/json, text/event-stream") -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": accept,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }


@pytest.fixture
def modes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The json_response flag of every `handle_modern_request` call (True: the quiet path's)."""
    seen: list[bool] = []
    original = modern.handle_modern_request

    async def spy(app: Any, security: Any, json_response: bool, *rest: Any) -> None:
        seen.append(json_response)
        await original(app, security, json_response, *rest)

    monkeypatch.setattr(modern, "handle_modern_request", spy)
    monkeypatch.setattr("mcp.server.streamable_http_manager.handle_modern_request", spy)
    return seen


def _frames(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


async def test_a_quiet_call_is_answered_as_plain_json_the_way_the_sdk_answers_it(modes, monkeypatch):
    probe = Probe()
    async with running_http(_server(probe)) as url, httpx.AsyncClient(timeout=10) as http:
        quiet = await http.post(url, json=_body("echo", {"text": "hi"}), headers=_headers("echo"))
        monkeypatch.setattr(quiet_calls, "is_quiet", lambda _body: False)  # the SDK's own path
        sdk = await http.post(url, json=_body("echo", {"text": "hi"}), headers=_headers("echo"))
    assert modes == [True, False]
    assert quiet.status_code == sdk.status_code == 200
    assert quiet.headers["content-type"] == sdk.headers["content-type"] == "application/json"
    assert quiet.json() == sdk.json()
    assert quiet.json()["result"]["content"] == [{"type": "text", "text": "hi"}]


async def test_errors_keep_their_status_on_the_quiet_path(modes):
    probe = Probe()
    async with running_http(_server(probe)) as url, httpx.AsyncClient(timeout=10) as http:
        wrong = await http.post(url, json=_body("echo", {"text": "hi"}), headers=_headers("other"))
        only_json = await http.post(
            url, json=_body("echo", {"text": "hi"}), headers=_headers("echo", "application/json")
        )
    assert wrong.status_code == 400 and "error" in wrong.json()  # Mcp-Name does not match the body
    assert only_json.status_code == 406  # SSE mode requires both; so does the quiet path
    assert modes == [True, False]


async def test_a_call_that_takes_progress_streams_it_through_the_sdk(modes):
    probe = Probe()
    async with running_http(_server(probe)) as url, httpx.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=_body("steps", {}, progress=True), headers=_headers("steps"))
    assert modes == [False]
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = _frames(response.text)
    assert [f["params"]["message"] for f in frames if f.get("method") == "notifications/progress"] == [
        "half",
        "done",
    ]
    assert frames[-1]["id"] == 5 and frames[-1]["result"]["content"][0]["text"] == "stepped"


async def test_a_silent_call_past_the_keep_alive_interval_is_committed_to_sse_and_pinged(modes, monkeypatch):
    monkeypatch.setattr(modern, "_SSE_PING_INTERVAL", 0.15)
    probe = Probe()
    async with running_http(_server(probe)) as url, httpx.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=_body("wait", {"seconds": 0.5}), headers=_headers("wait"))
    assert modes == [True]
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    assert response.text.count(": ping") >= 2
    (frame,) = _frames(response.text)
    assert frame["id"] == 5 and frame["result"]["content"][0]["text"] == "waited"
    assert response.text.endswith("\r\n\r\n")


async def test_a_client_that_goes_away_cancels_its_call(modes):
    probe = Probe()
    async with running_http(_server(probe)) as url:
        async with httpx.AsyncClient(timeout=10) as http:
            with anyio.move_on_after(5):
                async with http.stream(
                    "POST", url, json=_body("wait", {"seconds": 30}), headers=_headers("wait")
                ) as streamed:
                    await probe.started.wait()
                    await streamed.aclose()  # closes the connection before any answer
        with anyio.fail_after(5):
            await probe.cancelled.wait()
    assert modes == [True]


def test_what_counts_as_quiet():
    assert quiet_calls.is_quiet(b'{"method":"tools/call","params":{"name":"echo"}}')
    assert not quiet_calls.is_quiet(b'{"params":{"_meta":{"progressToken":1}}}')
    assert not quiet_calls.is_quiet(b'{"params":{"_meta":{"io.modelcontextprotocol/logLevel":"info"}}}')
    assert not quiet_calls.is_quiet(b'{"method":"subscriptions/listen"}')
    assert not quiet_calls.is_quiet(b'{"params":{"_meta":{"progress\\u0054oken":1}}}')  # spelled in escapes
