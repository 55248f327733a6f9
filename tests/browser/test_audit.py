"""The audit page verifies the chain in front of the person: intact, then the entry someone altered."""

from __future__ import annotations

import re
import sqlite3

from playwright.sync_api import expect

from .conftest import People, World


def tamper(db: str, detail: str) -> int:
    """What someone with write access to the file could do: drop the guard and rewrite a decision."""
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER audit_no_update")
        (seq,) = conn.execute("SELECT seq FROM audit WHERE decision = 'approval_decided'").fetchone()
        conn.execute("UPDATE audit SET detail = ? WHERE seq = ?", (detail, seq))
    return int(seq)


def test_the_audit_page_shows_the_chain_intact_then_the_altered_entry(world: World, people: People) -> None:
    run = world.start_run("please refund 1200.00 on A1042", user="carol")
    page = people.signed_in("bob")
    page.goto(f"/approvals/{run.pending[0].approval_id}")
    page.get_by_label("Note").fill("checked with the warehouse")
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("heading", name="Approved")).to_be_visible()

    page.goto("/audit")
    expect(page.get_by_text(re.compile(r"^Chain intact \(\d+ entries, anchor"))).to_be_visible()
    decided = page.locator("tbody tr", has_text="approval_decided")
    expect(decided).to_contain_text("approved by bob (via=console)")
    expect(page.locator("tbody tr", has_text="approval_required")).to_contain_text(run.id)
    assert page.locator("tr.bad").count() == 0

    seq = tamper(str(world.db), "approved by mallory (via=console)")
    page.reload()
    expect(page.get_by_text(f"Chain broken at entry #{seq}")).to_be_visible()
    bad = page.locator("tr.bad")
    expect(bad).to_have_count(1)
    expect(bad).to_contain_text("broken here")
    expect(bad).to_contain_text("approved by mallory (via=console)")
    assert bad.get_attribute("id") == f"entry-{seq}"
