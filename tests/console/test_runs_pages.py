"""The runs list and the run page, over a real Agent run: a lookup, a refund paused for approval,
approved in the console, resumed and finished. Tenant isolation and escaping are tested as attacks."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import pytest

from maitre import Principal
from maitre.agent import Agent, Limits
from maitre.agent.run import Run, RunStatus
from maitre.audit import AuditEntry
from maitre.console import audit_page
from maitre.console.audit_page import run_audit, run_entries
from maitre.console.runs_pages import timeline
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says

from .conftest import csrf_of, sign_in

pytestmark = pytest.mark.anyio

SCRIPT = "<script>alert('x')</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'


def refund_model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                "look up",
                when=last_user_says("refund"),
                then=lambda r: call("lookup_order", order_id="ORD-1"),
            ),
            Rule(
                "refund",
                when=after_tool("lookup_order", ok=True),
                then=lambda r: call("issue_refund", order_id="ORD-1", amount="12.50", note=ATTRIBUTE),
            ),
            Rule(
                "done",
                when=after_tool("issue_refund", ok=True),
                then=lambda r: f"Done: {last_tool_result(r).content} {SCRIPT}",
            ),
        ]
    )


@dataclass
class Story:
    agent: Agent
    paused: Run
    finished: Run
    approval_id: str


def add_lookup(shop: Any) -> None:
    if shop.box.get("lookup_order") is not None:
        return

    @shop.box.tool(trust="untrusted")
    def lookup_order(order_id: str) -> dict[str, str]:
        """Look up an order (its note was written by the customer)."""
        return {"order_id": order_id, "total": "12.50", "customer_note": SCRIPT}


async def paused_run(shop: Any, stores: Any, user: str = "alice", tenant: str = "acme") -> tuple[Agent, Run]:
    add_lookup(shop)
    agent = Agent(refund_model(), shop.box, stores=stores, limits=Limits(max_steps=6))
    run = await agent.run(f"Please refund ORD-1 {SCRIPT}", Principal(user=user, tenant=tenant))
    assert run.status is RunStatus.PAUSED and len(run.pending) == 1
    return agent, run


async def approve_in_console(client: Any, approval_id: str) -> None:
    page = await client.get(f"/approvals/{approval_id}")
    response = await client.post(
        f"/approvals/{approval_id}/approve", data={"csrf": csrf_of(page.text), "message": "ok"}
    )
    assert response.status_code == 200, response.text


@pytest.fixture
async def story(client_for: Any, shop: Any, stores: Any) -> Story:
    """alice's run looks an order up, asks for a refund, bob approves it in the console, it finishes."""
    agent, paused = await paused_run(shop, stores)
    approval_id = paused.pending[0].approval_id
    async with client_for() as client:
        await sign_in(client, "bob")
        await approve_in_console(client, approval_id)
    finished = await agent.resume(paused.id)
    assert finished.status is RunStatus.FINISHED and shop.refunds == [
        {"order_id": "ORD-1", "amount": "12.50", "note": ATTRIBUTE}
    ]
    return Story(agent, paused, finished, approval_id)


