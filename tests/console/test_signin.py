"""Signing in: the password is checked against its argon2 hash, failures are throttled, forms need CSRF."""

from __future__ import annotations

import pytest

from maitre.console.accounts import hash_password, verify_password
from maitre.console.app import SESSION_COOKIE

from .conftest import PASSWORD, csrf_of, sign_in

pytestmark = pytest.mark.anyio


async def test_the_right_password_signs_in_and_sets_a_strict_httponly_cookie(client_for):
    async with client_for() as client:
        response = await sign_in(client, "bob")
        assert response.status_code == 303 and response.headers["location"] == "/"
        cookie = next(
            v for k, v in response.headers.multi_items() if k == "set-cookie" and SESSION_COOKIE + "=" in v
        )
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert "Secure" not in cookie  # plain http (a local console)
        inbox = await client.get("/")
        assert inbox.status_code == 200 and "bob" in inbox.text and "Pending approvals" in inbox.text


async def test_over_https_the_session_cookie_is_secure(client_for):
    async with client_for("https://testserver") as client:
        response = await sign_in(client, "bob")
        cookie = next(
            v for k, v in response.headers.multi_items() if k == "set-cookie" and SESSION_COOKIE + "=" in v
        )
        assert "Secure" in cookie


async def test_a_wrong_password_or_unknown_account_is_refused_alike(client_for):
    async with client_for() as client:
        wrong = await sign_in(client, "bob", "not it")
        unknown = await sign_in(client, "nobody", PASSWORD)
        for response in (wrong, unknown):
            assert response.status_code == 401 and "Wrong account or password" in response.text
            assert SESSION_COOKIE not in response.cookies
        assert (await client.get("/")).status_code == 303  # still signed out


async def test_failed_sign_ins_are_throttled_per_account_and_client(client_for, throttle):
    async with client_for() as client:
        for _ in range(throttle.limit):
            assert (await sign_in(client, "bob", "guess")).status_code == 401
        blocked = await sign_in(client, "bob", PASSWORD)  # even the right password, until the window passes
        assert blocked.status_code == 429 and SESSION_COOKIE not in blocked.cookies
        assert (await sign_in(client, "alice")).status_code == 303  # another account is not blocked


async def test_sign_in_without_the_form_token_is_refused(client_for):
    async with client_for() as client:
        await client.get("/sign-in")
        response = await client.post("/sign-in", data={"name": "bob", "password": PASSWORD})
        assert response.status_code == 403 and SESSION_COOKIE not in response.cookies


async def test_sign_out_needs_the_session_token_and_ends_the_session(client_for):
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get("/")
        assert (await client.post("/sign-out", data={})).status_code == 403
        assert (await client.get("/")).status_code == 200
        out = await client.post("/sign-out", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303
        assert (await client.get("/")).status_code == 303


async def test_a_forged_session_cookie_is_not_a_session(client_for):
    async with client_for() as client:
        client.cookies.set(SESSION_COOKIE, "eyJhIjoiYm9iIiwiYyI6IngifQ.forged.sig")
        assert (await client.get("/")).status_code == 303


def test_passwords_are_stored_as_argon2_hashes():
    hashed = hash_password("s3cret")
    assert hashed.startswith("$argon2id$") and "s3cret" not in hashed
    assert verify_password(hashed, "s3cret") and not verify_password(hashed, "s3cret ")
    assert not verify_password("not a hash", "s3cret")


def test_the_throttle_forgets_after_its_window_and_stays_bounded():
    from maitre.console.security import SignInThrottle

    throttle = SignInThrottle(limit=2, window_s=10, max_keys=3)
    throttle.failed("Bob", "1.2.3.4", now=0)
    throttle.failed("bob", "1.2.3.4", now=1)
    assert throttle.blocked("BOB", "1.2.3.4", now=2)  # names compare case-folded
    assert not throttle.blocked("bob", "5.6.7.8", now=2)
    assert not throttle.blocked("bob", "1.2.3.4", now=11.5)  # the window passed
    for n in range(10):
        throttle.failed(f"sprayed-{n}", "9.9.9.9", now=20)
    assert len(throttle._failures) <= 3


async def test_two_consoles_over_one_database_share_the_sign_in_count(tmp_path, stores, accounts, shop):
    """Replicas: another `Stores` over the same SQLite file, each console with its own throttle object."""
    import httpx

    from maitre.console.app import create_app
    from maitre.console.security import StoreSignInThrottle
    from maitre.stores import open_stores

    from .conftest import SECRET

    def client(over) -> httpx.AsyncClient:
        app = create_app(
            over, secret=SECRET, toolbox=shop.box, throttle=StoreSignInThrottle(over.rate_limits, limit=3)
        )
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")

    replica = await open_stores(str(tmp_path / "console.db"))
    try:
        async with client(stores) as one, client(replica) as two:
            assert (await sign_in(one, "bob", "guess")).status_code == 401
            assert (await sign_in(two, "bob", "guess")).status_code == 401
            assert (await sign_in(one, "bob", "guess")).status_code == 401
            assert (await sign_in(two, "bob")).status_code == 429  # the other replica counted the first two
            assert (await sign_in(one, "bob")).status_code == 429
            assert (await sign_in(two, "alice")).status_code == 303  # per account
    finally:
        await replica.close()
    key = StoreSignInThrottle.key("Bob", "127.0.0.1")
    assert key == StoreSignInThrottle.key("bob", "127.0.0.1") and "bob" not in key.lower().split("/")[-1]


async def test_deleting_a_local_account_ends_its_session(client_for, stores):
    async with client_for() as client:
        await sign_in(client, "bob")
        assert (await client.get("/")).status_code == 200
        await stores.db.execute("DELETE FROM {s}.maitre_console_accounts WHERE name = ?", ("bob",))
        assert (await client.get("/")).status_code == 303
