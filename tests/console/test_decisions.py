"""The inbox and decisions: tenant isolation, self-approval, roles, stale requests, audit, execution once."""

from __future__ import annotations

import time

import pytest

from maitre.audit import verify

from .conftest import csrf_of, pending_refund, sign_in

pytestmark = pytest.mark.anyio


async def decide(client, approval_id: str, verb: str, message: str = ""):
    page = await client.get(f"/approvals/{approval_id}")
    token = csrf_of(page.text) if page.status_code == 200 else csrf_of((await client.get("/")).text)
    return await client.post(f"/approvals/{approval_id}/{verb}", data={"csrf": token, "message": message})


async def test_an_approval_from_the_console_lets_the_retried_call_run_once(client_for, gate, shop, stores):
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "bob")
        inbox = await client.get("/")
        assert pending.approval_id in inbox.text and "issue_refund" in inbox.text and "alice" in inbox.text
        response = await decide(client, pending.approval_id, "approve", "checked with the customer")
        assert response.status_code == 200 and "Approved" in response.text
        assert pending.approval_id not in (await client.get("/")).text  # no longer pending
    request = await gate.approvals.get(pending.approval_id)
    assert request is not None and request.status == "approved" and request.approver == "bob (via=console)"
    assert shop.refunds == []  # a decision resumes nothing by itself (yet)
    done = await pending.retry(gate)
    assert not done.is_error and len(shop.refunds) == 1 and shop.refunds[0]["amount"] == "12.50"
    again = await pending.retry(gate)
    assert len(shop.refunds) == 1 and (again.replayed or again.is_error)
    entries = await stores.audit.entries()
    decided = [e for e in entries if e.decision == "approval_decided"]
    assert (
        len(decided) == 1
        and decided[0].user == "bob"
        and decided[0].detail == "approved by bob (via=console)"
    )
    assert decided[0].approval_id == pending.approval_id
    assert verify(entries).ok


async def test_a_denial_carries_its_message_to_the_model(client_for, gate, shop):
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "bob")
        assert (await decide(client, pending.approval_id, "deny")).status_code == 400  # a message is required
        response = await decide(client, pending.approval_id, "deny", "the order was never delivered")
        assert response.status_code == 200 and "Denied" in response.text
    result = await pending.retry(gate)
    assert result.error is not None and result.error.code == "APPROVAL_DENIED"
    assert "the order was never delivered" in result.content and shop.refunds == []


async def test_the_requester_cannot_approve_their_own_call(client_for, gate, shop):
    pending = await pending_refund(gate, user="Alice")  # normalised identity: Alice is alice
    async with client_for() as client:
        await sign_in(client, "alice")
        response = await decide(client, pending.approval_id, "approve")
        assert response.status_code == 403 and "self-approval" in response.text
    request = await gate.approvals.get(pending.approval_id)
    assert request is not None and request.status == "pending"
    assert (await pending.retry(gate)).error.code == "APPROVAL_REQUIRED" and shop.refunds == []


async def test_an_account_without_the_approver_role_cannot_decide(client_for, gate):
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "carol")
        response = await decide(client, pending.approval_id, "approve")
        assert response.status_code == 403 and "approver" in response.text
    assert (await gate.approvals.get(pending.approval_id)).status == "pending"


async def test_another_tenants_approver_sees_nothing_and_decides_nothing(client_for, gate):
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "eve")
        inbox = await client.get("/")
        assert pending.approval_id not in inbox.text and "issue_refund" not in inbox.text
        page = await client.get(f"/approvals/{pending.approval_id}")
        assert page.status_code == 404
        missing = await client.get("/approvals/apr_does_not_exist")
        assert missing.status_code == 404 and page.text.count("No such") == missing.text.count("No such")
        for verb, message in (("approve", ""), ("deny", "no")):
            response = await decide(client, pending.approval_id, verb, message)
            assert response.status_code == 404 and "issue_refund" not in response.text
    assert (await gate.approvals.get(pending.approval_id)).status == "pending"


