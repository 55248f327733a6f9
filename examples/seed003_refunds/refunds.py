"""Seed 003's governed refund and support tools, on maitre.

- `RefundRequest`: `ORD-` + 8 digits, a reason enum, a Decimal amount with 2 places (never a float).
  Seed 003's model also carries an `idempotency_key` field; here the *runtime* mints it (the model
  never sees or writes it) and hands it to the tool through an `IdempotencyKey` parameter.
- `create_refund_request` is a high-risk write: policy makes it wait for a human approval bound to
  the exact arguments; once approved it runs once, and a retry replays the stored result.
- Support tools: a read-only ticket status, and a ticket draft whose submission needs confirmation.

Run it: `.venv/bin/python examples/seed003_refunds/refunds.py`
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Annotated, Literal

import anyio
from pydantic import BaseModel, Field

from maitre import CallOptions, Gate, IdempotencyKey, Principal, Toolbox, ToolCall, ToolError


class RefundRequest(BaseModel):
    order_id: str = Field(pattern=r"^ORD-[0-9]{8}$")
    reason: Literal["duplicate_charge", "not_received", "quality_issue", "other"]
    amount: Decimal = Field(gt=0, max_digits=10, decimal_places=2)


class RefundResult(BaseModel):
    request_id: str
    status: Literal["pending_review", "approved", "rejected"]
    message: str


class Backend:
    """The systems behind the tools; `refunds` is the side effect we must never duplicate."""

    def __init__(self) -> None:
        self.refunds: dict[str, RefundRequest] = {}
        self.orders = {"ORD-00001042": "acme", "ORD-00002001": "globex"}
        self.tickets = {"T-123456": "open"}
        self.drafts: list[dict[str, str]] = []
        self.submitted: list[str] = []


def build(backend: Backend) -> Toolbox:
    box = Toolbox("support")

    def owns_order(principal: Principal, arguments: dict) -> bool:
        return backend.orders.get(arguments["request"]["order_id"]) == principal.tenant

    @box.tool(effect="write", risk="high", owner=owns_order, business_key=("request",))
    def create_refund_request(request: RefundRequest, key: IdempotencyKey) -> RefundResult:
        """Create a refund request for one order. Use it only after the customer confirmed the amount.
        Do not use it to look up orders or refund status."""
        if key in backend.refunds:
            raise ToolError("CONFLICT", "This refund was already created.")
        backend.refunds[key] = request
        return RefundResult(
            request_id=f"RF-{len(backend.refunds):05d}",
            status="pending_review",
            message="Refund queued for review.",
        )

    @box.tool
    def get_ticket_status(ticket_id: Annotated[str, Field(pattern=r"^T-[0-9]{6}$")]) -> dict:
        """Query a ticket's status. Use it when the user asks about a ticket. Read-only; does not change it."""
        status = backend.tickets.get(ticket_id)
        if status is None:
            raise ToolError("NOT_FOUND", f"No ticket {ticket_id}.")
        return {"ticket_id": ticket_id, "status": status, "updated_at": "2026-07-22T10:00:00Z"}

    @box.tool(effect="write", risk="low")
    def create_ticket_draft(
        title: Annotated[str, Field(min_length=5, max_length=120)],
        category: Literal["billing", "technical", "other"] = "other",
    ) -> dict:
        """Create a ticket draft without submitting it. Use it to prepare a ticket for the user to review.
        Do not use it to submit: submit_ticket_draft does that, after confirmation."""
        draft_id = f"D-{len(backend.drafts) + 1:06d}"
        backend.drafts.append({"draft_id": draft_id, "title": title, "category": category})
        return {"draft_id": draft_id, "title": title, "category": category, "status": "draft",
                "requires_user_confirmation": True}  # fmt: skip

    @box.tool(effect="write", requires_approval=True)
    def submit_ticket_draft(draft_id: Annotated[str, Field(pattern=r"^D-[0-9]{6}$")]) -> dict:
        """Submit a ticket draft. Use it only after the user confirmed the draft. Do not use it to edit."""
        backend.submitted.append(draft_id)
        return {"draft_id": draft_id, "status": "submitted"}

    return box


async def story() -> list[str]:
    backend = Backend()
    gate = Gate(build(backend))
    alice, manager = (
        Principal(user="alice", tenant="acme"),
        Principal(user="maria", tenant="acme", roles={"approver"}),
    )
    run = gate.new_run(alice)
    refund = ToolCall(
        id="c1",
        name="support.create_refund_request",
        arguments={"request": {"order_id": "ORD-00001042", "reason": "not_received", "amount": "1200.00"}},
    )
    lines = []
    first = await gate.call(refund, alice, run)
    lines.append(f"1. {first.error.code}: {first.content[:90]}...")
    ticket = first.approval  # what a person decides: tool, arguments, the rule that asked, expiry
    assert ticket is not None
    await gate.approvals.approve(ticket.approval_id, manager)
    done = await gate.call(refund, alice, run, CallOptions(approval_id=ticket.approval_id))
    lines.append(f"2. approved and executed: {done.content}")
    retry = await gate.call(refund, alice, gate.new_run(alice))
    lines.append(
        f"3. retried in a new run: replayed={retry.replayed} -> {retry.error.code if retry.error else 'ok'}"
    )
    lines.append(f"   refunds created: {len(backend.refunds)}")
    return lines


if __name__ == "__main__":
    for line in anyio.run(story):
        print(line, file=sys.stderr)
