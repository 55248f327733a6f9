"""The pictures the README shows, taken from the real console at 1280x900 with fixed content."""

from __future__ import annotations

import struct
from pathlib import Path

from playwright.sync_api import expect

from .conftest import ARTEFACTS, People, World, screenshot

ASKS = [
    ("run_support_0001", "carol", "please refund 1200.00 on A1042, the parcel arrived damaged"),
    ("run_support_0002", "carol", "please refund 349.50 on A1077, charged twice"),
    ("run_billing_0003", "alice", "please refund 89.99 on A2210, wrong size sent"),
]


def size_of(png: Path) -> tuple[int, int]:
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_inbox_a_request_page_an_edit_and_a_run_page_as_screenshots(
    world: World, people: People, workers: None
) -> None:
    runs = [world.start_run(goal, user=user, run_id=run_id) for run_id, user, goal in ASKS]
    page = people.signed_in("bob")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(3)
    for run_id, _, _ in ASKS:
        expect(page.get_by_text(run_id)).to_be_visible()
    shots = [screenshot(page, "inbox")]

    page.goto(f"/approvals/{runs[0].pending[0].approval_id}")
    expect(page.get_by_role("heading", name="shop.issue_refund")).to_be_visible()
    expect(page.get_by_role("link", name="Edit the arguments")).to_be_visible()
    shots.append(screenshot(page, "request"))

    page.get_by_role("link", name="Edit the arguments").click()
    page.get_by_label("amount").fill("600.00")
    page.get_by_label("Note (kept with the decision)").fill("half now: the rest once the parcel is back")
    page.get_by_role("button", name="Review the change").click()
    expect(page.locator("table.diff ins")).to_have_text('"600.00"')
    shots.append(screenshot(page, "edit"))

    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page.get_by_role("heading", name="Approved")).to_be_visible()
    assert world.wait_for_run(runs[0].id).status.value == "finished"
    assert world.shop.refunds == [("A1042", "600.00")]
    page.goto(f"/runs/{runs[0].id}")
    expect(page.locator("dd.status")).to_have_text("finished (completed)")
    shots.append(screenshot(page, "run"))

    for shot in shots:
        assert size_of(ARTEFACTS / shot.name) == (1280, 900) == size_of(shot)
