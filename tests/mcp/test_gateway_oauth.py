"""OAuth at the gateway, end to end over real HTTP on 127.0.0.1 (issue 14, item 3).

Three real peers: an IdP (`oauth_peers.IdP`: JWKS, RFC 8414 metadata, a token endpoint doing RFC
8693 token exchange and client credentials, checking the client's secret and the subject token),
an upstream MCP server recording every request it receives (`oauth_peers.Upstream`), and between
them a maitre HTTP server with JWT auth serving a Toolbox imported with
`McpUpstream(**upstream_options(name, config))`, as `maitre gateway` builds it. Callers are SDK
clients sending their own bearer tokens.

The attacks: the caller's token must never reach the upstream, whatever the upstream's auth mode;
user B must never be handed user A's exchanged token or session; a token for another audience is
refused at the door; an IdP that echoes the subject token back does not turn the exchange into
passthrough.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from oauth_peers import GATEWAY_CLIENT, GATEWAY_RESOURCE, GATEWAY_SECRET, IdP, Upstream, serve_thread

from maitre import Gate, Principal, ToolCall
from maitre.config import UpstreamConfig
from maitre.mcp.app import MCPApp
from maitre.mcp.auth import JWKSKeys, JWTVerifier
from maitre.mcp.client import McpUpstream
from maitre.mcp.server import GovernedServer
from maitre.mcp.testing import bearer_client, raw_request
from maitre.mcp.token_exchange import TokenExchange
from maitre.mcp.transports import running_http
from maitre.mcp.upstream_auth import upstream_options
from maitre.stores import MemoryStores

pytestmark = pytest.mark.anyio

WHOAMI = {"effect": "read", "risk": "low"}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    peer = IdP()
    with serve_thread(peer.app()):
        yield peer


@pytest.fixture(scope="module")
def protected(idp: IdP) -> Iterator[Upstream]:
    """An upstream that accepts only the IdP's tokens for its own URL."""
    peer = Upstream(idp, require_jwt=True)
    with serve_thread(peer.app()):
        yield peer


@pytest.fixture(scope="module")
def open_upstream(idp: IdP) -> Iterator[Upstream]:
    """An upstream that takes any request (for the none and headers modes)."""
    peer = Upstream(idp)
    with serve_thread(peer.app()):
        yield peer


@pytest.fixture(autouse=True)
def _fresh(idp: IdP) -> None:
    idp.reset()


def exchange_config(idp: IdP, upstream: Upstream, **changes: Any) -> UpstreamConfig:
    values: dict[str, Any] = {
        "url": upstream.url,
        "auth": "token_exchange",
        "issuer": idp.base,
        "client_id": GATEWAY_CLIENT,
        "client_secret": GATEWAY_SECRET,
        "allow_loopback": True,
        "tools": {"whoami": WHOAMI, "echo": WHOAMI},
    }
    return UpstreamConfig.model_validate({**values, **changes})


@asynccontextmanager
async def gateway(
    idp: IdP, config: UpstreamConfig, stores: MemoryStores | None = None
) -> AsyncIterator[tuple[str, McpUpstream]]:
    """The maitre HTTP server in front of the upstream, behind JWT auth (as `maitre gateway`)."""
    upstream = McpUpstream(config.target(), namespace="up", **upstream_options("up", config))
    try:
        box = await upstream.toolbox()
        gate = Gate(box, stores=stores, audit=True) if stores is not None else Gate(box)
        server = GovernedServer(MCPApp(box, name="gw", gate=gate))
        verifier = JWTVerifier(
            key=JWKSKeys(url=idp.jwks_url), issuer=idp.base, audience=GATEWAY_RESOURCE, algorithms=["RS256"]
        )
        async with running_http(
            server, verifier=verifier, resource_url=GATEWAY_RESOURCE, issuer_url=idp.base
        ) as url:
            yield url, upstream
    finally:
        await upstream.aclose()


def exchanger(upstream: McpUpstream) -> TokenExchange:
    credential_for = upstream.credential_for
    assert credential_for is not None
    owner = credential_for.__self__  # type: ignore[attr-defined]
    assert isinstance(owner, TokenExchange)
    return owner


async def call(
    url: str, token: str, tool: str = "up.whoami", arguments: dict[str, Any] | None = None, **options: Any
) -> Any:
    """Call `tool` at the gateway as the bearer of `token`; the JSON it answered, or its error."""
    async with bearer_client(url, token, **options) as client:
        result = await client.call_tool(tool, arguments or {})
    if result.is_error:
        error = (result.meta or {}).get("io.maitre/error") or {}
        return {
            "error": error.get("code"),
            "message": error.get("message"),
            "retryable": error.get("retryable"),
        }
    text = (result.structured_content or {}).get(
        "result"
    )  # the upstream's text, untrusted-wrapped in content
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