def row_of(html: str, run_id: str) -> str:
    found = re.search(rf'<tr id="run-{re.escape(run_id)}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {run_id}"
    return re.sub(r"\s+", " ", found.group(1))


def cells(row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


async def test_the_runs_list_shows_each_run_with_its_numbers_newest_first(client_for, story, shop, stores):
    _, later = await paused_run(shop, stores, user="dave")
    run = story.finished
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get("/runs")
    assert page.status_code == 200
    shown = cells(row_of(page.text, run.id))
    assert shown[:9] == [
        run.id,
        "finished",
        "completed",
        "3",
        "2",
        f"{run.usage.input_tokens} / {run.usage.output_tokens}",
        "$0.0000",
        "alice",
        shown[8],
    ]
    assert run.usage.input_tokens > 0 and run.usage.output_tokens > 0
    assert cells(row_of(page.text, later.id))[1:3] == ["paused (1 waiting)", "approval_required"]
    assert cells(row_of(page.text, later.id))[7] == "dave"
    assert page.text.index(f'id="run-{later.id}"') < page.text.index(f'id="run-{run.id}"')  # newest first
    assert f'href="/runs/{run.id}"' in page.text


async def test_the_runs_list_filters_by_status(client_for, story, shop, stores):
    _, later = await paused_run(shop, stores, user="dave")
    async with client_for() as client:
        await sign_in(client, "bob")
        paused = await client.get("/runs", params={"status": "paused"})
        finished = await client.get("/runs", params={"status": "finished"})
        stopped = await client.get("/runs", params={"status": "stopped"})
        bogus = await client.get("/runs", params={"status": "<b>x</b>"})
    assert later.id in paused.text and story.finished.id not in paused.text
    assert story.finished.id in finished.text and later.id not in finished.text
    assert (
        later.id not in stopped.text
        and story.finished.id not in stopped.text
        and "No stopped runs" in stopped.text
    )
    assert bogus.status_code == 400 and "not a run status" in bogus.text and "<b>x</b>" not in bogus.text


async def test_the_run_page_shows_the_timeline_the_approval_the_decision_and_the_answer(client_for, story):
    run = story.finished
    async with client_for() as client:
        await sign_in(client, "carol")  # any account of the tenant may read runs
        page = await client.get(f"/runs/{run.id}")
    assert page.status_code == 200
    text = re.sub(r"\s+", " ", page.text)
    lookup = text.index("Calls lookup_order")
    refund = text.index("Calls issue_refund")
    asked = text.index("issue_refund needs a person&#39;s approval")
    paused = text.index("Paused: 1 call(s) wait for a decision")
    decided = text.index("issue_refund approved by bob (via=console)")
    resumed = text.index("Resumed: 1 decided, 0 still waiting")
    answered = text.index("issue_refund answered")
    finished = text.index("Run finished (completed)")
    assert lookup < refund < asked < paused < decided < resumed < answered < finished
    assert f'href="/approvals/{story.approval_id}"' in text
    assert "Rule: risk-matrix" in text and "now used" in text  # the request as stored now
    assert '<span class="trust trust-untrusted">untrusted</span>' in text  # the lookup's trust label
    assert re.search(r"Gate: <span[^>]*>approval_required</span> \(APPROVAL_REQUIRED\)", text)
    assert re.search(r"Gate: <span[^>]*>approved</span> at <time[^>]*>[^<]+</time>, \d+\.\d ms", text)
    assert re.search(r"Gate: <span[^>]*>allow</span>", text)  # the lookup, allowed at once
    assert "Final answer" in text and "Done: refunded 12.50 on ORD-1" in text
    assert f"{run.usage.input_tokens} in / {run.usage.output_tokens} out" in text
    assert "What the user asked</dt><dd>Please refund ORD-1" in text


async def test_a_paused_run_links_its_pending_approval(client_for, shop, stores):
    _, paused = await paused_run(shop, stores)
    approval_id = paused.pending[0].approval_id
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get(f"/runs/{paused.id}")
    assert page.status_code == 200
    pending = page.text[page.text.index("Waiting for a decision") : page.text.index("Timeline")]
    assert f'<a href="/approvals/{approval_id}">issue_refund</a>' in pending and "request pending" in pending
    assert "Waiting for a human to approve: issue_refund" in page.text


async def test_the_timeline_is_built_from_the_runs_events_and_the_gates_audit(story, stores):
    run = story.finished
    audit = await run_entries(stores.audit, "acme", run.id, since=run.created_at)
    assert [(e.tool, e.decision) for e in audit] == [
        ("lookup_order", "allow"),
        ("issue_refund", "approval_required"),
        ("issue_refund", "approved"),
    ]
    rows = timeline(run, audit)
    assert [row.kind for row in rows] == [
        "model",
        "call",
        "result",
        "model",
        "call",
        "approval",
        "paused",
        "decided",
        "resumed",
        "result",
        "model",
        "finished",
    ]
    calls = {row.tool: row for row in rows if row.kind == "call"}
    results = {row.tool: row for row in rows if row.kind == "result"}
    assert [e.decision for e in calls["issue_refund"].gate] == ["approval_required"]
    assert [e.decision for e in results["issue_refund"].gate] == ["approved"]
    assert calls["lookup_order"].gate == () and [e.decision for e in results["lookup_order"].gate] == [
        "allow"
    ]
    assert results["lookup_order"].trust == "untrusted" and results["issue_refund"].trust == "trusted"
    models = [row for row in rows if row.kind == "model"]
    assert [m.tools_called for m in models] == [("lookup_order",), ("issue_refund",), ()]
    assert models[2].text is not None and models[2].text.endswith(SCRIPT)
    assert sum(m.input_tokens or 0 for m in models) == run.usage.input_tokens


async def test_another_tenant_sees_neither_the_run_in_the_list_nor_its_page(client_for, story):
    run = story.finished
    async with client_for() as client:
        await sign_in(client, "eve")
        listing = await client.get("/runs")
        page = await client.get(f"/runs/{run.id}")
        unknown = await client.get("/runs/run_that_does_not_exist")
    assert (
        listing.status_code == 200 and run.id not in listing.text and "No runs in tenant evil" in listing.text
    )
    assert page.status_code == 404 and unknown.status_code == 404
    assert page.text == unknown.text and "issue_refund" not in page.text and "alice" not in page.text


async def test_model_tool_and_user_text_renders_as_text(client_for, story):
    async with client_for() as client:
        await sign_in(client, "bob")
        pages = [await client.get("/runs"), await client.get(f"/runs/{story.finished.id}")]
    for page in pages:
        assert page.status_code == 200
        assert "<script" not in page.text and "<img" not in page.text and " style=" not in page.text
    run_page = pages[1].text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in run_page  # goal, tool result, final answer
    assert run_page.count("&lt;script&gt;") >= 3
    assert "&lt;img src=x onerror=alert(1)&gt;" in run_page  # the refund's note argument


async def test_the_runs_pages_need_a_sign_in(client_for, story):
    async with client_for() as client:
        for path in ("/runs", f"/runs/{story.finished.id}"):
            response = await client.get(path)
            assert response.status_code == 303 and response.headers["location"] == "/sign-in"


@pytest.mark.parametrize("backend", ["sqlite", "memory"])
async def test_a_runs_entries_are_found_however_much_other_tenants_wrote_since_it_began(stores, backend):
    """The SQL stores read the run's entries by run id; any other store is looked through page by page.
    Either way only the run's own entries count towards the limit."""
    from maitre.storage.memory import MemoryAuditStore

    store = stores.audit if backend == "sqlite" else MemoryAuditStore()
    began = time.time()

    def entry(tenant: str, run_id: str | None, decision: str) -> AuditEntry:
        return AuditEntry(at=time.time(), user="u", tenant=tenant, tool="t", decision=decision, run_id=run_id)

    await store.append(entry("acme", "r1", "approval_required"))
    for _ in range(40):
        await store.append(entry("evil", None, "allow"))
    await store.append(entry("evil", "r1", "allow"))  # the same run id in another tenant: not this run
    await store.append(entry("acme", "r1", "approved"))
    found = await run_audit(store, "acme", "r1", since=began, limit=3)
    assert [e.decision for e in found.entries] == ["approval_required", "approved"] and found.complete
    assert [e.decision for e in await run_entries(store, "acme", "r1", since=began, limit=3)] == [
        "approval_required",
        "approved",
    ]
    capped = await run_audit(store, "acme", "r1", since=began, limit=1)
    assert [e.decision for e in capped.entries] == ["approval_required"] and not capped.complete
    window = await run_audit(store, "acme", "r1", since=began, scan_limit=10)
    assert [e.decision for e in window.entries] == ["approval_required"]
    assert (window.looked_to, window.newest, window.complete) == (10, 43, False)


async def test_the_run_page_says_when_its_entries_were_looked_for_only_so_far(
    client_for, story, stores, monkeypatch
):
    for _ in range(5):
        await stores.audit.append(
            AuditEntry(at=time.time(), user="m", tenant="evil", tool="x", decision="allow")
        )
    async with client_for() as client:
        await sign_in(client, "bob")
        whole = await client.get(f"/runs/{story.finished.id}")
        monkeypatch.setattr(audit_page, "RUN_SCAN_LIMIT", 2)
        cut = await client.get(f"/runs/{story.finished.id}")
    assert whole.status_code == cut.status_code == 200
    assert (
        len(re.findall("Gate: <span", whole.text)) == 3
        and "later ones are on the audit page" not in whole.text
    )
    assert len(re.findall("Gate: <span", cut.text)) < 3
    assert re.search(
        r"found up to entry #\d+ of \d+; later ones are on the audit page", re.sub(r"\s+", " ", cut.text)
    )
