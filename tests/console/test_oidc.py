"""OIDC sign-in against a real provider over HTTP on 127.0.0.1 (tests/console/idp.py): the
authorization code flow with PKCE, `state` and `nonce`; every spoiled answer ends on the sign-in
page with a clear message, never in a session and never in a 500."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from maitre import Gate, Principal, ToolCall
from maitre.console.app import SESSION_COOKIE, create_app
from maitre.console.oidc import FLOW_COOKIE, OIDCError, OIDCSettings, discover
from maitre.console.security import SessionSigner
from maitre.mcp.auth import JWTVerifier, principal_from_claims

from .conftest import SECRET, csrf_of, pending_refund, sign_in
from .idp import LocalIdP, running_idp

pytestmark = pytest.mark.anyio

CALLBACKS = ["http://testserver/sign-in/oidc/callback", "https://testserver/sign-in/oidc/callback"]


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalIdP]:
    with running_idp(redirect_uris=CALLBACKS) as running:
        yield running


@pytest.fixture
def idp(provider: LocalIdP) -> LocalIdP:
    provider.reset()
    return provider


@pytest.fixture
def console_with(stores: Any, accounts: Any, shop: Any, throttle: Any, idp: LocalIdP) -> Any:
    def make(base_url: str = "http://testserver", **options: Any) -> httpx.AsyncClient:
        settings = OIDCSettings(
            issuer=idp.issuer,
            client_id="maitre-console",
            **{k: options.pop(k) for k in list(options) if k in OIDCSettings.__dataclass_fields__},
        )
        app = create_app(
            stores,
            secret=SECRET,
            accounts=accounts,
            toolbox=shop.box,
            throttle=throttle,
            oidc=settings,
            **options,
        )
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)

    return make


def cookie_header(response: httpx.Response, name: str) -> str:
    return next(
        v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith(name + "=")
    )


async def to_idp(client: httpx.AsyncClient) -> httpx.URL:
    """Start the sign-in and follow it to the provider; return where the provider sends the browser."""
    start = await client.get("/sign-in/oidc")
    assert start.status_code == 303, start.text
    async with httpx.AsyncClient() as browser:
        answer = await browser.get(start.headers["location"])
    assert answer.status_code == 302, answer.text
    return httpx.URL(answer.headers["location"])


async def oidc_sign_in(client: httpx.AsyncClient) -> httpx.Response:
    return await client.get(str(await to_idp(client)))


def refused(response: httpx.Response, status: int, says: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    assert says in html.unescape(response.text) and "Sign in" in response.text
    assert SESSION_COOKIE not in response.cookies


async def test_the_code_and_pkce_round_trip_signs_in_and_the_inbox_shows_only_that_tenant(
    console_with: Any, idp: LocalIdP, gate: Gate
) -> None:
    ours = await pending_refund(gate)
    theirs = await gate.call(
        ToolCall(id="e1", name="issue_refund", arguments={"order_id": "EVIL-1", "amount": "1.00"}),
        Principal(user="mallory", tenant="evil"),
    )
    assert theirs.error is not None
    idp.sign_in_as("dana", tenant="acme", roles=["approver"])
    async with console_with() as client:
        start = await client.get("/sign-in/oidc")
        asked = httpx.URL(start.headers["location"]).params
        assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) >= 43
        assert asked["state"] and asked["nonce"] and asked["redirect_uri"] == CALLBACKS[0]
        flow = cookie_header(start, FLOW_COOKIE)
        assert "HttpOnly" in flow and "samesite=lax" in flow.lower() and "Path=/sign-in/oidc" in flow
        assert asked["state"] not in flow  # signed and opaque, not the values in the clear
        async with httpx.AsyncClient() as browser:
            back = (await browser.get(str(start.url.join(start.headers["location"])))).headers["location"]
        done = await client.get(back)
        assert done.status_code == 200 and "Signed in as dana" in done.text
        assert 'http-equiv="refresh"' in done.text  # the page moves on itself (see OIDC callback)
        session = cookie_header(done, SESSION_COOKIE)
        assert "HttpOnly" in session and "samesite=strict" in session.lower() and "Secure" not in session
        inbox = await client.get("/")
        assert inbox.status_code == 200 and "dana" in inbox.text and "tenant acme" in inbox.text
        assert ours.approval_id in inbox.text
        assert theirs.error.details["approval_id"] not in inbox.text
    (exchange,) = idp.token_requests
    assert exchange["code_verifier"] and exchange["client_id"] == "maitre-console"
    assert "client_secret" not in exchange  # a public client: PKCE is what binds the code to us


async def test_an_oidc_approver_decides_as_their_name_via_console(
    console_with: Any, idp: LocalIdP, gate: Gate
):
    pending = await pending_refund(gate)
    idp.sign_in_as("dana", tenant="acme", roles="approver auditor")  # a space-separated string works too
    async with console_with() as client:
        await oidc_sign_in(client)
        page = await client.get(f"/approvals/{pending.approval_id}")
        response = await client.post(
            f"/approvals/{pending.approval_id}/approve", data={"csrf": csrf_of(page.text), "message": "ok"}
        )
        assert response.status_code == 200 and "Approved" in response.text
    decided = await gate.approvals.get(pending.approval_id)
    assert decided is not None and decided.approver == "dana (via=console)"


async def test_an_oidc_person_without_the_approver_role_cannot_decide(
    console_with: Any, idp: LocalIdP, gate: Gate
):
    pending = await pending_refund(gate)
    idp.sign_in_as("carl", tenant="acme", roles=["viewer"])
    async with console_with() as client:
        await oidc_sign_in(client)
        page = await client.get(f"/approvals/{pending.approval_id}")
        assert page.status_code == 200  # carl may look
        response = await client.post(
            f"/approvals/{pending.approval_id}/approve", data={"csrf": csrf_of(page.text), "message": "ok"}
        )
        assert response.status_code == 403
    still = await gate.approvals.get(pending.approval_id)
    assert still is not None and still.status == "pending"


async def test_the_requester_cannot_approve_their_own_call_after_signing_in_with_oidc(
    console_with: Any, idp: LocalIdP, gate: Gate
):
    pending = await pending_refund(gate, user="alice")
    idp.sign_in_as("ALICE", tenant="acme", roles=["approver"])  # the same person, differently cased
    async with console_with() as client:
        await oidc_sign_in(client)
        page = await client.get(f"/approvals/{pending.approval_id}")
        response = await client.post(
            f"/approvals/{pending.approval_id}/approve", data={"csrf": csrf_of(page.text), "message": "mine"}
        )
        assert response.status_code == 403
    still = await gate.approvals.get(pending.approval_id)
    assert still is not None and still.status == "pending"


async def test_over_https_both_cookies_are_secure(console_with: Any, idp: LocalIdP):
    async with console_with("https://testserver") as client:
        start = await client.get("/sign-in/oidc")
        assert "Secure" in cookie_header(start, FLOW_COOKIE)
        assert httpx.URL(start.headers["location"]).params["redirect_uri"] == CALLBACKS[1]
        async with httpx.AsyncClient() as browser:
            back = (await browser.get(start.headers["location"])).headers["location"]
        done = await client.get(back)
        assert done.status_code == 200 and "Secure" in cookie_header(done, SESSION_COOKIE)


async def test_a_callback_with_another_state_is_refused(console_with: Any):
    async with console_with() as client:
        back = await to_idp(client)
        forged = back.copy_set_param("state", "not-the-state-this-browser-got")
        refused(await client.get(str(forged)), 400, "the state does not match")


async def test_a_callback_this_browser_never_started_is_refused(console_with: Any):
    async with console_with() as client:
        back = await to_idp(client)
    async with console_with() as other:  # an attacker's code pushed into a victim's browser
        refused(await other.get(str(back)), 400, "not started in this browser")


async def test_a_replayed_code_is_refused_by_the_provider_and_the_page_says_so(console_with: Any):
    async with console_with() as client:
        back = await to_idp(client)
        flow = client.cookies.get(FLOW_COOKIE, path="/sign-in/oidc")
        assert (await client.get(str(back))).status_code == 200
        client.cookies.set(FLOW_COOKIE, flow, path="/sign-in/oidc")  # the same flow, once more
        client.cookies.delete(SESSION_COOKIE)
        refused(await client.get(str(back)), 401, "refused the authorization code (invalid_grant)")


async def test_an_error_from_the_provider_is_said_on_the_sign_in_page(console_with: Any):
    async with console_with() as client:
        back = await to_idp(client)
        denied = back.copy_with(params={"state": back.params["state"], "error": "access_denied"})
        refused(await client.get(str(denied)), 401, "did not sign you in (access_denied)")
        injected = back.copy_with(params={"error": "<script>alert(1)</script>"})
        page = await client.get(str(injected))
        assert page.status_code == 401 and "<script>alert(1)" not in page.text  # escaped, as text


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        ({"aud": "another-client"}, "issued for another client"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "it has expired"),
        ({"foreign_key": True}, "its signature does not verify"),
        ({"nonce": "a-nonce-of-another-sign-in"}, "it answers another sign-in (nonce)"),
        ({"drop": ("nonce",)}, "it answers another sign-in (nonce)"),
        ({"iss": "http://127.0.0.1:1/elsewhere"}, "another issuer issued it"),
        ({"drop": ("tenant",)}, "no 'tenant' claim"),
    ],
)
async def test_a_spoiled_id_token_is_refused_with_a_clear_page(
    console_with: Any, idp: LocalIdP, spoil: dict[str, Any], says: str
):
    idp.tamper(**spoil)
    async with console_with() as client:
        refused(await oidc_sign_in(client), 401, says)
        assert (await client.get("/")).status_code == 303  # still signed out


async def test_a_token_from_the_provider_without_a_tenant_cannot_sign_in(console_with: Any, idp: LocalIdP):
    idp.sign_in_as("dana", tenant=None)
    async with console_with() as client:
        refused(await oidc_sign_in(client), 401, "no 'tenant' claim")


@pytest.mark.parametrize(
    "claims",
    [{"sub": "da\x00na"}, {"sub": "dana", "tenant": "ac\x00me"}, {"sub": "dana", "roles": ["appr\x00ver"]}],
)
async def test_a_token_naming_the_person_with_a_nul_byte_cannot_sign_in(
    console_with: Any, idp: LocalIdP, claims: dict[str, Any]
):
    """Each decision records the approver's name, and no store holds a NUL: refused at sign-in."""
    idp.sign_in_as(**{"tenant": "acme", **claims})
    async with console_with() as client:
        refused(await oidc_sign_in(client), 401, "NUL byte")


