"""A person decides in a real browser: sign-in, denial with a message, and the refusals that must hold."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from maitre.agent import ToolResultMessage

from .conftest import PASSWORD, People, World


def test_signing_in_with_a_local_account_opens_the_inbox_with_an_httponly_session(people: People) -> None:
    page = people.page()
    page.goto("/")
    expect(page).to_have_url("/sign-in")  # signed out: every page leads to sign-in
    page.get_by_label("Account").fill("bob")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong account or password.")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Pending approvals")).to_be_visible()
    expect(page.get_by_text("bob · tenant acme")).to_be_visible()
    (session,) = [c for c in page.context.cookies() if c["name"] == "maitre_console"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert "maitre_console" not in page.evaluate("() => document.cookie")  # no script can read it
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url("/sign-in")
    page.goto("/")
    expect(page).to_have_url("/sign-in")


def test_a_second_person_denies_with_a_message_and_the_model_reads_it(
    world: World, people: People, workers: None
) -> None:
    run = world.start_run("please refund 1200.00 on A1042", user="carol")
    (pending,) = run.pending
    page = people.signed_in("alice", javascript=False)  # every page works without JavaScript
    page.get_by_role("link", name="issue_refund").click()
    expect(page.locator("time[data-expires]")).not_to_have_text(re.compile("expires in"))  # no countdown
    page.get_by_label("Message to the model").fill("A1042 is outside the refund window; offer a voucher")
    page.get_by_role("button", name="Deny").click()
    expect(page.get_by_role("heading", name="Denied")).to_be_visible()
    assert world.approval(pending.approval_id).status == "denied"
    resumed = world.wait_for_run(run.id)  # the workers beside the console resume it
    assert resumed.status.value == "finished" and world.shop.refunds == []
    assert "outside the refund window; offer a voucher" in resumed.final_text
    denial = [m for m in resumed.messages if isinstance(m, ToolResultMessage)][-1]
    assert denial.error_code == "APPROVAL_DENIED" and "offer a voucher" in denial.content


def test_the_requester_cannot_approve_their_own_refund(world: World, people: People) -> None:
    run = world.start_run("please refund 80.00 on A2001", user="Alice")  # normalised: Alice is alice
    page = people.signed_in("alice")
    page.goto(f"/approvals/{run.pending[0].approval_id}")
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("heading", name="Refused")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("self-approval")
    assert world.approval(run.pending[0].approval_id).status == "pending"


def test_another_tenants_approver_sees_nothing_and_cannot_open_the_request(
    world: World, people: People
) -> None:
    run = world.start_run("please refund 80.00 on A2001", user="carol")
    approval_id = run.pending[0].approval_id
    page = people.signed_in("eve")
    expect(page.get_by_text("Nothing is waiting for a decision in tenant evil.")).to_be_visible()
    assert page.get_by_text("issue_refund").count() == 0
    response = page.goto(f"/approvals/{approval_id}")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    assert (
        page.get_by_text("issue_refund").count() == 0
        and page.get_by_role("button", name="Approve").count() == 0
    )
    page.goto("/runs")
    expect(page.get_by_text("No runs in tenant evil.")).to_be_visible()
    response = page.goto(f"/runs/{run.id}")
    assert response is not None and response.status == 404
    page.goto("/audit")
    expect(page.get_by_role("heading", name="Entries of tenant evil")).to_be_visible()
    assert page.get_by_text(run.id).count() == 0 and page.get_by_text("issue_refund").count() == 0
    assert world.approval(approval_id).status == "pending"


def test_a_request_that_expires_while_open_shows_the_expired_page(world: World, people: People) -> None:
    page = people.signed_in("bob")
    approval_id = world.pending_call({"order_id": "A3003", "amount": "10.00"}, ttl_s=3.0)
    page.goto(f"/approvals/{approval_id}")
    approve = page.get_by_role("button", name="Approve")
    expect(approve).to_be_visible()
    expect(page.locator("time[data-expires]")).to_have_text(re.compile(r"^expires in [0-9] s$"))
    expect(page.locator("time[data-expires]")).to_have_text("expired", timeout=4_000)  # console.js
    time.sleep(max(0.0, world.approval(approval_id).expires_at - time.time()) + 0.05)
    approve.click()
    expect(page.get_by_role("heading", name="Expired")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("expired")
    page.goto("/")
    expect(page.get_by_text("Nothing is waiting")).to_be_visible()
    assert world.approval(approval_id).status == "expired" and world.shop.refunds == []
