"""Approvals are bound to the exact arguments, expire, work once, and cannot be self-granted."""

import pytest

from maitre import Principal, ToolCall, UserError
from maitre.stores import ApprovalStateError

from .conftest import make_gate

pytestmark = pytest.mark.anyio

LARGE = {"order_id": "ORD-00000001", "amount": "4500.00"}


def refund_call(arguments=LARGE, id="c1"):
    return ToolCall(id=id, name="shop.issue_large_refund", arguments=arguments)


async def test_approved_call_executes_exactly_once_with_the_approved_arguments(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    first = await gate.call(refund_call(), alice, run)
    assert first.error.code == "APPROVAL_REQUIRED"
    approval_id = first.error.details["approval_id"]
    assert first.error.details["arguments"] == {"order_id": "ORD-00000001", "amount": "4500.00"}
    await gate.approvals.approve(approval_id, Principal(user="manager", tenant="acme"))
    done = await gate.call(refund_call(id="c2"), alice, run, approval_id=approval_id)
    assert not done.is_error and shop.refunds == [
        {"order_id": "ORD-00000001", "amount": "4500.00", "large": True}
    ]
    again = await gate.call(refund_call(id="c3"), alice, run, approval_id=approval_id)
    assert again.replayed and again.content == done.content  # the same call again: its stored result
    assert len(shop.refunds) == 1
    decisions = [e.decision for e in await stores.audit.entries()]
    assert decisions == ["approval_required", "approved", "replayed"]


async def test_a_used_approval_cannot_authorise_a_second_execution(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    export = ToolCall(id="e", name="shop.export_customers", arguments={})  # a high-risk read: no replay key
    approval_id = (await gate.call(export, alice, run)).error.details["approval_id"]
    await gate.approvals.approve(approval_id, "manager")
    assert not (await gate.call(export, alice, run, approval_id=approval_id)).is_error
    reused = await gate.call(export, alice, run, approval_id=approval_id)
    assert reused.error.code == "INVALID_STATE" and "used" in reused.content
    assert shop.exports == 1


async def test_approve_a_then_call_with_b_does_not_execute_b(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    first = await gate.call(refund_call(), alice, run)
    approval_id = first.error.details["approval_id"]
    await gate.approvals.approve(approval_id, "manager")
    other = await gate.call(
        refund_call({"order_id": "ORD-00000001", "amount": "5000.00"}), alice, run, approval_id=approval_id
    )
    assert other.error.code == "APPROVAL_REQUIRED"
    assert other.error.details["approval_id"] != approval_id
    assert shop.refunds == []
    assert (await gate.approvals.get(approval_id)).status == "approved"  # still unused for A


async def test_an_approval_for_another_run_or_principal_does_not_match(shop, stores, alice):
    gate = make_gate(shop, stores)
    first = await gate.call(refund_call(), alice, gate.new_run(alice))
    approval_id = first.error.details["approval_id"]
    await gate.approvals.approve(approval_id, "manager")
    other_run = await gate.call(refund_call(), alice, gate.new_run(alice), approval_id=approval_id)
    assert other_run.error.code == "INVALID_STATE" and other_run.error.details["reason"] == "other_run"
    mallory = Principal(user="mallory", tenant="evil")
    stolen = await gate.call(refund_call(), mallory, gate.new_run(mallory), approval_id=approval_id)
    assert stolen.error.code in ("INVALID_STATE", "PERMISSION_DENIED")
    assert shop.refunds == []


async def test_denied_approval_sends_the_message_back_and_cannot_be_reused(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    approval_id = (await gate.call(refund_call(), alice, run)).error.details["approval_id"]
    await gate.approvals.deny(approval_id, "manager", "refunds over 4000 need the customer's receipt")
    result = await gate.call(refund_call(), alice, run, approval_id=approval_id)
    assert result.error.code == "APPROVAL_DENIED"
    assert "refunds over 4000 need the customer's receipt" in result.content
    with pytest.raises(ApprovalStateError):
        await gate.approvals.approve(approval_id, "manager")
    assert shop.refunds == []


async def test_expired_approvals_are_refused(shop, stores, alice):
    gate = make_gate(shop, stores, approval_ttl_s=0.05)
    run = gate.new_run(alice)
    approval_id = (await gate.call(refund_call(), alice, run)).error.details["approval_id"]
    await gate.approvals.approve(approval_id, "manager")
    import anyio

    await anyio.sleep(0.1)
    result = await gate.call(refund_call(), alice, run, approval_id=approval_id)
    assert result.error.code == "INVALID_STATE" and "expired" in result.content
    assert shop.refunds == []


async def test_self_approval_is_refused(shop, stores, alice):
    gate = make_gate(shop, stores)
    approval_id = (await gate.call(refund_call(), alice, gate.new_run(alice))).error.details["approval_id"]
    with pytest.raises(UserError, match="self-approval"):
        await gate.approvals.approve(approval_id, alice)
    with pytest.raises(UserError, match="self-approval"):
        await gate.approvals.approve(approval_id, "alice")
    assert (await gate.approvals.get(approval_id)).status == "pending"


async def test_edited_arguments_are_validated_rehashed_and_are_what_executes(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    approval_id = (await gate.call(refund_call(), alice, run)).error.details["approval_id"]
    with pytest.raises(UserError, match="Invalid arguments"):
        await gate.approvals.approve(approval_id, "manager", {"order_id": "bad", "amount": "1"})
    request = await gate.approvals.approve(
        approval_id, "manager", {"order_id": "ORD-00000001", "amount": "3000.00"}
    )
    assert request.approved_hash != request.call_hash
    result = await gate.call(refund_call(), alice, run, approval_id=approval_id)
    assert not result.is_error
    assert shop.refunds == [{"order_id": "ORD-00000001", "amount": "3000.00", "large": True}]


async def test_an_approval_id_for_an_allowed_call_is_ignored_not_consumed(shop, stores, alice):
    gate = make_gate(shop, stores)
    approval_id = (await gate.call(refund_call(), alice, gate.new_run(alice))).error.details["approval_id"]
    await gate.approvals.approve(approval_id, "manager")
    read = await gate.call(
        ToolCall(id="r", name="shop.get_order", arguments={"order_id": "ORD-00000001"}),
        alice,
        approval_id=approval_id,
    )
    assert not read.is_error
    assert (await gate.approvals.get(approval_id)).status == "approved"
