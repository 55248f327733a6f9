"""Attacks on the page itself, in a real browser: script in tool arguments, forged forms, inline script."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from .conftest import Attacker, People, World

SCRIPT = "<script>window.__xss=1</script>"
ATTRIBUTE = '"><img src=x onerror="window.__xss=1">'


def no_script_ran(page: Any) -> None:
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("img").count() == 0  # the payload's <img> never became an element
    assert page.evaluate("() => [...document.scripts].filter((s) => !s.src).length") == 0


def test_script_in_tool_arguments_is_shown_as_text_and_never_runs(world: World, people: People) -> None:
    approval_id = world.pending_call({"order_id": SCRIPT, "amount": "1.00", "note": ATTRIBUTE})
    page = people.signed_in("bob")
    no_script_ran(page)
    expect(page.get_by_text(SCRIPT).first).to_be_visible()  # the inbox shows it, as text
    page.get_by_role("link", name="issue_refund").click()
    expect(page).to_have_url(f"/approvals/{approval_id}")
    no_script_ran(page)
    expect(page.get_by_text(SCRIPT).first).to_be_visible()
    expect(page.get_by_text("<img src=x onerror=").first).to_be_visible()
    page.get_by_role("link", name="Edit the arguments").click()  # in form fields: values, whole
    no_script_ran(page)
    expect(page.get_by_label("order_id")).to_have_value(SCRIPT)
    expect(page.get_by_label("note", exact=True)).to_have_value(ATTRIBUTE)


def forged_form(action: str, token: str | None) -> str:
    """A page that posts to the console: a decision, or an edit to what the attacker wants paid."""
    fields = {"message": "ok", "note": "ok", "edited": '{"order_id": "A4004", "amount": "4999.00"}'}
    if token is not None:
        fields["csrf"] = token
    hidden = "".join(f"<input type=hidden name={name} value='{value}'>" for name, value in fields.items())
    return (
        "<!doctype html><title>You won a prize</title>"
        f'<form method="post" action="{action}">{hidden}<button type="submit">Claim your prize</button></form>'
    )


def test_a_form_posted_from_another_origin_decides_nothing(
    world: World, people: People, attacker: Attacker
) -> None:
    approval_id = world.pending_call({"order_id": "A4004", "amount": "4000.00"})
    page = people.signed_in("bob")  # the approver is signed in, in this very browser
    page.goto(f"/approvals/{approval_id}")
    for action, token in [("approve", None), ("approve", "a-guessed-token"), ("edit/confirm", None)]:
        attacker.html = forged_form(f"{world.url}/approvals/{approval_id}/{action}", token)
        page.goto(attacker.url)  # another port of 127.0.0.1: same site, so the cookie does go along
        page.get_by_role("button", name="Claim your prize").click()
        expect(page.get_by_role("heading", name="Refused")).to_be_visible()  # the CSRF token stops it
        expect(page.get_by_role("status")).to_contain_text("security token")
    cross_site = attacker.url.replace("127.0.0.1", "localhost")  # another site: no cookie at all
    attacker.html = forged_form(f"{world.url}/approvals/{approval_id}/deny", None)
    page.goto(cross_site)
    page.get_by_role("button", name="Claim your prize").click()
    expect(page).to_have_url(f"{world.url}/sign-in")
    request = world.approval(approval_id)
    assert request.status == "pending" and request.approver is None and request.edited_arguments is None
    assert world.shop.refunds == []
    page.goto(f"/approvals/{approval_id}")  # and bob is still signed in, the request still decidable
    expect(page.get_by_role("button", name="Approve")).to_be_visible()


def test_every_page_carries_a_strict_csp_that_the_browser_enforces(world: World, people: People) -> None:
    approval_id = world.pending_call({"order_id": "A5005", "amount": "5.00"})
    page = people.page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))
    response = page.goto("/sign-in")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy and "'unsafe-inline'" not in policy
    page = people.signed_in("bob")
    page.on("console", lambda message: violations.append(message.text))
    response = page.goto(f"/approvals/{approval_id}")
    assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    # the console's own script, a file from 'self', runs: the deadline counts down
    expect(page.locator("time[data-expires]")).to_have_text(
        re.compile(r"^expires in (59 min \d+ s|1 h 0 min)$")
    )
    assert page.evaluate("() => [...document.scripts].map((s) => new URL(s.src).pathname)") == [
        "/static/console.js"
    ]
    ran = page.evaluate(
        """() => {
            const inline = document.createElement("script");
            inline.textContent = "window.__inline = 1";
            document.body.append(inline);
            const handler = document.createElement("div");
            handler.setAttribute("onclick", "window.__handler = 1");
            document.body.append(handler);
            handler.click();
            return [window.__inline, window.__handler];
        }"""
    )
    assert ran == [None, None]  # an injected inline script or handler is refused by the browser
    assert any("Content Security Policy" in text for text in violations), violations


def test_script_in_what_the_user_asked_is_text_on_the_run_pages(world: World, people: People) -> None:
    run = world.start_run(f"please refund 10.00 on A1042 {SCRIPT} {ATTRIBUTE}", user="carol")
    page = people.signed_in("bob")
    for path in (f"/runs/{run.id}", f"/approvals/{run.pending[0].approval_id}", "/runs"):
        page.goto(path)
        no_script_ran(page)
    page.goto(f"/runs/{run.id}")
    expect(page.get_by_text(f"please refund 10.00 on A1042 {SCRIPT} {ATTRIBUTE}").first).to_be_visible()