async def test_there_is_no_way_to_sign_in_by_pasting_a_token(console_with: Any, idp: LocalIdP):
    """A valid ID token, minted by the provider for this client, is worth nothing handed over directly."""
    async with console_with() as client:
        back = await to_idp(client)
        grant = idp.codes[back.params["code"]]
        token = idp.id_token(grant)
        assert jwt.decode(token, options={"verify_signature": False})["aud"] == "maitre-console"
        page = await client.get("/sign-in")
        assert "token" not in page.text.lower().replace("csrf", "")
        for path in ("/sign-in/token", "/sign-in/oidc/token"):
            assert (await client.post(path, data={"id_token": token})).status_code in (404, 405)
        form = await client.post("/sign-in", data={"csrf": csrf_of(page.text), "id_token": token})
        assert form.status_code == 401 and SESSION_COOKIE not in form.cookies
        pasted = back.copy_with(params={"state": back.params["state"], "id_token": token})
        refused(await client.get(str(pasted)), 400, "has no authorization code")
        assert (await client.get("/")).status_code == 303


async def test_the_name_claim_is_configurable_and_falls_back_to_sub(
    console_with: Any, idp: LocalIdP, gate: Gate
):
    idp.sign_in_as("u-7f3a", tenant="acme", preferred_username="dana")
    async with console_with(name_claim="preferred_username") as client:
        assert "Signed in as dana" in (await oidc_sign_in(client)).text
    idp.sign_in_as("u-9b1c", tenant="acme")
    async with console_with(name_claim="preferred_username") as client:
        assert "Signed in as u-9b1c" in (await oidc_sign_in(client)).text


