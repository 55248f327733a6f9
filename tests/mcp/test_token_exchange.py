"""`maitre.mcp.token_exchange` and its configuration: the cache, one exchange in flight, the client's
authentication, discovery, the upstream refusing an exchanged token, per-tool overrides, the
`[auth] resource_url` of the PRM, and LoginRequired as AUTH_REQUIRED.

The peers are real (`oauth_peers`: an IdP and an upstream MCP server on 127.0.0.1); the caller is
injected (`TokenExchange(caller=...)`) where a test is about the exchange rather than the door.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from oauth_peers import GATEWAY_CLIENT, GATEWAY_RESOURCE, GATEWAY_SECRET, IdP, Upstream, serve_thread
from pydantic import ValidationError

from maitre import Gate, Principal, ToolCall
from maitre.config import load_settings
from maitre.config.schema import UpstreamConfig
from maitre.exceptions import UserError
from maitre.mcp.client import McpUpstream
from maitre.mcp.serve import plan_serve
from maitre.mcp.token_exchange import Caller, TokenExchange
from maitre.mcp.upstream_auth import MemoryTokenStorage, authorization_code_auth, upstream_options
from maitre.types import ToolError

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    peer = IdP()
    with serve_thread(peer.app()):
        yield peer


@pytest.fixture(scope="module")
def protected(idp: IdP) -> Iterator[Upstream]:
    peer = Upstream(idp, require_jwt=True)
    with serve_thread(peer.app()):
        yield peer


@pytest.fixture(autouse=True)
def _fresh(idp: IdP) -> None:
    idp.reset()


def exchange(idp: IdP, upstream: Upstream, **options: Any) -> TokenExchange:
    values: dict[str, Any] = {
        "upstream": "up",
        "issuer": idp.base,
        "client_id": GATEWAY_CLIENT,
        "client_secret": GATEWAY_SECRET,
        "resource": upstream.url,
    }
    return TokenExchange(**{**values, **options})


def caller(idp: IdP, user: str, **claims: Any) -> Caller:
    return Caller(tenant="acme", user=user, token=idp.mint(user, **claims))


# -- the cache -----------------------------------------------------------------------------------------


async def test_concurrent_calls_of_one_user_make_one_exchange(idp, protected):
    idp.delay = 0.3
    ex = exchange(idp, protected)
    alice = caller(idp, "alice")
    tokens: list[str] = []

    async def one() -> None:
        tokens.append(await ex.token_for(alice))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(one)
    assert len(set(tokens)) == 1 and len(idp.exchanges) == 1 and ex.exchanges == 1


async def test_the_cache_is_bounded_and_a_new_subject_token_is_exchanged_again(idp, protected):
    ex = exchange(idp, protected, max_entries=2)
    alice, bob, carol = caller(idp, "alice"), caller(idp, "bob"), caller(idp, "carol")
    for who in (alice, bob, alice, carol):  # carol pushes out bob, the least recently used
        await ex.token_for(who)
    assert [e["sub"] for e in idp.exchanges] == ["alice", "bob", "carol"]
    await ex.token_for(alice)
    await ex.token_for(bob)
    assert [e["sub"] for e in idp.exchanges][-1] == "bob" and len(idp.exchanges) == 4
    # Alice signs in again (a new token, perhaps other scopes): her cached token is not reused for it
    await ex.token_for(caller(idp, "alice"))
    assert len(idp.exchanges) == 5


async def test_a_cached_token_never_outlives_the_callers_own(idp, protected):
    """The exchanged token lives an hour, the caller's 2 s: once the caller's has expired, nothing
    cached is served for it; the IdP is asked, and refuses the expired subject token."""
    ex = exchange(idp, protected)
    short = caller(idp, "alice", ttl=2)
    await ex.token_for(short)
    await anyio.sleep(2.1)
    with pytest.raises(ToolError) as refused:
        await ex.token_for(short)
    assert refused.value.code == "AUTH_REQUIRED" and len(idp.exchanges) == 1


async def test_the_session_key_names_the_user_not_the_token(idp, protected):
    ex = exchange(idp, protected)
    a1, a2, b = caller(idp, "alice"), caller(idp, "alice"), caller(idp, "bob")
    assert ex.session_key(a1) == ex.session_key(a2) != ex.session_key(b)
    assert ex.session_key(a1) != ex.session_key(Caller(tenant="globex", user="alice", token=a1.token))
    assert a1.token not in ex.session_key(a1) and "alice" not in ex.session_key(a1)


# -- how the gateway's client authenticates; where the token endpoint is ----------------------------------


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "private_key_jwt"])
async def test_the_gateways_client_authenticates_as_configured(idp, protected, method, tmp_path):
    options: dict[str, Any] = {}
    if method == "private_key_jwt":
        key = ec.generate_private_key(ec.SECP256R1())
        idp.client_key = key.public_key()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        options = {"client_secret": None, "private_key": pem.decode()}
    else:
        options = {"auth_method": method}
    ex = exchange(idp, protected, **options)
    assert await ex.token_for(caller(idp, "alice"))
    assert idp.client_auth == [
        {"client_secret_basic": "basic", "client_secret_post": "post"}.get(method, method)
    ]


async def test_a_wrong_client_secret_is_the_operators_problem_and_is_not_shown(idp, protected, caplog):
    caplog.set_level(logging.DEBUG, logger="maitre")
    ex = exchange(idp, protected, client_secret="wrong-secret-0123456789")
    alice = caller(idp, "alice")
    with pytest.raises(ToolError) as refused:
        await ex.token_for(alice)
    assert refused.value.code == "INVALID_STATE" and "invalid_client" in refused.value.message
    shown = refused.value.message + caplog.text
    assert "wrong-secret-0123456789" not in shown and alice.token not in shown


async def test_the_token_endpoint_comes_from_the_issuers_metadata_whose_issuer_must_match(idp, protected):
    ex = exchange(idp, protected)
    await ex.token_for(caller(idp, "alice"))
    assert ex.token_endpoint == f"{idp.base}/token"
    impostor = exchange(idp, protected, issuer=idp.base + "/tenant-b")  # metadata there says another issuer
    with pytest.raises(ToolError) as refused:
        await impostor.token_for(caller(idp, "bob"))
    assert refused.value.code == "INVALID_STATE" and "another issuer" in refused.value.message
    assert [e["sub"] for e in idp.exchanges] == ["alice"]  # nothing was sent for bob


# -- the upstream's side ------------------------------------------------------------------------------


async def test_an_upstream_refusing_the_exchanged_token_is_auth_required_and_it_is_dropped(idp, protected):
    """The exchange asks for the wrong resource: the upstream answers 401. The call is AUTH_REQUIRED
    (not 'unavailable'), the token is no longer cached, and the caller's token was never sent."""
    alice = caller(idp, "alice")
    good = exchange(idp, protected)
    wrong = exchange(idp, protected, resource="https://elsewhere.test/mcp", caller=lambda: alice)
    upstream = McpUpstream(
        protected.url,
        namespace="up",
        allow_loopback=True,
        auth=good.service_auth(),
        credential_for=wrong.credential_for,
        overrides={"whoami": {"effect": "read", "risk": "low"}},
    )
    try:
        box = await upstream.toolbox()
        result = await Gate(box).call(
            ToolCall(id="c", name="up.whoami", arguments={}), Principal(user="alice", tenant="acme")
        )
        assert result.error is not None and result.error.code == "AUTH_REQUIRED", result.error
        assert "refused the token exchanged" in result.error.message
        assert wrong._cache == {}
    finally:
        await upstream.aclose()
    assert not protected.saw(alice.token)


