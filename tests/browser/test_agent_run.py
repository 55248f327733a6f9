"""A refund pauses in a real Agent run; a person edits and approves it; the run resumes by itself, once."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from .conftest import People, World


def test_the_approver_edits_the_amount_and_the_run_resumes_by_itself_with_it_once(
    world: World, people: People, workers: None
) -> None:
    run = world.start_run("please refund 1200.00 on A1042, the parcel arrived damaged", user="carol")
    (pending,) = run.pending
    assert (
        pending.arguments == {"order_id": "A1042", "amount": "1200.00", "note": ""}
        and world.shop.refunds == []
    )

    page = people.signed_in("bob")
    page.get_by_role("link", name="issue_refund").click()
    expect(page.locator("blockquote.goal")).to_have_text(
        "please refund 1200.00 on A1042, the parcel arrived damaged"
    )
    page.get_by_role("link", name="Edit the arguments").click()
    amount = page.get_by_label("amount")
    expect(amount).to_have_value("1200.00")
    amount.fill("9000.00")  # over the tool's limit: the gate's own validation answers in the form
    page.get_by_role("button", name="Review the change").click()
    expect(page.locator(".field-error")).to_contain_text("5000")
    page.get_by_label("amount").fill("600.00")
    page.get_by_role("button", name="Review the change").click()
    expect(page.get_by_role("heading", name="Confirm the edit of shop.issue_refund")).to_be_visible()
    change = page.locator("table.diff tbody tr")
    expect(change).to_have_count(1)
    expect(change).to_contain_text("amount")
    expect(change.locator("del")).to_have_text('"1200.00"')
    expect(change.locator("ins")).to_have_text('"600.00"')
    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page.get_by_role("heading", name="Approved")).to_be_visible()

    finished = world.wait_for_run(run.id)  # nobody resumes it: the workers beside the console do
    assert finished.status.value == "finished", finished.final_text
    assert "Refunded 600.00 INR for A1042." in finished.final_text
    assert world.shop.refunds == [("A1042", "600.00")]
    time.sleep(0.3)  # several more passes of both workers
    assert world.shop.refunds == [("A1042", "600.00")]
    request = world.approval(pending.approval_id)
    assert request.status == "used" and request.approver == "bob (via=console)"
    assert request.edited_arguments == {"order_id": "A1042", "amount": "600.00", "note": ""}

    page.goto(f"/runs/{run.id}")
    expect(page.locator("dd.status")).to_have_text(re.compile(r"^finished"))
    expect(page.get_by_text("The approver edited the arguments.")).to_be_visible()
    expect(page.locator("pre.answer")).to_contain_text("Refunded 600.00 INR for A1042.")
