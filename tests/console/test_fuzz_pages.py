"""Every console route, with hypothesis choosing its path ids, query values and form fields: text of
any script, NUL bytes, numbers huge, negative or in other scripts' digits ('²', '١'), long values,
dates out of range. A page may refuse (4xx); it never fails (5xx, or an exception out of the app),
on SQLite or on Postgres (whose text columns cannot hold a NUL)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maitre import Gate, Principal
from maitre.agent import Agent, Limits
from maitre.audit import AuditEntry
from maitre.console.accounts import Account, account_store, hash_password
from maitre.console.app import create_app
from maitre.console.security import SignInThrottle
from maitre.stores import Stores, open_stores

from .conftest import PASSWORD, SECRET, csrf_of, pending_refund, sign_in
from .test_runs_pages import add_lookup, refund_model

PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

ODD = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\x00\x00\x00",
    "²",
    "١٢٣",
    "-5",
    "0",
    "1" + "0" * 30,
    "9" * 19,
    "9999-12-31",
    "0001-01-01T00:00+05:00",
    "2026-02-30",
    "9999-12-31T23:59:59.999999-23:59",
    "..",
    "a/b",
    "%2F",
    "?#&=",
    "<script>",
    "x" * 5000,
    "²:" + "a" * 64,
    "1:" + "a" * 64,
    "\ufeff\u202e",
    "approval_required",
]
VALUES = st.one_of(
    st.sampled_from(ODD),  # half of the values are the known troublemakers
    st.sampled_from(ODD),
    st.sampled_from(ODD),
    st.text(max_size=30),
    st.integers(-(10**30), 10**30).map(str),
    st.text(alphabet="0123456789²³١٢߀:-.Tabcdef", max_size=30),
)

AUDIT_KEYS = ("run", "tool", "decision", "user", "from", "to", "anchor", "before")
EDIT_KEYS = ("!action", "!mode", "!json", "note", "order_id", "amount", "!json:$.note", "add:items")


@dataclass
class World:
    """One console, one signed-in approver and the ids that lead the pages past their not-found answers."""

    stores: Stores
    client: httpx.AsyncClient
    csrf: str
    approval_ids: list[str]
    run_id: str
    schema: str | None = None

    async def send(self, method: str, path: str, params: dict[str, str], data: dict[str, str]) -> int:
        if method == "GET":
            response = await self.client.get(path, params=params)
        elif path == "/sign-in":  # someone signing in afresh, with that page's form token
            async with httpx.AsyncClient(
                transport=self.client._transport, base_url=self.client.base_url
            ) as other:
                form = await other.get("/sign-in")
                response = await other.post(path, data={"csrf": csrf_of(form.text), **data})
        else:
            response = await self.client.post(path, params=params, data={"csrf": self.csrf, **data})
        return response.status_code

    async def close(self) -> None:
        await self.client.aclose()
        await self.stores.close()
        if self.schema is not None:
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


async def open_world(backend: str, tmp_path: Any, shop: Any) -> World:
    schema = None
    if backend == "sqlite":
        stores = await open_stores(str(tmp_path / "fuzz.db"))
    else:
        schema = f"maitre_console_{uuid.uuid4().hex[:10]}"
        stores = await open_stores(f"{PG_DSN}?schema={schema}")
    people = account_store(stores)
    await people.put(
        Account(
            name="bob", tenant="acme", roles=frozenset({"approver"}), password_hash=hash_password(PASSWORD)
        )
    )
    add_lookup(shop)
    gate = Gate(shop.box, stores=stores)
    approval_ids = [(await pending_refund(gate)).approval_id for _ in range(5)]
    run = await Agent(refund_model(), shop.box, stores=stores, limits=Limits(max_steps=6)).run(
        "Please refund ORD-1", Principal(user="alice", tenant="acme")
    )
    await stores.audit.append(AuditEntry(at=0.0, user="dave", tenant="acme", tool="t", decision="allow"))
    app = create_app(
        stores, secret=SECRET, accounts=people, toolbox=shop.box, throttle=SignInThrottle(limit=10**6)
    )
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")
    await sign_in(client, "bob")
    csrf = csrf_of((await client.get("/")).text)
    return World(stores, client, csrf, approval_ids, run.id, schema)


ROUTES = 11


@st.composite
def requests(draw: Any, world: World, route: int) -> tuple[str, str, dict[str, str], dict[str, str]]:
    """(method, path, query, form) for the console's route number `route`."""

    def one_of(real: list[str]) -> str:  # mostly a real id, so the page gets past "not found"
        return draw(st.sampled_from(real)) if draw(st.integers(0, 3)) else draw(VALUES)

    def fields(keys: tuple[str, ...]) -> dict[str, str]:
        return draw(st.dictionaries(st.sampled_from(keys), VALUES, max_size=len(keys)))

    run_id = one_of([world.run_id])
    # Deciding uses up its requests; the edit pages keep theirs (a random hash never confirms).
    segment = quote(one_of(world.approval_ids[:3] if route == 7 else world.approval_ids[3:]), safe="") or "x"
    if route == 0:
        return "GET", "/", fields(("x",)), {}
    if route == 1:
        return "GET", "/runs", fields(("status",)), {}
    if route == 2:
        return "GET", f"/runs/{quote(run_id, safe='')}", {}, {}
    if route == 3:
        return "GET", "/run", {"id": run_id}, {}
    if route == 4:
        return "GET", "/audit", fields(AUDIT_KEYS), {}
    if route == 5:
        return "GET", f"/approvals/{segment}", {}, {}
    if route == 6:
        return "GET", f"/approvals/{segment}/edit", fields(("as",)), {}
    if route == 7:
        verb = draw(st.sampled_from(["approve", "deny"]))
        return "POST", f"/approvals/{segment}/{verb}", {}, fields(("message", "x"))
    if route == 8:
        return "POST", f"/approvals/{segment}/edit", {}, fields(EDIT_KEYS)
    if route == 9:
        return "POST", f"/approvals/{segment}/edit/confirm", {}, fields(("edited", "hash", "note"))
    return "POST", "/sign-in", {}, fields(("name", "password"))


def _fuzz(portal: BlockingPortal, world: World, route: int, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(request=requests(world, route))
    def check(request: tuple[str, str, dict[str, str], dict[str, str]]) -> None:
        status = portal.call(world.send, *request)
        assert status < 500, request

    check()


@pytest.mark.parametrize(
    ("backend", "examples"), [("sqlite", 30), pytest.param("postgres", 15, marks=pytest.mark.postgres)]
)
def test_no_path_id_query_value_or_form_field_makes_a_page_fail(backend, examples, tmp_path, shop):
    if backend == "postgres":
        from .test_hostile_input import _postgres_error

        why = _postgres_error()
        if why:
            pytest.skip(why)
    with start_blocking_portal() as portal:  # one event loop for the stores, the app and every example
        world = portal.call(open_world, backend, tmp_path, shop)
        try:
            for route in range(ROUTES):  # each route gets its own share of examples
                # (a sign-in costs an argon2 verification, about 0.1 s: fewer of those)
                _fuzz(portal, world, route, examples if route < ROUTES - 1 else examples // 8)
        finally:
            portal.call(world.close)