async def test_a_confidential_client_sends_its_secret_and_a_wrong_one_is_refused(
    stores: Any, accounts: Any, shop: Any, throttle: Any
):
    with running_idp(redirect_uris=CALLBACKS, client_secret="a-confidential-secret") as idp:
        for secret, status in [("a-confidential-secret", 200), ("a-wrong-secret", 401)]:
            settings = OIDCSettings(issuer=idp.issuer, client_id="maitre-console", client_secret=secret)
            app = create_app(stores, secret=SECRET, accounts=accounts, throttle=throttle, oidc=settings)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                assert (await oidc_sign_in(client)).status_code == status
        assert "client_secret" not in idp.token_requests[0]  # sent with HTTP Basic, not in the form
        assert "a-wrong-secret" not in repr(settings)


async def test_with_local_accounts_off_only_oidc_signs_in(console_with: Any, idp: LocalIdP):
    async with console_with(local_accounts=False) as client:
        page = await client.get("/sign-in")
        assert f"Sign in with 127.0.0.1:{idp.issuer.rsplit(':', 1)[1]}" in page.text
        assert 'name="password"' not in page.text
        response = await client.post("/sign-in", data={"name": "bob", "password": "x"})
        assert response.status_code == 403 and SESSION_COOKIE not in response.cookies
        _, local = SessionSigner(SECRET).new_session("bob")  # a session from when local accounts were on
        client.cookies.set(SESSION_COOKIE, local)
        assert (await client.get("/")).status_code == 303
        assert (await oidc_sign_in(client)).status_code == 200
        assert (await client.get("/")).status_code == 200


