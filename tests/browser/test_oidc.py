"""Sign-in at an OpenID Provider (our own, on 127.0.0.1) in a real browser: code flow with PKCE."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from .conftest import People, World


def test_a_person_signed_in_by_the_identity_provider_decides_as_themselves(
    oidc_world: tuple[World, Any], oidc_people: People
) -> None:
    world, idp = oidc_world
    approval_id = world.pending_call({"order_id": "A6006", "amount": "60.00"}, user="carol")
    idp.sign_in_as("dana", tenant="acme", roles=["approver"])
    page = oidc_people.page()
    page.goto("/")
    expect(page).to_have_url("/sign-in")
    page.get_by_role("link", name=f"Sign in with {idp.issuer.removeprefix('http://')}").click()
    # the provider approves at once and sends the browser back; the console's page moves on by itself
    expect(page.get_by_role("heading", name="Pending approvals")).to_be_visible()
    expect(page.get_by_text("dana · tenant acme")).to_be_visible()
    (token_request,) = idp.token_requests
    assert token_request["grant_type"] == "authorization_code" and token_request["code_verifier"]
    page.get_by_role("link", name="issue_refund").click()
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("heading", name="Approved")).to_be_visible()
    request = world.approval(approval_id)
    assert request.status == "approved" and request.approver is not None and "dana" in request.approver
