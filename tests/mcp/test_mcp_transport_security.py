"""Transport attacks (issue 10, item 8): DNS rebinding on any bind, weak HMAC secrets, scope challenges."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

import httpx
import jwt
import pytest
from mcp_testkit import shop_box

from maitre.exceptions import UserError
from maitre.mcp.app import MCPApp
from maitre.mcp.auth import JWTVerifier
from maitre.mcp.server import GovernedServer, ServerOptions
from maitre.mcp.signing import load_secret
from maitre.mcp.testing import MODERN, bearer_client, envelope, free_port, serve_process
from maitre.mcp.transports import http_app, running_http
from maitre.types import Principal

KEY = "transport-tests-jwt-secret-0123456789abcdef"
ISSUER = "https://idp.test"
RESOURCE = "https://shop.test/mcp"
EVIL = "https://evil.example"


def _token(scope: str = "", user: str = "alice") -> str:
    claims = {"sub": user, "tenant": "acme", "iss": ISSUER, "aud": "shop", "exp": int(time.time()) + 60}
    if scope:
        claims["scope"] = scope
    return jwt.encode(claims, KEY, algorithm="HS256")


def _verifier() -> JWTVerifier:
    return JWTVerifier(key=KEY, issuer=ISSUER, audience="shop", algorithms=["HS256"])


def _scoped_server(options: ServerOptions | None = None) -> tuple[GovernedServer, list[str]]:
    """The shop plus `refund` (needs orders:write and payments:refund); `ran` records executions."""
    ran: list[str] = []
    box = shop_box()

    @box.tool(effect="read", scopes={"orders:write", "payments:refund"})
    def refund(order_id: str) -> str:
        """Look up whether an order can be refunded. Use it before promising a refund."""
        ran.append(order_id)
        return f"refundable {order_id}"

    return GovernedServer(MCPApp(box, name="shop"), options), ran


def _body(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": envelope()}}


def _headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **extra,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


async def _post(
    url: str,
    method: str = "tools/list",
    params: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    client: httpx.AsyncClient | None = None,
    **headers: str,
) -> httpx.Response:
    sent = _headers(method, name, **headers)
    if client is not None:
        return await client.post(url, json=_body(method, params), headers=sent)
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(url, json=_body(method, params), headers=sent)


def _challenge(response: httpx.Response) -> dict[str, str]:
    """The auth-params of a `WWW-Authenticate: Bearer k="v", ...` header."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    params = {}
    for part in value[len("Bearer ") :].split('", '):
        key, _, raw = part.partition("=")
        params[key.strip()] = raw.strip().strip('"')
    return params


# --- Origin / Host (DNS rebinding) on every bind -------------------------------------------------


@pytest.mark.anyio
async def test_a_foreign_origin_is_refused_on_a_non_loopback_bind():
    """Bound to 127.0.0.2, `Origin: https://evil.example` is 403; no Origin (a non-browser client) is served."""
    async with running_http(GovernedServer(MCPApp(shop_box(), name="shop")), host="127.0.0.2") as url:
        assert url.startswith("http://127.0.0.2:")
        refused = await _post(url, Origin=EVIL)
        assert refused.status_code == 403
        served = await _post(url)
        assert served.status_code == 200 and "get_order" in served.text
        same_origin = url.removesuffix("/mcp")
        assert (await _post(url, Origin=same_origin)).status_code == 200


@pytest.mark.anyio
async def test_a_rebound_host_header_is_refused_on_a_non_loopback_bind():
    """A DNS-rebinding page reaches 127.0.0.2 with `Host: evil.example`: 421, nothing served."""
    async with running_http(GovernedServer(MCPApp(shop_box(), name="shop")), host="127.0.0.2") as url:
        port = url.split(":")[2].split("/")[0]
        for host in (
            f"evil.example:{port}",
            "evil.example",
            f"127.0.0.1:{port}",
            f"127.0.0.2:{int(port) + 1}",
        ):
            response = await _post(url, Host=host)
            assert response.status_code == 421, host
            assert "get_order" not in response.text


@pytest.mark.anyio
async def test_allow_listed_hosts_and_origins_are_served_and_nothing_else():
    """`allowed_hosts` / `allowed_origins` widen the defaults: the listed ones pass, the rest stay refused."""
    server = GovernedServer(MCPApp(shop_box(), name="shop"))
    async with running_http(
        server,
        host="127.0.0.2",
        allowed_hosts=["mcp.shop.test"],
        allowed_origins=["https://console.shop.test"],
    ) as url:
        assert (await _post(url, Host="mcp.shop.test")).status_code == 200
        assert (await _post(url, Host="mcp.shop.test", Origin="https://console.shop.test")).status_code == 200
        assert (await _post(url, Host="mcp.shop.test", Origin=EVIL)).status_code == 403
        assert (await _post(url, Host="mcp.shop.test", Origin="null")).status_code == 403
        assert (await _post(url, Host="other.shop.test")).status_code == 421