async def test_with_both_the_page_offers_both_and_local_sign_in_still_works(console_with: Any):
    async with console_with() as client:
        page = await client.get("/sign-in")
        assert "Sign in with 127.0.0.1:" in page.text and 'name="password"' in page.text
        assert (await sign_in(client, "bob")).status_code == 303


def test_a_session_of_an_issuer_no_longer_configured_is_no_session():
    signer = SessionSigner(SECRET, issuers=["https://id.example.com"])
    _, cookie = signer.new_session(
        "dana", source="oidc", tenant="acme", roles=["approver"], issuer="https://id.example.com"
    )
    session = signer.read_session(cookie)
    assert session is not None and session.tenant == "acme" and session.roles == frozenset({"approver"})
    assert SessionSigner(SECRET, issuers=["https://other.example.com"]).read_session(cookie) is None
    assert SessionSigner(SECRET).read_session(cookie) is None


async def test_discovery_refuses_an_unreachable_issuer_or_a_document_for_another(idp: LocalIdP):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(OIDCError, match="cannot reach the issuer"):
        await discover(OIDCSettings(issuer=closed, client_id="c"))
    with pytest.raises(OIDCError, match="names issuer"):
        await discover(OIDCSettings(issuer=idp.issuer + "/", client_id="c"))
    with pytest.raises(OIDCError, match="https://"):
        await discover(OIDCSettings(issuer="http://id.example.com", client_id="c"))
    found = await discover(OIDCSettings(issuer=idp.issuer, client_id="c"))
    assert found.token_endpoint == f"{idp.issuer}/token" and found.jwks_uri == f"{idp.issuer}/jwks"


async def test_an_unreachable_issuer_at_sign_in_is_a_503_page_not_a_500(stores: Any, accounts: Any):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = create_app(
        stores, secret=SECRET, accounts=accounts, oidc=OIDCSettings(issuer=closed, client_id="c")
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver"
    ) as client:
        refused(await client.get("/sign-in/oidc"), 503, "cannot be reached")


async def test_the_console_and_the_mcp_door_map_one_token_to_one_identity(idp: LocalIdP):
    """The same claims name the same person, tenant and roles at both doors (self-approval compares them)."""
    grant_claims = {"sub": "dana", "tenant": "acme", "roles": "approver auditor"}
    console_side = principal_from_claims(grant_claims, user_claims=("sub", "sub"))
    token = jwt.encode(
        {**grant_claims, "iss": idp.issuer, "aud": "tools", "exp": int(time.time()) + 60},
        idp._key,
        algorithm="RS256",
        headers={"kid": idp.kid},
    )
    from maitre.mcp.auth import JWKSKeys

    mcp_side = await JWTVerifier(
        key=JWKSKeys(url=f"{idp.issuer}/jwks"), issuer=idp.issuer, audience="tools"
    ).verify(token)
    assert mcp_side == console_side
    assert console_side.roles == frozenset({"approver", "auditor"})
