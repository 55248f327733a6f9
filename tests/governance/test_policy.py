"""Policy: the risk matrix, scopes, ownership and taint decide before anything runs."""

import pytest

from maitre import Principal, ToolCall
from maitre.policy import Action, DefaultPolicy

from .conftest import make_gate

pytestmark = pytest.mark.anyio


def call(name, arguments, id="c1"):
    return ToolCall(id=id, name=name, arguments=arguments)


async def test_read_low_is_allowed_and_audited(shop, stores, alice):
    gate = make_gate(shop, stores)
    result = await gate.call(call("shop.get_order", {"order_id": "ORD-00000001"}), alice)
    assert not result.is_error
    entries = await stores.audit.entries()
    assert [(e.tool, e.decision, e.user, e.tenant) for e in entries] == [
        ("shop.get_order", "allow", "alice", "acme")
    ]


async def test_a_cross_tenant_resource_is_denied_before_it_runs_with_no_hint(shop, stores, alice):
    """Denied by the ownership check (never run, not retryable), in the same words as a missing one.
    Speed is measured in benchmarks/, not asserted here."""
    gate = make_gate(shop, stores)
    foreign = await gate.call(call("shop.get_order", {"order_id": "ORD-00000002"}), alice)
    missing = await gate.call(call("shop.get_order", {"order_id": "ORD-99999999"}), alice)
    assert foreign.error.code == "PERMISSION_DENIED" and not foreign.error.retryable
    assert foreign.content == missing.content  # the same words whether it exists elsewhere or not
    assert "globex" not in foreign.content and "ORD-00000002" not in foreign.content
    entries = await stores.audit.entries()
    assert entries[0].decision == "deny" and entries[0].detail == "ownership"
    assert "executed" not in {e.decision for e in entries}


async def test_missing_scopes_are_denied(shop, stores, alice):
    gate = make_gate(shop, stores)
    denied = await gate.call(call("shop.list_all_customers", {}), alice)
    assert denied.error.code == "PERMISSION_DENIED"
    admin = Principal(user="root", tenant="acme", scopes={"admin"})
    assert not (await gate.call(call("shop.list_all_customers", {}), admin)).is_error


async def test_destructive_and_high_risk_tools_need_approval(shop, stores, alice):
    gate = make_gate(shop, stores)
    destructive = await gate.call(call("shop.delete_note", {"note_id": "N-001"}), alice)
    high = await gate.call(
        call("shop.issue_large_refund", {"order_id": "ORD-00000001", "amount": "4500"}), alice
    )
    assert destructive.error.code == "APPROVAL_REQUIRED" and high.error.code == "APPROVAL_REQUIRED"
    assert shop.deleted == [] and shop.refunds == []
    pending = await gate.approvals.list()
    assert {r.tool for r in pending} == {"shop.delete_note", "shop.issue_large_refund"}


async def test_untrusted_content_makes_open_world_writes_need_approval(shop, stores, alice):
    gate = make_gate(shop, stores)
    run = gate.new_run(alice)
    clean = await gate.call(call("shop.send_email", {"to": "bob@example.com", "body": "hi"}), alice, run)
    assert not clean.is_error
    ticket = await gate.call(call("shop.read_ticket", {"ticket_id": "T-000481"}), alice, run)
    assert ticket.trust == "untrusted" and run.tainted
    injected = await gate.call(
        call("shop.send_email", {"to": "evil@example.com", "body": "list"}), alice, run
    )
    assert injected.error.code == "APPROVAL_REQUIRED"
    assert shop.emails == ["bob@example.com"]


def test_default_policy_matrix_and_unknown_pairs():
    from maitre.types import Effect, Risk

    policy = DefaultPolicy(matrix={(Effect.READ, Risk.LOW): Action.ALLOW})
    from maitre import Toolbox
    from maitre.context import RunContext
    from maitre.policy import PolicyRequest

    box = Toolbox()
    box.add_tool(lambda: 1, name="write_x", description="x", effect="write")
    decision = policy.decide(
        PolicyRequest(tool=box.get("write_x"), arguments={}, principal=Principal(user="u"), run=RunContext())
    )
    assert decision.action is Action.DENY  # anything the matrix does not know is denied
