"""The direct call's lean exchange (`direct_call._lean_exchange`): the request httpx2 would send, posted
on the client's own connection pool, and every rule of `AsyncClient.send` the gateway relies on kept.

A raw ASGI upstream on 127.0.0.1 records each POST's header list (names, values, order) and answers
as the test asks. Each case is run on the lean path and, where it matters, on httpx2's own
(`_lean_route` forced to None), and the two must agree.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from maitre.mcp import direct_call
from maitre.mcp.direct_call import _exchange
from maitre.mcp.egress import IDENTITY, AddressGuard, AddressRefused, ResponseTooLarge, _hooks

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_upstream import serving

pytestmark = pytest.mark.anyio

CAP = 4096


def _reply(request_id: Any, text: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}
    ).encode()


def upstream_app(seen: list[dict[str, Any]]) -> Any:
    """POST /mcp answers by the call's `mode` argument; /mcp/ is where a redirect leads."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request = json.loads(body)
        seen.append({"path": scope["path"], "headers": list(scope["headers"]), "body": request})
        mode = request["params"]["arguments"].get("mode", "ok")
        rid = request["id"]
        headers = [(b"content-type", b"application/json")]
        if scope["path"] == "/mcp" and mode == "redirect":
            await send({"type": "http.response.start", "status": 307, "headers": [(b"location", b"/mcp/")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if mode == "cookie":
            headers.append((b"set-cookie", b"lb=replica-2; Path=/"))
        if mode == "error":
            data = json.dumps(
                {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad city"}}
            ).encode()
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            return
        if mode == "big-chunked":  # no Content-Length: the cap counts what arrives
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send(
                {"type": "http.response.body", "body": _reply(rid, "x" * (2 * CAP)), "more_body": True}
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if mode == "gzip":
            data = gzip.compress(_reply(rid, "small"))
            headers += [(b"content-encoding", b"gzip"), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            return
        if mode == "sse":
            event = b"event: message\r\ndata: " + _reply(rid, "streamed") + b"\r\n\r\n"
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            await send({"type": "http.response.body", "body": event})
            return
        data = _reply(rid, f"echo {mode} at {scope['path']}")
        headers.append((b"content-length", str(len(data)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    return app


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    async with serving(upstream_app(seen)) as url:
        yield url, seen


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs `httpx2.AsyncClient.send` was asked for (the lean path never calls it)."""
    sent: list[str] = []
    original = httpx2.AsyncClient.send

    async def send(self: httpx2.AsyncClient, request: httpx2.Request, **kwargs: Any) -> Any:
        sent.append(str(request.url))
        return await original(self, request, **kwargs)

    monkeypatch.setattr(httpx2.AsyncClient, "send", send)
    return sent


def _client(*, guard: AddressGuard | None = None) -> httpx2.AsyncClient:
    """The client `linked_http_transport` builds: configured headers, identity, guard and cap hooks."""
    http = create_mcp_http_client(headers={"X-Configured": "yes", **IDENTITY})
    http.event_hooks = _hooks(guard or AddressGuard.of(allow_loopback=True), CAP)
    direct_call.coalesce_writes(http)
    return http


async def _call(http: httpx2.AsyncClient, url: str, mode: str, request_id: int = 7) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"mode": mode}},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "Mcp-Method": "tools/call",
    }
    return await _exchange(http, url, body, headers, request_id, CAP)


async def test_the_lean_request_is_byte_for_byte_the_one_httpx2_sends(upstream, sends, monkeypatch):
    url, seen = upstream
    async with _client() as http:
        lean = await _call(http, url, "ok")
        assert sends == []  # posted on the pool, not through AsyncClient.send
        monkeypatch.setattr(direct_call, "_lean_route", lambda *_: None)
        via_httpx2 = await _call(http, url, "ok")
        assert sends == [url]
    assert lean == via_httpx2 == {"content": [{"type": "text", "text": "echo ok at /mcp"}]}
    # The same header list: names as written, values, and order (Host first, Content-Length last).
    assert seen[0]["headers"] == seen[1]["headers"]
    names = [name.lower() for name, _ in seen[0]["headers"]]
    assert names[0] == b"host" and names[-1] == b"content-length" and b"x-configured" in names
    assert dict(seen[0]["headers"])[b"accept-encoding"] == b"identity"


async def test_the_connection_is_kept_and_reused(upstream):
    url, _ = upstream
    async with _client() as http:
        for n in range(5):
            await _call(http, url, "ok", request_id=n + 1)
        pool = http._transport._pool
        assert len(pool.connections) == 1


async def test_a_redirect_within_the_origin_is_followed_as_the_sdk_follows_it(upstream, sends):
    url, seen = upstream
    async with _client() as http:
        result = await _call(http, url, "redirect")
    assert result["content"][0]["text"] == "echo redirect at /mcp/"
    # The lean POST met the 307; it was then sent the SDK's way (stream_within_origin), which followed it.
    assert [s["path"] for s in seen] == ["/mcp", "/mcp", "/mcp/"]
    assert sends == [url, url + "/"]


async def test_a_cookie_the_upstream_sets_is_kept_and_sent_back(upstream, sends):
    url, seen = upstream
    async with _client() as http:
        await _call(http, url, "cookie")
        assert http.cookies.get("lb") == "replica-2"
        await _call(http, url, "ok")  # a client with cookies goes through httpx2, which sends them
    assert sends == [url]
    assert dict(seen[1]["headers"]).get(b"cookie") == b"lb=replica-2"


async def test_the_byte_cap_and_the_encoding_rule_hold_on_the_lean_path(upstream, sends):
    url, _ = upstream
    async with _client() as http:
        with pytest.raises(ResponseTooLarge, match="exceeded"):
            await _call(http, url, "big-chunked")
        with pytest.raises(ResponseTooLarge, match="gzip-encoded"):
            await _call(http, url, "gzip")
        assert (await _call(http, url, "ok"))["content"][0]["text"] == "echo ok at /mcp"  # the pool survived
    assert sends == []


async def test_errors_and_sse_answers_read_as_on_the_sdk_path(upstream):
    url, _ = upstream
    async with _client() as http:
        with pytest.raises(MCPError, match="bad city"):
            await _call(http, url, "error")
        assert (await _call(http, url, "sse"))["content"][0]["text"] == "streamed"


async def test_the_address_guard_checks_the_host_before_anything_is_sent(upstream):
    url, seen = upstream
    async with _client(guard=AddressGuard.of(allow_loopback=False)) as http:
        with pytest.raises(AddressRefused):
            await _call(http, url, "ok")
    assert seen == []


async def test_a_client_with_an_auth_flow_goes_through_httpx2(upstream, sends):
    url, seen = upstream

    class Stamp(httpx2.Auth):
        def auth_flow(self, request: httpx2.Request) -> Any:
            request.headers["Authorization"] = "Bearer upstream-credential"
            yield request

    async with _client() as http:
        http.auth = Stamp()
        await _call(http, url, "ok")
    assert sends == [url]
    assert dict(seen[0]["headers"])[b"authorization"] == b"Bearer upstream-credential"
