"""Ids, names and query values an attacker chooses: run ids with '/', '?', '#' or dots (a host's
`Agent.run(run_id=...)`, an MCP client's `_meta` run id), NUL bytes in paths and forms (Postgres text
cannot hold them), dates and entry numbers out of range. Each page answers 4xx or the right page,
never a 500, on SQLite and on Postgres."""

from __future__ import annotations

import html
import os
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from maitre import Principal
from maitre.agent import Agent
from maitre.audit import AuditEntry
from maitre.models import Rule, ScriptedModel
from maitre.stores import Stores, open_stores

from .conftest import csrf_of, pending_refund, sign_in

pytestmark = pytest.mark.anyio

PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")

ODD_RUN_IDS = ["a/b", "a?b=1", "a#frag", "%2F", "a b", "..", ".", "x/../y", "a\\b", "ü/ß", "trail/", "&amp;"]


def _postgres_error() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable: {exc}"
    return None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(request: Any, tmp_path: Any) -> AsyncIterator[Stores]:
    """This module's stores: the conftest's SQLite file, and a fresh schema on the Postgres server."""
    if request.param == "sqlite":
        async with await open_stores(str(tmp_path / "console.db")) as opened:
            yield opened
        return
    why = _postgres_error()
    if why:
        pytest.skip(why)
    import psycopg

    schema = f"maitre_console_{uuid.uuid4().hex[:10]}"
    try:
        async with await open_stores(f"{PG_DSN}?schema={schema}") as opened:
            yield opened
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def hello_agent(shop: Any, stores: Stores) -> Agent:
    return Agent(
        ScriptedModel([Rule("hello", when=lambda r: True, then=lambda r: "hello")]), shop.box, stores=stores
    )


def link_to(page: str, text: str) -> str:
    """The href of the link whose text is `text` (as the page escapes it)."""
    found = re.search(r'<a href="([^"]*)">' + re.escape(html.escape(text)) + "</a>", page)
    assert found, f"no link to {text!r}"
    return html.unescape(found.group(1))


async def test_runs_with_any_id_are_listed_and_each_link_opens_that_run(client_for, shop, stores):
    agent = hello_agent(shop, stores)
    for run_id in ODD_RUN_IDS:
        await agent.run("hi", Principal(user="dave", tenant="acme"), run_id=run_id)
    async with client_for() as client:
        await sign_in(client, "bob")
        listing = await client.get("/runs")
        assert listing.status_code == 200, listing.text
        for run_id in ODD_RUN_IDS:
            href = link_to(listing.text, run_id)
            assert href.startswith("/run")
            page = await client.get(href)
            assert page.status_code == 200, (run_id, href)
            assert f"<h1>Run {html.escape(run_id)}</h1>" in page.text, (run_id, href)


async def test_audit_rows_link_to_their_run_and_a_request_id_no_route_can_hold_is_text(client_for, stores):
    for run_id in ODD_RUN_IDS:
        await stores.audit.append(
            AuditEntry(
                at=time.time(), user="dave", tenant="acme", tool="lookup", decision="allow", run_id=run_id
            )
        )
    for approval_id in ("apr_x/edit", "apr_a?b#c"):  # what a client sent back as its approval id
        await stores.audit.append(
            AuditEntry(
                at=time.time(), user="dave", tenant="acme", tool="t", decision="approval_invalid",
                approval_id=approval_id,
            )
        )  # fmt: skip
    async with client_for() as client:
        await sign_in(client, "bob")
        audit = await client.get("/audit")
        assert audit.status_code == 200, audit.text
        for run_id in ODD_RUN_IDS:
            page = await client.get(link_to(audit.text, run_id))
            assert page.status_code == 404  # the entries name runs no one saved: the page says so
            assert "No such run." in page.text
        assert "apr_x/edit" in audit.text and "/approvals/apr_x" not in audit.text
        assert 'href="/approvals/apr_a%3Fb%23c"' in audit.text
        assert (await client.get("/approvals/apr_a%3Fb%23c")).status_code == 404


async def test_nul_bytes_in_ids_names_and_forms_are_refused_before_any_store(client_for, gate, stores):
    pending = await pending_refund(gate)
    async with client_for() as client:
        signin = await client.get("/sign-in")
        refused = await client.post(
            "/sign-in", data={"csrf": csrf_of(signin.text), "name": "bo\x00b", "password": "x"}
        )
        assert refused.status_code == 400 and "NUL" in refused.text
        await sign_in(client, "bob")
        csrf = csrf_of((await client.get("/")).text)
        for path in ("/runs/a%00b", "/approvals/a%00b", "/approvals/a%00b/edit"):
            assert (await client.get(path)).status_code == 404, path
        for path in ("/approvals/a%00b/approve", "/approvals/a%00b/deny", "/approvals/a%00b/edit/confirm"):
            assert (await client.post(path, data={"csrf": csrf})).status_code == 404, path
        for path in ("/run?id=a%00b", "/audit?run=a%00b", "/audit?user=%00", "/runs?status=%00"):
            assert (await client.get(path)).status_code == 400, path
        said = await client.post(
            f"/approvals/{pending.approval_id}/approve", data={"csrf": csrf, "message": "fine\x00"}
        )
        assert said.status_code == 400 and "NUL" in said.text
        edited = await client.post(
            f"/approvals/{pending.approval_id}/edit",
            data={"csrf": csrf, "!mode": "json", "!json": '{"order_id": "O\\ud800", "amount": "1.00"}'},
        )
        assert edited.status_code == 422 and "lone surrogate" in edited.text
    request = await gate.approvals.get(pending.approval_id)
    assert request is not None and request.status == "pending"


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"before": "²"}, "'before' must be an entry number"),
        ({"before": "١٢"}, "'before' must be an entry number"),
        ({"before": "1" + "0" * 30}, "'before' must be an entry number"),
        ({"before": "-5"}, "'before' must be an entry number"),
        ({"anchor": "²:" + "a" * 64}, "The anchor must be SEQ:HASH"),
        ({"anchor": "1" + "0" * 30 + ":" + "a" * 64}, "The anchor must be SEQ:HASH"),
        ({"from": "2026-02-30"}, "is not a date or time"),
        ({"to": "２０２６-01-01"}, "is not a date or time"),
    ],
)
async def test_out_of_range_numbers_and_dates_are_a_400_saying_what_is_wrong(client_for, stores, query, says):
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get("/audit", params=query)
    assert page.status_code == 400, page.text
    assert says in html.unescape(page.text)


async def test_the_last_day_the_log_can_hold_is_a_valid_end(client_for, stores):
    await stores.audit.append(
        AuditEntry(at=time.time(), user="dave", tenant="acme", tool="lookup", decision="allow")
    )
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get("/audit", params={"to": "9999-12-31", "from": "0001-01-01"})
    assert page.status_code == 200 and 'id="entry-1"' in page.text