@pytest.mark.anyio
@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
async def test_a_wildcard_bind_serves_only_loopback_or_allow_listed_hosts(wildcard):
    """For 0.0.0.0 / :: (not bound here) protection is on; a LAN or DNS Host is refused until allowed."""
    server = GovernedServer(MCPApp(shop_box(), name="shop"))
    app = http_app(server, host=wildcard, port=8123)
    settings = app.state.transport_security
    assert settings.enable_dns_rebinding_protection
    assert sorted(settings.allowed_hosts) == ["127.0.0.1:8123", "[::1]:8123", "localhost:8123"]
    assert EVIL not in settings.allowed_origins and all(":8123" in o for o in settings.allowed_origins)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app)) as http,
    ):
        for base in ("http://192.168.1.5:8123", "http://shop.lan:8123", "http://127.0.0.1:9999"):
            assert (await _post(f"{base}/mcp", client=http)).status_code == 421, base
        loopback = "http://127.0.0.1:8123/mcp"
        assert (await _post(loopback, client=http, Origin=EVIL)).status_code == 403
        served = await _post(loopback, client=http)
        assert served.status_code == 200 and "get_order" in served.text

    allowed = http_app(server, host=wildcard, port=8123, allowed_hosts=["shop.lan:8123"])
    assert "shop.lan:8123" in allowed.state.transport_security.allowed_hosts
    async with (
        allowed.router.lifespan_context(allowed),
        httpx.AsyncClient(transport=httpx.ASGITransport(allowed)) as http,
    ):
        assert (await _post("http://shop.lan:8123/mcp", client=http)).status_code == 200
        assert (await _post("http://192.168.1.5:8123/mcp", client=http)).status_code == 421


@pytest.mark.anyio
async def test_a_foreign_origin_is_refused_before_authentication():
    """The Origin check comes first: a rebinding page gets 403 with or without a valid token, never 401."""
    server = GovernedServer(MCPApp(shop_box(), name="shop"))
    async with running_http(server, host="127.0.0.2", verifier=_verifier()) as url:
        assert (await _post(url, Origin=EVIL)).status_code == 403
        assert (await _post(url, Origin=EVIL, Authorization=f"Bearer {_token()}")).status_code == 403
        assert (await _post(url, Authorization=f"Bearer {_token()}")).status_code == 200


def test_maitre_serve_allow_origin_and_allow_host_reach_the_middleware():
    """`maitre serve --allow-origin/--allow-host` (repeatable) extend the allow-list of a real server."""
    args = ["--allow-origin", "https://console.shop.test", "--allow-origin", "https://b.test"]
    args += ["--allow-host", "mcp.shop.test"]
    with (
        serve_process("tests/mcp/mcp_testkit.py:shop_box", args=args) as url,
        httpx.Client(timeout=30) as http,
    ):

        def post(**headers: str) -> int:
            return http.post(
                url, json=_body("tools/list"), headers=_headers("tools/list", **headers)
            ).status_code

        assert post(Origin="https://console.shop.test") == 200
        assert post(Origin="https://b.test") == 200
        assert post(Origin=EVIL) == 403
        assert post(Host="mcp.shop.test") == 200
        assert post(Host="evil.example") == 421


# --- HMAC secrets of at least 32 bytes -----------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "algorithms"),
    [
        ("abc", ["HS256"]),
        ("x" * 31, ["HS256"]),
        (b"x" * 31, ["HS256"]),
        ("x" * 40, ["HS512"]),
        ("", ["HS384"]),
    ],
)
def test_a_short_hmac_key_for_the_jwt_verifier_is_refused(key, algorithms):
    """An HS* key shorter than its hash (32 bytes for HS256, RFC 7518 §3.2) is a UserError at construction."""
    with pytest.raises(UserError, match="at least"):
        JWTVerifier(key=key, issuer=ISSUER, audience="shop", algorithms=algorithms)


def test_long_hmac_keys_and_public_keys_are_accepted():
    """32 bytes for HS256, 64 for HS512, and a short non-HMAC key setup (no HS algorithm) all construct."""
    JWTVerifier(key="x" * 32, issuer=ISSUER, audience="shop", algorithms=["HS256"])
    JWTVerifier(key=b"x" * 64, issuer=ISSUER, audience="shop", algorithms=["HS256", "HS512"])
    JWTVerifier(key="-----BEGIN PUBLIC KEY-----\n...", issuer=ISSUER, audience="shop")


