"""A support agent to evaluate with `maitre eval`: seed 003's ticket tools, a refund, a callback.

    maitre eval examples/evals/cases.jsonl --agent examples/evals/agent.py:make_agent --trials 3

The model is a `ScriptedModel`: keyword rules standing in for a language model, so the example
runs offline. It is a deliberately imperfect agent, so the report has something to show:

- asked where an order is, it also searches the knowledge base (over-calling: the case allows one
  call, so it fails every trial, and selection precision drops);
- on every third trial (a counter across trials, standing in for a model's sampling) it writes a
  callback date as `07/22/2026`, which is ambiguous and never matches a date: that case passes
  2 trials in 3, so pass^3 is lower than pass^1.

`--model test` runs the same cases with `maitre.testing.TestModel` instead, and `--model
anthropic` (with ANTHROPIC_API_KEY set) with a real model.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field

from maitre import Agent, Toolbox, ToolError
from maitre.messages import ToolResultMessage, UserMessage
from maitre.models import Rule, ScriptedModel, after_tool, call, last_user_says
from maitre.policy import DefaultPolicy

box = Toolbox("support")
TicketId = Annotated[str, Field(pattern=r"^T-[0-9]{6}$", description="Ticket id, for example T-123456")]
OrderId = Annotated[str, Field(pattern=r"^A[0-9]{4}$", description="The letter A then 4 digits, like A1042")]
TICKETS = {"T-123456": "open", "T-000124": "resolved"}
_trials = itertools.count()


@box.tool
def get_ticket_status(ticket_id: TicketId) -> dict[str, str]:
    """Query a ticket's status. Read-only. Not for creating tickets."""
    if ticket_id not in TICKETS:
        raise ToolError("NOT_FOUND", f"No ticket {ticket_id}. Check the id with the user.")
    return {"ticket_id": ticket_id, "status": TICKETS[ticket_id]}


@box.tool(effect="write", risk="medium", requires_approval=True)
def create_ticket_draft(
    title: Annotated[str, Field(min_length=5, max_length=120)],
    category: Literal["billing", "technical", "other"] = "other",
) -> dict[str, str]:
    """Create a ticket draft (not submitted). Needs the user's explicit confirmation first."""
    return {"draft_id": "D-000001", "title": title, "category": category}


@box.tool(tags=("retrieval",))  # a stored-fact lookup: routing evidence for RETRIEVE (maitre.routing)
def search_kb(query: Annotated[str, Field(min_length=3, max_length=200)]) -> list[str]:
    """Search the help articles. Use it for how-to questions, not for a customer's own data."""
    return [f"How to: {query}"]


@box.tool
def get_order(order_id: OrderId) -> dict[str, str]:
    """Look up one order by its id (status and delivery)."""
    return {"order_id": order_id, "status": "delivered", "total": "40.00"}


@box.tool(effect="write", risk="high")
def issue_refund(
    order_id: OrderId,
    amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)],
    reason: Literal["damaged", "wrong_item", "late"],
) -> str:
    """Refund an order after looking it up. A person approves every refund."""
    return f"refunded {amount} on {order_id}"


@box.tool(effect="write", risk="low")
def schedule_callback(day: dt.date, topic: Annotated[str, Field(max_length=80)] = "support") -> str:
    """Book a phone call back from the support team on a given day."""
    return f"callback booked for {day.isoformat()}"


def _said(request: Any) -> str:
    return next(m.content for m in reversed(request.messages) if isinstance(m, UserMessage))


def _first(pattern: str, text: str, default: str = "") -> str:
    found = re.search(pattern, text)
    return found.group(0) if found else default


def _scripted(trial: int) -> ScriptedModel:
    def callback(request: Any) -> Any:
        day = dt.datetime.strptime(_first(r"\d{1,2} \w+ \d{4}", _said(request)), "%d %B %Y").date()
        written = day.strftime("%m/%d/%Y") if trial % 3 == 2 else day.isoformat()
        return call("support.schedule_callback", day=written)

    def refund(request: Any) -> Any:
        text = _said(request)
        return call(
            "support.issue_refund",
            order_id=_first(r"A\d{4}", text),
            amount=_first(r"\d+\.\d{2}", text),
            reason="damaged" if "damaged" in text else "late",
        )

    return ScriptedModel(
        [
            Rule(
                "status",
                when=last_user_says("status of ticket"),
                then=lambda r: call("support.get_ticket_status", ticket_id=_first(r"T-\d+", _said(r))),
            ),
            Rule(
                "draft",
                when=last_user_says("open a ticket"),
                then=lambda r: call(
                    "support.create_ticket_draft",
                    title=_said(r).split(":", 1)[-1].strip()[:120],
                    category="billing" if "bill" in _said(r) else "technical",
                ),
            ),
            Rule(
                "look up first",
                when=last_user_says("refund"),
                then=lambda r: call("support.get_order", order_id=_first(r"A\d{4}", _said(r))),
            ),
            Rule(
                "refund",
                when=lambda r: after_tool("get_order", ok=True)(r) and "refund" in _said(r).lower(),
                then=refund,
            ),
            Rule(
                "where is it",  # over-calls: a knowledge-base search nobody asked for
                when=last_user_says("where is my order"),
                then=lambda r: [
                    call("support.get_order", order_id=_first(r"A\d{4}", _said(r))),
                    call("support.search_kb", query="delivery times"),
                ],
            ),
            Rule("callback", when=last_user_says("call me"), then=callback),
            Rule(
                "how to",
                when=last_user_says("how do i"),
                then=lambda r: call("support.search_kb", query=_said(r)),
            ),
            Rule(
                "done",
                when=lambda r: bool(r.messages) and isinstance(r.messages[-1], ToolResultMessage),
                then="Done: here is what I found.",
            ),
            Rule("answer", when=lambda r: True, then="Glad to help."),
        ]
    )


def make_agent(stores: Any) -> Agent:
    """The agent under test: `maitre eval --agent examples/evals/agent.py:make_agent` calls this once
    per trial with fresh in-memory stores."""
    return Agent(
        _scripted(next(_trials)),
        box,
        stores=stores,
        policy=DefaultPolicy(),
        notes=False,
        system="You are a support agent.",
    )