# -- token exchange: each user their own token and session -----------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_user_gets_their_own_exchanged_token_and_session(idp, protected, mode):
    """Alice and Bob call the same tool: each call carries a token the IdP issued for that user (sub,
    the gateway as actor, the upstream as audience); Alice's second call reuses her cached token;
    each has their own upstream session; neither caller's token reaches the upstream. On 2025-11-25
    (legacy) too: the request's context reaches the handler through the gate either way."""
    alice, bob = idp.mint("alice"), idp.mint("bob")
    async with gateway(idp, exchange_config(idp, protected)) as (url, upstream):
        first = await call(url, alice, mode=mode)
        again = await call(url, alice, mode=mode)
        other = await call(url, bob, mode=mode)
        assert first["sub"] == again["sub"] == "alice" and other["sub"] == "bob"
        assert first["act"] == {"sub": GATEWAY_CLIENT} and first["aud"] == protected.url
        assert first["jti"] == again["jti"] != other["jti"]  # Alice's token was cached, Bob got his own
        assert [e["sub"] for e in idp.exchanges] == ["alice", "bob"]
        assert all(e["target"] == protected.url for e in idp.exchanges)
        ex = exchanger(upstream)
        keys = {s.key for s in upstream.pool.sessions()}
        from maitre.mcp.token_exchange import Caller

        alice_key = ex.session_key(Caller(tenant="acme", user="alice", token=alice))
        bob_key = ex.session_key(Caller(tenant="acme", user="bob", token=bob))
        assert {alice_key, bob_key} <= keys and alice_key != bob_key
        assert "alice" not in alice_key and alice not in alice_key  # a hash: neither the name nor the token
    assert not protected.saw(alice) and not protected.saw(bob)


async def test_user_b_never_gets_user_as_cached_token_even_with_the_same_session_racing(idp, protected):
    """Alice and Bob call concurrently, many times: every call runs as its own caller."""
    alice, bob = idp.mint("alice"), idp.mint("bob")
    async with gateway(idp, exchange_config(idp, protected)) as (url, _):
        seen: list[tuple[str, str]] = []

        async def one(user: str, token: str) -> None:
            seen.append((user, (await call(url, token))["sub"]))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one, "alice", alice)
                tg.start_soon(one, "bob", bob)
        assert len(seen) == 8 and all(user == sub for user, sub in seen)
        assert sorted(e["sub"] for e in idp.exchanges) == ["alice", "bob"]  # one exchange per user


async def test_an_expired_cached_token_is_exchanged_again(idp, protected):
    idp.ttl = 2  # the exchanged token lives 2 s; maitre stops using it 1 s before (half its life)
    alice = idp.mint("alice")
    async with gateway(idp, exchange_config(idp, protected)) as (url, _):
        first = await call(url, alice)
        assert (await call(url, alice))["jti"] == first["jti"]
        await anyio.sleep(1.2)
        renewed = await call(url, alice)
        assert renewed["sub"] == "alice" and renewed["jti"] != first["jti"]
        assert [e["sub"] for e in idp.exchanges] == ["alice", "alice"]


async def test_a_caller_token_of_another_audience_is_refused_at_the_door(idp, protected):
    """RFC 8707: a token minted for another resource is 401, and no exchange is even tried."""
    stolen = idp.mint("alice", aud="https://other-service.test/mcp")
    async with gateway(idp, exchange_config(idp, protected)) as (url, _):
        async with httpx.AsyncClient() as http:
            response = await http.post(url, json={}, headers={"Authorization": f"Bearer {stolen}"})
        assert response.status_code == 401
        assert "invalid_token" in response.headers["www-authenticate"]
    assert idp.exchanges == [] and not protected.saw(stolen)


# -- failures say why, and carry no token or secret -------------------------------------------------


async def test_without_a_caller_token_the_call_fails_clearly_and_is_not_retryable(idp, protected):
    """In process (no HTTP request, so no bearer token): AUTH_REQUIRED, saying there is nothing to
    exchange; nothing is asked of the IdP and the upstream gets no call."""
    async with gateway(idp, exchange_config(idp, protected)) as (_, upstream):
        before = len(protected.received)
        result = await Gate(upstream._box).call(  # type: ignore[arg-type]
            ToolCall(id="c1", name="up.whoami", arguments={}), Principal(user="alice", tenant="acme")
        )
    assert result.is_error and result.error is not None
    assert result.error.code == "AUTH_REQUIRED" and not result.error.retryable
    assert "no caller token" in result.error.message
    assert idp.exchanges == [] and len(protected.received) == before