def test_a_short_server_signing_secret_is_refused(monkeypatch):
    """`load_secret` and MAITRE_MCP_SECRET under 32 bytes are a UserError; GovernedServer refuses it too."""
    with pytest.raises(UserError, match="at least 32 bytes"):
        load_secret("abc")
    monkeypatch.setenv("MAITRE_MCP_SECRET", "short")
    with pytest.raises(UserError, match="MAITRE_MCP_SECRET"):
        load_secret()
    with pytest.raises(UserError):
        GovernedServer(MCPApp(shop_box(), name="shop"))
    with pytest.raises(UserError):
        GovernedServer(MCPApp(shop_box(), name="shop"), ServerOptions(secret=b"x" * 31))
    monkeypatch.setenv("MAITRE_MCP_SECRET", "s" * 32)
    assert load_secret() == b"s" * 32


def _serve_and_fail(
    args: list[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "maitre.mcp", "serve", "tests/mcp/mcp_testkit.py:shop_box"]
    command += ["--transport", "http", "--port", str(free_port()), *args]
    return subprocess.run(
        command, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    ("secret_file", "env"),
    [("abc", {}), ("a" * 31, {}), ("k" * 32, {"MAITRE_MCP_SECRET": "tiny"})],
    ids=["3-byte-jwt-key", "31-byte-jwt-key", "short-MAITRE_MCP_SECRET"],
)
def test_maitre_serve_refuses_a_short_hmac_secret_in_one_line(tmp_path, secret_file, env):
    """`maitre serve` with a short HS256 key file or MAITRE_MCP_SECRET exits 2 with one line, no traceback."""
    key_file = tmp_path / "jwt.key"
    key_file.write_text(secret_file + "\n")
    jwt_args = ["--jwt-issuer", ISSUER, "--jwt-audience", "shop", "--jwt-key-file", str(key_file)]
    try:
        done = _serve_and_fail(jwt_args, env)
    except subprocess.TimeoutExpired:
        pytest.fail("maitre serve started with a short HMAC secret")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "at least 32 bytes" in lines[0]


# --- Scope challenges: 403 insufficient_scope, 401 names the scopes -----------------------------


@pytest.mark.anyio
async def test_a_token_lacking_a_tools_scope_gets_403_insufficient_scope():
    """tools/call refund with only orders:write: HTTP 403, WWW-Authenticate names every needed scope."""
    server, ran = _scoped_server()
    async with running_http(server, verifier=_verifier(), resource_url=RESOURCE, issuer_url=ISSUER) as url:
        call = {"name": "refund", "arguments": {"order_id": "A1042"}}
        token = _token("orders:read orders:write")
        response = await _post(url, "tools/call", call, name="refund", Authorization=f"Bearer {token}")
        assert response.status_code == 403
        challenge = _challenge(response)
        assert challenge["error"] == "insufficient_scope"
        assert set(challenge["scope"].split()) == {"orders:write", "payments:refund"}
        assert challenge["resource_metadata"] == "https://shop.test/.well-known/oauth-protected-resource/mcp"
        assert json.loads(response.text)["error"] == "insufficient_scope"
        assert ran == []

        full = _token("orders:write payments:refund")
        response = await _post(url, "tools/call", call, name="refund", Authorization=f"Bearer {full}")
        assert response.status_code == 200 and "refundable A1042" in response.text
        listed = await _post(url, Authorization=f"Bearer {token}")
        assert listed.status_code == 200 and "refund" in listed.text  # other methods are not gated here
        assert ran == ["A1042"]


@pytest.mark.anyio
async def test_a_lying_mcp_name_header_does_not_dodge_the_scope_check():
    """Mcp-Name says get_order, the body calls refund: refused (403 or the SDK's 400), refund never runs."""
    server, ran = _scoped_server()
    async with running_http(server, verifier=_verifier()) as url:
        call = {"name": "refund", "arguments": {"order_id": "A1042"}}
        response = await _post(url, "tools/call", call, name="get_order", Authorization=f"Bearer {_token()}")
        assert response.status_code in (400, 403)
        response = await _post(
            url, "tools/call", call, Authorization=f"Bearer {_token()}"
        )  # no header at all
        assert response.status_code == 403
    assert ran == []


@pytest.mark.anyio
async def test_duplicate_keys_cannot_hide_the_called_tool_from_the_scope_check():
    """`"name"` twice in params: whichever one the SDK keeps, a scoped tool among them means 403."""
    server, ran = _scoped_server()
    async with running_http(server, verifier=_verifier()) as url:
        meta = json.dumps(envelope())
        for first, second in [("get_order", "refund"), ("refund", "get_order")]:
            params = f'"name": "{first}", "name": "{second}", "arguments": {{"order_id": "A1042"}}'
            raw = f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {{{params}, "_meta": {meta}}}}}'
            headers = _headers("tools/call", Authorization=f"Bearer {_token()}")
            async with httpx.AsyncClient(timeout=30) as http:
                response = await http.post(url, content=raw, headers=headers)
            assert response.status_code == 403, response.text
    assert ran == []