async def test_login_required_reaches_the_model_as_auth_required_naming_the_command(protected):
    """An upstream that needs a person's sign-in, and nobody signed in: AUTH_REQUIRED, not retryable,
    telling the operator to run `maitre mcp login NAME` (it used to read as unavailable, retryable)."""
    auth = authorization_code_auth(
        protected.url, storage=MemoryTokenStorage(), sign_in="run `maitre mcp login up`"
    )
    upstream = McpUpstream(protected.url, namespace="up", allow_loopback=True, auth=auth)
    try:
        with pytest.raises(ToolError) as caught:
            await upstream.call("whoami", {})
    finally:
        await upstream.aclose()
    assert caught.value.code == "AUTH_REQUIRED" and not caught.value.retryable
    assert "maitre mcp login up" in caught.value.message


# -- configuration ------------------------------------------------------------------------------------


def test_token_exchange_configuration_is_checked_when_loaded(idp, protected):
    base = {"url": protected.url, "auth": "token_exchange", "issuer": idp.base, "client_id": GATEWAY_CLIENT}
    for bad, says in [
        ({}, "client_secret or private_key_file"),
        ({"client_secret": "s", "client_id": None}, "client_id"),
        ({"client_secret": "s", "token_endpoint": "ftp://x"}, "token_endpoint"),
        (
            {"client_secret": "s", "auth": "client_credentials", "audience": "x"},
            'only apply with auth = "token_exchange"',
        ),
        ({"client_secret": "s", "tools": {"t": {"effect": "sideways"}}}, "effect"),
        ({"client_secret": "s", "tools": {"t": {"scopes": ["has space"]}}}, "not an OAuth scope"),
        ({"client_secret": "s", "tools": {"t": {"timeout_s": 0}}}, "timeout_s"),
        ({"client_secret": "s", "tools": {"t": {"effekt": "read"}}}, "effekt"),
    ]:
        with pytest.raises(ValidationError, match=says):
            UpstreamConfig.model_validate({**base, **bad})


