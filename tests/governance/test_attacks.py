"""Seed 003, exercise C: each attack is tried, must fail, executes nothing, and leaves an audit trail."""

import pytest

from maitre import Principal, ToolCall
from maitre.audit import verify_store

from .conftest import make_gate

pytestmark = pytest.mark.anyio


async def audit_of(stores):
    entries = await stores.audit.entries()
    assert (await verify_store(stores.audit)).ok
    return entries


async def test_unknown_tool(shop, stores, alice):
    gate = make_gate(shop, stores)
    result = await gate.call(
        ToolCall(id="x", name="shop.execute_sql", arguments={"sql": "DROP TABLE orders"}), alice
    )
    assert result.error.code == "UNKNOWN_TOOL"
    (entry,) = await audit_of(stores)
    assert entry.tool == "shop.execute_sql" and entry.error_code == "UNKNOWN_TOOL"


async def test_cross_tenant_id_on_a_write(shop, stores, alice):
    gate = make_gate(shop, stores)
    args = {"order_id": "ORD-00000002", "amount": "10.00", "reason": "other"}  # globex's order
    result = await gate.call(ToolCall(id="x", name="shop.create_refund", arguments=args), alice)
    assert result.error.code == "PERMISSION_DENIED" and shop.refunds == []
    (entry,) = await audit_of(stores)
    assert entry.decision == "deny" and entry.detail == "ownership"


async def test_duplicate_write_in_a_loop_executes_once(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    args = {"order_id": "ORD-00000001", "amount": "50.00", "reason": "not_received"}
    codes = []
    for i in range(5):
        result = await gate.call(ToolCall(id=f"c{i}", name="shop.create_refund", arguments=args), alice, run)
        codes.append("replayed" if result.replayed else (result.error.code if result.error else "ok"))
    assert len(shop.refunds) == 1
    assert codes == ["ok", "replayed", "LOOP_DETECTED", "LOOP_DETECTED", "LOOP_DETECTED"]
    entries = await audit_of(stores)
    assert [e.replayed for e in entries].count(True) == 1 and len(entries) == 5


async def test_approval_bypass_without_an_approval(shop, stores, alice):
    gate = make_gate(shop, stores)
    result = await gate.call(ToolCall(id="x", name="shop.delete_note", arguments={"note_id": "N-001"}), alice)
    assert result.error.code == "APPROVAL_REQUIRED" and shop.deleted == []
    (entry,) = await audit_of(stores)
    assert entry.decision == "approval_required" and entry.approval_id == result.error.details["approval_id"]


async def test_approval_bypass_with_a_forged_or_foreign_approval_id(shop, stores, alice):
    gate = make_gate(shop, stores)
    forged = await gate.call(
        ToolCall(id="x", name="shop.delete_note", arguments={"note_id": "N-001"}),
        alice,
        approval_id="apr_forged",
    )
    assert forged.error.code == "INVALID_STATE" and shop.deleted == []
    other = Principal(user="eve", tenant="globex")
    approval_id = (
        await gate.call(ToolCall(id="y", name="shop.delete_note", arguments={"note_id": "N-001"}), other)
    ).error.details["approval_id"]
    await gate.approvals.approve(approval_id, "globex-manager")
    stolen = await gate.call(
        ToolCall(id="z", name="shop.delete_note", arguments={"note_id": "N-001"}),
        alice,
        approval_id=approval_id,
    )
    assert stolen.error.code == "INVALID_STATE" and shop.deleted == []
    decisions = [e.decision for e in await audit_of(stores)]
    assert decisions == ["approval_invalid", "approval_required", "approval_invalid"]


MALICIOUS = [
    {"note_id": "../../etc/passwd"},
    {"note_id": "N-001; DROP TABLE notes;--"},
    {"note_id": "N-001' OR '1'='1"},
    {"note_id": "N-" + "1" * 100_000},
    {"note_id": "Ν-001"},  # Greek capital Nu, not N
    {"note_id": "N-００１"},  # full-width digits
    {"note_id": "N-001\u200b"},  # zero-width space
    {"note_id": "N-001", "note_id ": "x"},
]


@pytest.mark.parametrize("arguments", MALICIOUS, ids=range(len(MALICIOUS)))
async def test_malicious_arguments_never_reach_the_tool(shop, stores, alice, arguments):
    gate = make_gate(shop, stores)
    result = await gate.call(ToolCall(id="x", name="shop.delete_note", arguments=arguments), alice)
    assert result.error.code == "INVALID_ARGUMENTS"
    assert shop.deleted == []
    assert (await gate.approvals.list()) == []  # nobody is even asked to approve a malformed call
    (entry,) = await audit_of(stores)
    assert (
        entry.error_code == "INVALID_ARGUMENTS" and len(entry.arguments or "") <= 64
    )  # a digest, not the payload


async def test_sql_looking_text_is_only_data(shop, stores, alice):
    gate = make_gate(shop, stores)
    body = "'); DROP TABLE emails; --"
    result = await gate.call(
        ToolCall(id="x", name="shop.send_email", arguments={"to": "bob@example.com", "body": body}), alice
    )
    assert not result.is_error and shop.emails == ["bob@example.com"]
    entries = await audit_of(stores)
    assert body not in str(entries[0].to_dict())  # arguments are stored as a digest