@pytest.mark.anyio
async def test_the_metadata_scopes_follow_the_toolbox_as_tools_come_and_go():
    """A gateway's upstream comes up after the server started: the protected-resource metadata
    names its tools' scopes from then on (read per request, cached a minute, not an hour), and
    stops naming them when the tool is gone."""
    server, _ = _scoped_server()
    async with running_http(server, verifier=_verifier(), resource_url=RESOURCE, issuer_url=ISSUER) as url:
        where = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        async with httpx.AsyncClient(timeout=30) as http:
            before = await http.get(where)

            @server.app.toolbox.tool(effect="read", scopes={"reports:read"})
            def report(day: str) -> str:
                """The day's report. Use it when asked how a day went."""
                return day

            during = (await http.get(where)).json()
            server.app.toolbox.remove("report")
            after = (await http.get(where)).json()
    assert "reports:read" not in before.json()["scopes_supported"]
    assert before.headers["cache-control"] == "public, max-age=60"
    assert "reports:read" in during["scopes_supported"]
    assert set(after["scopes_supported"]) == {"orders:write", "payments:refund"}
    assert during["resource"].rstrip("/") == RESOURCE.rstrip("/") and during["authorization_servers"]


@pytest.mark.anyio
async def test_the_401_challenge_names_the_scopes():
    """No token or a bad one: 401 with `scope=` (the server's required scopes, else the tools' union)."""
    server, _ = _scoped_server()
    async with running_http(server, verifier=_verifier(), resource_url=RESOURCE, issuer_url=ISSUER) as url:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            response = await _post(url, **headers)
            assert response.status_code == 401
            challenge = _challenge(response)
            assert challenge["error"] == "invalid_token"
            assert set(challenge["scope"].split()) == {"orders:write", "payments:refund"}
            assert challenge["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
        async with httpx.AsyncClient(timeout=30) as http:
            metadata = await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
        assert set(metadata.json()["scopes_supported"]) == {"orders:write", "payments:refund"}

    server, _ = _scoped_server()
    async with running_http(server, verifier=_verifier(), required_scopes=["shop:use"]) as url:
        response = await _post(url)
        assert response.status_code == 401 and _challenge(response)["scope"] == "shop:use"
        lacking = await _post(url, Authorization=f"Bearer {_token('orders:read')}")
        assert lacking.status_code == 403 and _challenge(lacking)["scope"] == "shop:use"
        call = {"name": "refund", "arguments": {"order_id": "A1042"}}
        token = _token("shop:use")
        response = await _post(url, "tools/call", call, name="refund", Authorization=f"Bearer {token}")
        assert response.status_code == 403  # one challenge with everything this operation needs
        assert set(_challenge(response)["scope"].split()) == {"shop:use", "orders:write", "payments:refund"}


@pytest.mark.anyio
async def test_the_buffered_body_still_reaches_the_sdk_for_sessions_and_streams():
    """The scope middleware replays the body: an SDK client (sessions, SSE) calls a scoped tool end to end."""
    server, ran = _scoped_server()
    async with running_http(server, verifier=_verifier()) as url:
        async with bearer_client(url, _token("orders:write payments:refund")) as client:
            result = await client.call_tool("refund", {"order_id": "A1042"})
        assert not result.is_error and ran == ["A1042"]
        big = {"name": "refund", "arguments": {"order_id": "A" * (5 * 1024 * 1024)}}
        token = _token("orders:write payments:refund")
        response = await _post(url, "tools/call", big, name="refund", Authorization=f"Bearer {token}")
        assert response.status_code == 413  # the SDK's own body limit still answers
    assert ran == ["A1042"]


@pytest.mark.anyio
async def test_the_gate_still_refuses_missing_scopes_where_there_is_no_http():
    """In process (no transport middleware) the gate's PERMISSION_DENIED stays the line of defence."""
    from mcp import Client

    alice = Principal(user="alice", tenant="acme", scopes=frozenset({"orders:write"}))
    server, ran = _scoped_server(ServerOptions(principal=alice))
    async with Client(server.lowlevel) as client:
        result = await client.call_tool("refund", {"order_id": "A1042"})
    assert result.is_error and "PERMISSION_DENIED" in json.dumps(result.model_dump(mode="json"))
    assert ran == []