async def test_a_decision_without_the_csrf_token_is_refused(client_for, gate):
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "bob")
        no_token = await client.post(f"/approvals/{pending.approval_id}/approve", data={})
        wrong = await client.post(f"/approvals/{pending.approval_id}/approve", data={"csrf": "guess"})
        assert no_token.status_code == 403 and wrong.status_code == 403
    assert (await gate.approvals.get(pending.approval_id)).status == "pending"


async def test_a_decision_while_signed_out_changes_nothing(client_for, gate):
    pending = await pending_refund(gate)
    async with client_for() as client:
        response = await client.post(f"/approvals/{pending.approval_id}/approve", data={"csrf": "x"})
        assert response.status_code == 303 and response.headers["location"] == "/sign-in"
    assert (await gate.approvals.get(pending.approval_id)).status == "pending"


async def test_an_already_decided_or_used_request_is_a_409_page(client_for, gate):
    pending = await pending_refund(gate)
    async with client_for() as client:
        await sign_in(client, "bob")
        assert (await decide(client, pending.approval_id, "approve")).status_code == 200
        again = await decide(client, pending.approval_id, "deny", "changed my mind")
        assert again.status_code == 409 and "already approved" in again.text
        await pending.retry(gate)  # used now
        used = await decide(client, pending.approval_id, "approve")
        assert used.status_code == 409 and "used" in used.text
        page = await client.get(f"/approvals/{pending.approval_id}")
        assert page.status_code == 200 and "/approve" not in page.text  # no decision forms


async def test_an_expired_request_is_a_410_page(client_for, gate, monkeypatch):
    gate.approval_ttl_s = 5
    pending = await pending_refund(gate)
    later = time.time() + 60
    monkeypatch.setattr(time, "time", lambda: later)
    async with client_for() as client:
        await sign_in(client, "bob")
        assert pending.approval_id not in (await client.get("/")).text
        response = await decide(client, pending.approval_id, "approve")
        assert response.status_code == 410 and "expired" in response.text


async def test_tool_arguments_render_as_text_never_as_markup(client_for, gate):
    script = "<script>alert(1)</script>"
    attribute = '"><img src=x onerror=alert(1)>'
    pending = await pending_refund(gate, {"order_id": script, "amount": "1.00", "note": attribute})
    async with client_for() as client:
        await sign_in(client, "bob")
        for page in (await client.get("/"), await client.get(f"/approvals/{pending.approval_id}")):
            assert page.status_code == 200
            assert script not in page.text and "<img" not in page.text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
            assert "&lt;img src=x onerror=alert(1)&gt;" in page.text


async def test_every_page_carries_a_strict_content_security_policy(client_for):
    async with client_for() as client:
        for response in (await client.get("/sign-in"), await client.get("/static/console.css")):
            policy = response.headers["content-security-policy"]
            assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
            assert "'unsafe-inline'" not in policy
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["referrer-policy"] == "no-referrer"
        page = await client.get("/sign-in")
        assert "<script" not in page.text and " style=" not in page.text and "on" + "click" not in page.text


async def test_the_gate_policys_approver_role_is_required_too(stores, accounts, shop, gate):
    import httpx

    from maitre.console.accounts import Account, hash_password
    from maitre.console.app import create_app
    from maitre.policy import DefaultPolicy

    from .conftest import SECRET

    await accounts.put(
        Account(
            name="dana",
            tenant="acme",
            roles=frozenset({"approver", "refunds"}),
            password_hash=hash_password("pw-dana-123"),
        )
    )
    app = create_app(stores, secret=SECRET, accounts=accounts, policy=DefaultPolicy(approver_role="refunds"))
    pending = await pending_refund(gate)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver"
    ) as client:
        await sign_in(client, "bob")  # an approver, but without the policy's role
        refused = await decide(client, pending.approval_id, "approve")
        assert refused.status_code == 403 and "refunds" in refused.text
        assert (await gate.approvals.get(pending.approval_id)).status == "pending"
        client.cookies.clear()
        await sign_in(client, "dana", "pw-dana-123")
        assert (await decide(client, pending.approval_id, "approve")).status_code == 200
    assert (await gate.approvals.get(pending.approval_id)).status == "approved"
