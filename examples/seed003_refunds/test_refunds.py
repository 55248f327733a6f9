"""Seed 003's refund: exact decimals, patterns, approval bound to arguments, runtime idempotency."""

import anyio
import pytest
from refunds import Backend, build, story

from maitre import Gate, Principal, ToolCall

ALICE = Principal(user="alice", tenant="acme")
MANAGER = Principal(user="maria", tenant="acme")


def refund_call(**request):
    base = {"order_id": "ORD-00001042", "reason": "not_received", "amount": "1200.00"}
    return ToolCall(id="c", name="support.create_refund_request", arguments={"request": {**base, **request}})


def test_the_story_approves_once_and_replays_the_retry():
    lines = anyio.run(story)
    assert lines[0].startswith("1. APPROVAL_REQUIRED")
    assert "RF-00001" in lines[1] and "pending_review" in lines[1]
    assert "replayed=True" in lines[2]
    assert lines[3].endswith("refunds created: 1")


@pytest.mark.parametrize(
    ("request_fields", "fragment"),
    [
        ({"order_id": "A1042"}, "^ORD-[0-9]{8}$"),
        ({"reason": "angry"}, '"duplicate_charge", "not_received"'),
        ({"amount": "12.345"}, "2 decimal places"),
        ({"amount": "-5"}, "greater than 0"),
        ({"idempotency_key": "model-made-key-0001"}, "Unknown argument 'idempotency_key'"),
    ],
)
def test_bad_refund_requests_teach(request_fields, fragment):
    gate = Gate(build(Backend()))
    result = anyio.run(gate.call, refund_call(**request_fields), ALICE)
    assert result.error.code == "INVALID_ARGUMENTS"
    assert fragment in result.content


def test_the_amount_is_an_exact_decimal_and_another_tenants_order_is_denied():
    backend = Backend()
    gate = Gate(build(backend))

    async def main():
        first = await gate.call(refund_call(amount="0.10"), ALICE)
        await gate.approvals.approve(first.error.details["approval_id"], MANAGER)
        await gate.call(refund_call(amount="0.10"), ALICE, approval_id=first.error.details["approval_id"])
        foreign = await gate.call(refund_call(order_id="ORD-00002001"), ALICE)
        return foreign

    foreign = anyio.run(main)
    (stored,) = backend.refunds.values()
    assert str(stored.amount) == "0.10"
    assert foreign.error.code == "PERMISSION_DENIED"
    schema = build(Backend()).get("support.create_refund_request").input_schema
    assert schema["$defs"]["RefundRequest"]["properties"]["amount"]["type"] == "string"


def test_support_tools_read_only_status_and_a_draft_that_needs_confirmation():
    backend = Backend()
    gate = Gate(build(backend))

    async def main():
        status = await gate.call(
            ToolCall(id="s", name="support.get_ticket_status", arguments={"ticket_id": "T-123456"}), ALICE
        )
        draft = await gate.call(
            ToolCall(
                id="d",
                name="support.create_ticket_draft",
                arguments={"title": "Refund not received", "category": "billing"},
            ),
            ALICE,
        )
        submit = ToolCall(
            id="x", name="support.submit_ticket_draft", arguments={"draft_id": draft.structured["draft_id"]}
        )
        waiting = await gate.call(submit, ALICE)
        await gate.approvals.approve(waiting.error.details["approval_id"], MANAGER)
        done = await gate.call(submit, ALICE, approval_id=waiting.error.details["approval_id"])
        return status, draft, waiting, done

    status, draft, waiting, done = anyio.run(main)
    assert status.structured["status"] == "open"
    assert draft.structured["requires_user_confirmation"] is True
    assert waiting.error.code == "APPROVAL_REQUIRED" and done.structured["status"] == "submitted"
    assert backend.submitted == ["D-000001"]
    tools = {t.name: t for t in build(Backend())}
    assert tools["support.get_ticket_status"].effect == "read"