@pytest.mark.parametrize(
    ("mode", "code", "retryable"),
    [
        ("invalid_grant", "AUTH_REQUIRED", False),
        ("leaky", "AUTH_REQUIRED", False),
        ("error_500", "TEMPORARY_UNAVAILABLE", True),
        ("echo", "INVALID_STATE", False),
    ],
)
async def test_idp_failures_become_clear_errors_without_tokens_or_secrets(
    idp, protected, caplog, mode, code, retryable
):
    """invalid_grant (the caller must sign in again), a 5xx (retry later), an IdP that hands the
    caller's own token back (refused: that would be passthrough), an IdP whose error text quotes the
    token and the secret (cut out): none of it puts a token or secret in the message or the logs, and
    the upstream never sees the caller's token."""
    alice = idp.mint("alice")
    caplog.set_level(logging.DEBUG, logger="maitre")
    stores = MemoryStores()
    async with gateway(idp, exchange_config(idp, protected), stores) as (url, _):
        idp.mode = mode
        answer = await call(url, alice)
    assert answer["error"] == code and answer["retryable"] is retryable, answer
    audited = await stores.audit.entries()
    assert audited and any(code in repr(entry) for entry in audited)
    logged = caplog.text + json.dumps(answer) + repr(audited)
    assert alice not in logged and GATEWAY_SECRET not in logged
    if mode == "leaky":
        assert "[redacted]" in answer["message"]
    assert not protected.saw(alice)


async def test_an_idp_that_does_not_answer_in_time_is_temporary(idp, protected):
    alice = idp.mint("alice")
    config = exchange_config(idp, protected)
    async with gateway(idp, config) as (url, upstream):
        exchanger(upstream).timeout_s = 0.5
        idp.mode = "slow"
        asked = idp.requests
        started = anyio.current_time()
        answer = await call(url, alice)
        assert anyio.current_time() - started < 2.5
        # The IdP (its own thread) may not have read the request yet on a loaded machine: wait until
        # it has, so it cannot read the next test's mode and record an exchange there.
        with anyio.fail_after(10):
            while idp.requests == asked:  # noqa: ASYNC110 - a counter in another thread, not an event
                await anyio.sleep(0.01)
    assert answer["error"] == "TEMPORARY_UNAVAILABLE" and answer["retryable"] is True
    assert "0.5 s" in answer["message"]


# -- no passthrough, whatever the upstream's auth mode ------------------------------------------------


@pytest.mark.parametrize("auth", ["none", "headers", "client_credentials", "token_exchange"])
async def test_the_callers_token_never_reaches_the_upstream(idp, protected, open_upstream, auth):
    """The attack: a caller with a valid token for the gateway calls a tool (putting nothing of it in
    the arguments). Whatever the upstream's mode, no header and no body the upstream received holds
    the caller's token, and the only Authorization it saw is the one obtained for it."""
    alice = idp.mint("alice")
    target = protected if auth in ("client_credentials", "token_exchange") else open_upstream
    values: dict[str, Any] = {"url": target.url, "allow_loopback": True, "tools": {"whoami": WHOAMI}}
    if auth == "headers":
        values["headers"] = {"X-Api-Key": "upstream-own-key"}
    if auth in ("client_credentials", "token_exchange"):
        values.update(auth=auth, issuer=idp.base, client_id=GATEWAY_CLIENT, client_secret=GATEWAY_SECRET)
    before = len(target.received)
    async with gateway(idp, UpstreamConfig.model_validate(values)) as (url, _):
        answer = await call(url, alice)
    received = target.received[before:]
    assert received, "the upstream was called"
    assert not target.saw(alice)
    authorizations = [v for r in received for k, v in r["headers"] if k == b"authorization"]
    if auth in ("none", "headers"):
        assert authorizations == [] and answer == {"sub": None, "authorization": None}
    elif auth == "client_credentials":
        assert answer["sub"] == GATEWAY_CLIENT  # the service's identity, not the caller's
    else:
        assert answer["sub"] == "alice" and answer["act"] == {"sub": GATEWAY_CLIENT}
    if auth == "headers":
        assert all((b"x-api-key", b"upstream-own-key") in r["headers"] for r in received)


# -- scopes from configuration: the 403 step-up and the PRM ---------------------------------------------


async def test_scopes_configured_per_tool_are_a_403_step_up_and_published_in_the_prm(idp, protected):
    """`[mcp.upstreams.up.tools.whoami] scopes = ["reports:read"]`: a token without it is 403
    insufficient_scope naming it (before anything is exchanged), the PRM lists it in
    scopes_supported, and a token with it runs the tool."""
    config = exchange_config(
        idp, protected, tools={"whoami": {**WHOAMI, "scopes": ["reports:read"]}, "echo": WHOAMI}
    )
    plain, stepped = idp.mint("alice"), idp.mint("alice", scope="reports:read")
    async with gateway(idp, config) as (url, _):
        status, _ = await raw_request(
            url,
            "tools/call",
            {"name": "up.whoami", "arguments": {}},
            name="up.whoami",
            headers={"Authorization": f"Bearer {plain}"},
        )
        async with httpx.AsyncClient() as http:
            refused = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "up.whoami"}},
                headers={"Authorization": f"Bearer {plain}", "Accept": "application/json, text/event-stream"},
            )
            prm = (await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))).json()
        assert status == 403 and refused.status_code == 403
        challenge = refused.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="reports:read"' in challenge
        assert prm["resource"] == GATEWAY_RESOURCE
        assert [a.rstrip("/") for a in prm["authorization_servers"]] == [idp.base]
        assert "reports:read" in prm["scopes_supported"]
        assert idp.exchanges == []
        assert (await call(url, stepped))["sub"] == "alice"