def test_upstream_options_carry_the_overrides_and_the_exchange(idp, protected, monkeypatch):
    monkeypatch.setenv("GW_SECRET", GATEWAY_SECRET)
    config = UpstreamConfig.model_validate(
        {
            "url": protected.url,
            "auth": "token_exchange",
            "issuer": idp.base,
            "client_id": GATEWAY_CLIENT,
            "client_secret": "$GW_SECRET",
            "audience": "reports-api",
            "scopes": ["reports"],
            "headers": {"X-Tenant": "acme"},
            "tools": {"whoami": {"effect": "read", "risk": "low", "scopes": ["r:read"], "timeout_s": 5}},
        }
    )
    options = upstream_options("up", config)
    assert options["overrides"] == {
        "whoami": {"effect": "read", "risk": "low", "scopes": frozenset({"r:read"}), "timeout": 5.0}
    }
    assert options["headers"] == {"X-Tenant": "acme"} and options["auth"] is not None
    ex = options["credential_for"].__self__
    assert isinstance(ex, TokenExchange)
    assert (ex.audience, ex.resource, ex.scopes, ex._secret) == (
        "reports-api",
        None,
        ("reports",),
        GATEWAY_SECRET,
    )
    plain = upstream_options("plain", UpstreamConfig.model_validate({"url": protected.url}))
    assert "credential_for" not in plain and plain["auth"] is None and plain["overrides"] == {}


async def test_an_override_lowers_policy_without_trust_annotations_and_an_unknown_name_is_reported(
    idp, protected, caplog
):
    """The operator's explicit per-tool policy applies to an untrusted upstream (its annotations would
    not); a name the upstream does not offer is reported, not applied to anything."""
    good = exchange(idp, protected)
    upstream = McpUpstream(
        protected.url,
        namespace="up",
        allow_loopback=True,
        auth=good.service_auth(),
        overrides={
            "whoami": {"effect": "read", "risk": "low", "requires_approval": False},
            "whoamy": {"effect": "read"},
        },
    )
    try:
        box = await upstream.toolbox()
    finally:
        await upstream.aclose()
    whoami, echo = box.get("up.whoami"), box.get("up.echo")
    assert whoami is not None and echo is not None
    assert (whoami.effect.value, whoami.risk.value, whoami.requires_approval) == ("read", "low", False)
    assert (echo.effect.value, echo.risk.value) == ("destructive", "high")  # no override: the defaults
    assert upstream.report.unknown_overrides == ["whoamy"]
    assert "whoamy" in caplog.text and "whoamy" in upstream.report.render()


