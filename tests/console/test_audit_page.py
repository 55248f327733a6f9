"""The audit page: only the tenant's entries, each filter narrowing, paging, and the chain verified on
the page - intact, then broken at the entry someone changed in the SQLite file."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

import pytest

from maitre.audit import AuditEntry
from maitre.console import audit_page

from .conftest import csrf_of, pending_refund, sign_in

pytestmark = pytest.mark.anyio


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def seqs(html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<tr id="entry-(\d+)"', html)]


def tamper(path: Any, seq: int, column: str, value: Any) -> None:
    """What someone with the file can do: drop the append-only trigger and change a row."""
    with closing(sqlite3.connect(path)) as db:
        db.execute("DROP TRIGGER IF EXISTS audit_no_update")
        assert db.execute(f"UPDATE audit SET {column} = ? WHERE seq = ?", (value, seq)).rowcount == 1
        db.commit()


@pytest.fixture
async def log(client_for: Any, gate: Any, stores: Any) -> list[AuditEntry]:
    """A log of two tenants: alice's refund (asked, approved by bob in the console, run), dave's and
    erin's older lookups, and tenant evil's entries in between."""
    for entry in (
        AuditEntry(at=at("2020-01-01T10:00"), user="dave", tenant="acme", tool="lookup_order",
                   decision="allow", run_id="run_dave", call_id="c1", duration_ms=2.5),
        AuditEntry(at=at("2020-01-01T11:00"), user="mallory", tenant="evil", tool="issue_refund",
                   decision="allow", run_id="run_evil", call_id="c1", detail="evil-only-detail"),
        AuditEntry(at=at("2020-01-02T10:00"), user="erin", tenant="acme", tool="lookup_order",
                   decision="deny", run_id="run_erin", call_id="c1", error_code="POLICY_DENIED"),
    ):  # fmt: skip
        await stores.audit.append(entry)
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get(f"/approvals/{pending.approval_id}")
        await client.post(f"/approvals/{pending.approval_id}/approve", data={"csrf": csrf_of(page.text)})
    assert not (await pending.retry(gate)).is_error
    await stores.audit.append(
        AuditEntry(at=at("2020-01-03T10:00"), user="mallory", tenant="evil", tool="wipe", decision="deny")
    )
    return await stores.audit.entries()


class Page:
    """A response whose text has its whitespace runs folded to one space (the template wraps lines)."""

    def __init__(self, response: Any) -> None:
        self.status_code = response.status_code
        self.text = re.sub(r"\s+", " ", response.text)


async def audit_page_of(client_for: Any, name: str, **params: str) -> Page:
    async with client_for() as client:
        await sign_in(client, name)
        return Page(await client.get("/audit", params=params))


async def test_the_page_lists_only_the_tenants_entries_newest_first(client_for, log):
    acme = [e.seq for e in log if e.tenant == "acme"]
    evil = [e.seq for e in log if e.tenant == "evil"]
    page = await audit_page_of(client_for, "carol")
    assert page.status_code == 200 and seqs(page.text) == sorted(acme, reverse=True)
    assert "evil-only-detail" not in page.text and "mallory" not in page.text and "wipe" not in page.text
    other = await audit_page_of(client_for, "eve")
    assert seqs(other.text) == sorted(evil, reverse=True)
    assert "alice" not in other.text and "dave" not in other.text and "run_dave" not in other.text


async def test_each_filter_narrows_the_list(client_for, log):
    acme = [e for e in log if e.tenant == "acme"]
    refund_run = next(e.run_id for e in acme if e.tool == "issue_refund" and e.run_id)
    cases = {
        "tool": ({"tool": "issue_refund"}, lambda e: e.tool == "issue_refund"),
        "decision": ({"decision": "approval_required"}, lambda e: e.decision == "approval_required"),
        "user": ({"user": "dave"}, lambda e: e.user == "dave"),
        "run": ({"run": refund_run}, lambda e: e.run_id == refund_run),
        "day": ({"from": "2020-01-01", "to": "2020-01-01"}, lambda e: e.at < at("2020-01-02")),
        "since": ({"from": "2020-01-02T09:30"}, lambda e: e.at >= at("2020-01-02T09:30")),
        "both": ({"tool": "lookup_order", "to": "2020-01-02T09:00"}, lambda e: e.user == "dave"),
    }
    for name, (params, expected) in cases.items():
        page = await audit_page_of(client_for, "bob", **params)
        wanted = sorted((e.seq for e in acme if expected(e)), reverse=True)
        assert page.status_code == 200 and seqs(page.text) == wanted and wanted, name
        assert len(wanted) < len(acme), name  # it narrowed
    decided = await audit_page_of(client_for, "bob", decision="approval_decided", user="bob")
    assert [e.decision for e in acme if e.seq in seqs(decided.text)] == ["approval_decided"]
    nothing = await audit_page_of(client_for, "eve", user="alice")  # another tenant's user: nothing
    assert seqs(nothing.text) == [] and "No entries of tenant evil match" in nothing.text


async def test_a_bad_filter_says_what_is_wrong(client_for, log):
    page = await audit_page_of(client_for, "bob", **{"from": "yesterday<b>", "decision": "<script>"})
    assert page.status_code == 400 and seqs(page.text) == []
    assert "is not a date or time" in page.text and "is not a decision" in page.text
    assert "<b>" not in page.text and "<script>" not in page.text


async def test_the_chain_is_intact_with_its_anchor_then_broken_where_a_row_was_changed(
    client_for, log, tmp_path
):
    head = log[-1]
    page = await audit_page_of(client_for, "bob")
    assert f"Chain intact ({len(log)} entries, anchor" in page.text
    assert f'<code class="anchor">{head.seq}:{head.hash}</code>' in page.text
    assert "rewrite the log" in page.text  # why the anchor is kept elsewhere
    mine = next(e for e in log if e.tenant == "acme" and e.tool == "issue_refund")
    tamper(tmp_path / "console.db", mine.seq, "detail", "nothing to see")
    broken = await audit_page_of(client_for, "bob")
    assert f"Chain broken at entry #{mine.seq}: entry {mine.seq} was altered" in broken.text
    assert f'<tr id="entry-{mine.seq}" class="bad">' in broken.text
    assert "Keep the anchor" not in broken.text  # no anchor to keep from a broken chain


async def test_a_break_in_another_tenants_entry_is_named_by_number_only(client_for, log, tmp_path):
    theirs = next(e for e in log if e.tenant == "evil")
    tamper(tmp_path / "console.db", theirs.seq, "detail", "secret-after-tampering")
    page = await audit_page_of(client_for, "bob")
    verdict = re.search(r'<p class="verdict">(.*?)</p>', page.text, re.S)
    assert verdict and f"Chain broken at entry #{theirs.seq}" in verdict.group(1)
    assert "another tenant" in verdict.group(1) and "altered" not in verdict.group(1)
    assert "secret-after-tampering" not in page.text and "evil-only-detail" not in page.text
    own = await audit_page_of(client_for, "eve")  # to its own tenant, the reason is shown
    assert f"Chain broken at entry #{theirs.seq}: entry {theirs.seq} was altered" in own.text
    assert "secret-after-tampering" in own.text


async def test_a_kept_anchor_is_checked_and_a_rewritten_one_caught(client_for, log, stores):
    kept = log[-2]
    await stores.audit.append(
        AuditEntry(at=at("2020-01-04"), user="dave", tenant="acme", tool="t", decision="allow")
    )
    good = await audit_page_of(client_for, "bob", anchor=f"{kept.seq}:{kept.hash}")
    assert "Chain intact" in good.text and f"matches the anchor you gave (entry #{kept.seq})" in good.text
    forged = await audit_page_of(client_for, "bob", anchor=f"{kept.seq}:{'0' * 64}")
    assert f"Chain broken at entry #{kept.seq}" in forged.text
    cut = await audit_page_of(client_for, "bob", anchor=f"{len(log) + 5}:{'a' * 64}")
    assert "Chain broken" in cut.text and "cut off the end" in cut.text
    wrong = await audit_page_of(client_for, "bob", anchor="12:xyz")
    assert wrong.status_code == 400 and "SEQ:HASH" in wrong.text


async def test_a_long_chain_is_verified_in_a_bounded_window_and_says_so(
    client_for, log, tmp_path, monkeypatch
):
    monkeypatch.setattr(audit_page, "VERIFY_LIMIT", 3)
    first = log[-3].seq
    old = next(e for e in log if e.seq < first and e.tenant == "acme")
    tamper(tmp_path / "console.db", old.seq, "detail", "changed before the window")
    page = await audit_page_of(client_for, "bob")
    assert (
        f"Chain intact from entry #{first} to #{log[-1].seq}" in page.text
        and "3 entries verified" in page.text
    )
    assert f"the {first - 1} entries before #{first} were not checked here" in page.text
    old_anchor = await audit_page_of(client_for, "bob", anchor=f"{old.seq}:{old.hash}")
    assert "is older than the entries this page verifies" in old_anchor.text
    recent = next(e for e in log if e.seq >= first and e.tenant == "acme")
    tamper(tmp_path / "console.db", recent.seq, "user_id", "someone else")
    assert f"Chain broken at entry #{recent.seq}" in (await audit_page_of(client_for, "bob")).text


async def test_pages_follow_older_links_to_every_entry_once(client_for, log, stores, monkeypatch):
    for i in range(9):
        await stores.audit.append(
            AuditEntry(at=at("2020-02-01") + i, user="dave", tenant="acme" if i % 3 else "evil", tool="t",
                       decision="allow")
        )  # fmt: skip
    everything = await stores.audit.entries()
    acme = sorted((e.seq for e in everything if e.tenant == "acme"), reverse=True)
    monkeypatch.setattr(audit_page, "PAGE_SIZE", 3)
    monkeypatch.setattr(audit_page, "SCAN_LIMIT", 5)  # some pages end where the scan stopped, not full
    seen: list[int] = []
    async with client_for() as client:
        await sign_in(client, "bob")
        page = await client.get("/audit")
        for _ in range(20):
            shown = seqs(page.text)
            assert len(shown) <= 3 and shown == sorted(shown, reverse=True)
            seen += shown
            older = re.search(r'href="(/audit\?[^"]*)" rel="next"', page.text)
            if older is None:
                break
            page = await client.get(older.group(1).replace("&amp;", "&"))
    assert seen == acme


async def test_entry_text_renders_as_text(client_for, log, stores):
    await stores.audit.append(
        AuditEntry(at=at("2020-01-05"), user='"><img src=x onerror=alert(1)>', tenant="acme",
                   tool="<script>alert(1)</script>", decision="deny", detail="<script>alert(2)</script>")
    )  # fmt: skip
    page = await audit_page_of(client_for, "bob")
    assert page.status_code == 200 and "<script" not in page.text and "<img" not in page.text
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        and "&lt;img src=x onerror=alert(1)&gt;" in page.text
    )


async def test_rows_link_to_their_run_and_approval_and_show_no_full_digest(client_for, log):
    refund = next(e for e in log if e.decision == "approval_required")
    page = await audit_page_of(client_for, "bob")
    assert (
        f'href="/runs/{refund.run_id}"' in page.text
        and f'href="/approvals/{refund.approval_id}"' in page.text
    )
    assert refund.arguments and refund.arguments not in page.text and refund.arguments[:12] in page.text


async def test_the_audit_page_needs_a_sign_in(client_for):
    async with client_for() as client:
        response = await client.get("/audit")
    assert response.status_code == 303 and response.headers["location"] == "/sign-in"
