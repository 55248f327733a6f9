"""Seed 003's support server (Exercise B) on maitre: a read-only ticket query, a ticket draft that
needs the user's explicit confirmation, and the support policy as a resource.

    maitre serve examples/support_server/server.py:app --transport stdio --user alice --tenant acme

- `get_ticket_status` is read-only, takes only the ticket id (`T-` + 6 digits) and reads the
  caller's tenant from the authenticated principal - never from an argument the model fills.
- `create_ticket_draft` "mandates explicit user confirmation": it is declared
  `requires_approval=True`, so the gate stops it and the MCP door asks the user (an
  `input_required` elicitation on 2026-07-28, `elicitation/create` on 2025-11-25); the draft is
  created only after the user confirms those exact arguments, once.
- The support policy is a resource: the host decides when to put it in context.
- Logs go to stderr; on stdio, stdout carries only the protocol.
"""

from __future__ import annotations

import itertools
import logging
import sys
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from maitre import Gate, Principal, Toolbox, ToolError
from maitre.mcp.app import MCPApp
from maitre.policy import DefaultPolicy

logging.basicConfig(stream=sys.stderr, level=logging.INFO)
log = logging.getLogger("support")

TICKETS = {
    ("acme", "T-000123"): {"status": "open", "updated_at": "2026-07-22T10:00:00Z"},
    ("acme", "T-000124"): {"status": "resolved", "updated_at": "2026-07-20T08:30:00Z"},
    ("globex", "T-000900"): {"status": "open", "updated_at": "2026-07-21T12:00:00Z"},
}
DRAFTS: list[dict[str, str]] = []
_draft_ids = itertools.count(1)

POLICY = """# Support policy
- We answer within one business day.
- Refunds within 30 days of delivery; quality issues need a photo.
- Never share another customer's ticket.
"""


class TicketStatus(BaseModel):
    ticket_id: str
    status: Literal["open", "pending", "resolved"]
    updated_at: str


class TicketDraft(BaseModel):
    draft_id: str
    title: str
    category: Literal["billing", "technical", "other"]
    status: Literal["draft"]


box = Toolbox()


@box.tool
def get_ticket_status(
    ticket_id: Annotated[str, Field(pattern=r"^T-[0-9]{6}$", description="Ticket id, for example T-000123")],
    principal: Principal,
) -> TicketStatus:
    """Query a ticket's status. Read-only; does not change the ticket. Not for creating tickets."""
    found = TICKETS.get((principal.tenant, ticket_id))
    if found is None:
        raise ToolError("NOT_FOUND", f"No ticket {ticket_id} for this account. Check the id with the user.")
    log.info("status of %s read by %s", ticket_id, principal.user)
    return TicketStatus(ticket_id=ticket_id, **found)


@box.tool(effect="write", risk="medium", requires_approval=True)
def create_ticket_draft(
    title: Annotated[str, Field(min_length=5, max_length=120)],
    category: Literal["billing", "technical", "other"] = "other",
) -> TicketDraft:
    """Create a ticket draft (not submitted). Needs the user's explicit confirmation first."""
    draft = {"draft_id": f"D-{next(_draft_ids):06d}", "title": title, "category": category, "status": "draft"}
    DRAFTS.append(draft)
    return TicketDraft(**draft)


# The user confirming their own draft is the point here, so self-approval is allowed.
gate = Gate(box, policy=DefaultPolicy(allow_self_approval=True))
app = MCPApp(
    box,
    name="support-tools",
    version="1.0",
    gate=gate,
    instructions="Support tools: read ticket status; draft tickets after the user confirms.",
)


@app.resource(
    "support://policy", name="support_policy", description="The support policy", mime_type="text/markdown"
)
def support_policy() -> str:
    return POLICY