def _settings(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "maitre.toml"
    path.write_text(text)
    return load_settings(path)


def test_the_resource_url_comes_from_auth_and_is_the_default_audience(tmp_path):
    auth = f'[auth]\nissuer = "https://id.test/"\njwks_url = "https://id.test/jwks"\nresource_url = "{GATEWAY_RESOURCE}"\n'
    plan = plan_serve(_settings(tmp_path, auth), target="x:y", transport="http")
    assert plan.resource_url == GATEWAY_RESOURCE and plan.audience == GATEWAY_RESOURCE
    also = plan_serve(
        _settings(tmp_path, auth + f'audience = ["{GATEWAY_RESOURCE}/", "legacy"]\n'),
        target="x:y",
        transport="http",
    )
    assert also.audience == [f"{GATEWAY_RESOURCE}/", "legacy"]


def test_an_audience_that_does_not_name_the_resource_url_is_refused(tmp_path):
    text = (
        f'[auth]\nissuer = "https://id.test/"\njwks_url = "https://id.test/jwks"\naudience = "shop"\n'
        f'resource_url = "{GATEWAY_RESOURCE}"\n'
    )
    with pytest.raises(UserError, match="RFC 8707"):
        plan_serve(_settings(tmp_path, text), target="x:y", transport="http")
    differ = '[serve]\nresource_url = "https://a.test/mcp"\n[auth]\nresource_url = "https://b.test/mcp"\n'
    with pytest.raises(UserError, match="differ"):
        plan_serve(_settings(tmp_path, differ), target="x:y", transport="http")


async def test_a_longer_timeout_override_is_how_long_the_upstream_call_waits(idp, protected):
    """`timeout_s = 3` on a tool of an upstream whose requests wait 1 s: a 1.5 s call completes
    through the gate (the gate's own deadline and the upstream request's both follow it); the tool
    without the override still times out at 1 s."""
    good = exchange(idp, protected)
    upstream = McpUpstream(
        protected.url,
        namespace="up",
        allow_loopback=True,
        auth=good.service_auth(),
        timeout_s=1.0,
        overrides={
            "slow": {"effect": "read", "risk": "low", "timeout": 3.0},
            "echo": {"effect": "read", "risk": "low"},
        },
    )
    try:
        box = await upstream.toolbox()
        slow = box.get("up.slow")
        assert slow is not None and slow.timeout == 3.0
        gate = Gate(box)
        principal = Principal(user="alice", tenant="acme")
        done = await gate.call(ToolCall(id="a", name="up.slow", arguments={"delay": 1.5}), principal)
        assert done.error is None, done.error
        del upstream.overrides["slow"]  # the same call without the override: the upstream's 1 s
        with pytest.raises(ToolError) as late:
            await upstream.call("slow", {"delay": 1.5})
        assert late.value.code == "TIMEOUT"
    finally:
        await upstream.aclose()


async def test_an_upstream_refusing_the_gateways_own_token_says_so_after_one_renewal(idp, protected):
    """The upstream's own session (the listing) carries a client-credentials token; refused, it is
    renewed once, then the failure names the gateway's own credential (not 'unavailable')."""
    from maitre.cli.errors import leaf_exception
    from maitre.mcp.token_exchange import UpstreamTokenRefused

    wrong = exchange(idp, protected, resource="https://elsewhere.test/mcp")
    upstream = McpUpstream(protected.url, namespace="up", allow_loopback=True, auth=wrong.service_auth())
    try:
        with pytest.raises(BaseException) as caught:
            await upstream.definitions()
    finally:
        await upstream.aclose()
    leaf = leaf_exception(caught.value)
    assert isinstance(leaf, UpstreamTokenRefused) and "gateway's own token" in str(leaf)
    assert wrong.exchanges == 2 and idp.exchanges == []  # one token and one renewal, no exchange
