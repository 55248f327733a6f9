"""Seed 004's order loop (`run_tool_loop`), on maitre.

Seed 004 writes the loop by hand: allowlist check, schema validation, IAM and risk policy, pause for
approval, an executor with timeout/idempotency/audit, results mapped back by call id, and
`raise RuntimeError("agent exceeded maximum tool steps")`. Here the gate does the checks and the
agent loop does the rest - and a step limit ends the run with a message, not an exception.

Run it: `.venv/bin/python examples/seed004_order_loop/order_loop.py`
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from maitre import Principal, Toolbox, ToolError
from maitre.agent import Agent, ApprovalDecision, Limits, Run
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says, tool_error
from maitre.stores import Stores

ORDERS = {"ORD-00001042": {"status": "delivered", "tenant": "acme", "total": "1200.00"}}
OrderId = Annotated[str, Field(pattern=r"^ORD-[0-9]{8}$", description="Order id like ORD-00001042")]


def build(refunds: list[dict[str, Any]]) -> Toolbox:
    box = Toolbox("orders")

    def owns(principal: Principal, arguments: dict[str, Any]) -> bool:
        order = ORDERS.get(arguments.get("order_id", ""))
        return order is not None and order["tenant"] == principal.tenant

    @box.tool(owner=owns)
    def get_order_status(order_id: OrderId) -> dict[str, Any]:
        """Get one order's status. Use it for status questions. Do not use it to search orders."""
        order = ORDERS.get(order_id)
        if order is None:
            raise ToolError("NOT_FOUND", f"No order {order_id}.")
        return {"order_id": order_id, "status": order["status"], "total": order["total"]}

    @box.tool(effect="write", risk="high", owner=owns, business_key=("order_id",))
    def create_refund_request(
        order_id: OrderId,
        reason: Literal["duplicate_charge", "not_received", "quality_issue", "other"],
        amount: Annotated[Decimal, Field(gt=0, max_digits=10, decimal_places=2)],
    ) -> dict[str, Any]:
        """Create a refund request. Use it after the status was checked. Do not use it to check status."""
        refunds.append({"order_id": order_id, "reason": reason, "amount": str(amount)})
        return {"request_id": f"RF-{len(refunds):05d}", "status": "pending_review"}

    return box


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                "typo first",
                when=last_user_says("refund"),
                then=lambda r: call("orders.get_order_stat", order_id="ORD-00001042"),
            ),
            Rule(
                "fix the name",
                when=tool_error("UNKNOWN_TOOL"),
                then=lambda r: call("orders.get_order_status", order_id="ORD-00001042"),
            ),
            Rule(
                "refund",
                when=after_tool("get_order_status", ok=True),
                then=lambda r: call(
                    "orders.create_refund_request",
                    order_id="ORD-00001042",
                    reason="quality_issue",
                    amount="1200.00",
                ),
            ),
            Rule(
                "report",
                when=after_tool("create_refund_request"),
                then=lambda r: f"Refund: {last_tool_result(r).content}",
            ),
        ]
    )


async def run_order_loop(store: Stores | None = None) -> tuple[Run, Run, list[dict[str, Any]]]:
    refunds: list[dict[str, Any]] = []
    agent = Agent(model(), build(refunds), stores=store, limits=Limits(max_steps=6))
    customer = Principal(user="alice", tenant="acme")
    paused = await agent.run("My order ORD-00001042 arrived broken, please refund it.", customer)
    decision = ApprovalDecision.approved(Principal(user="maria", tenant="acme"))
    finished = await agent.resume(paused.id, decisions={paused.pending[0].approval_id: decision})
    return paused, finished, refunds


if __name__ == "__main__":
    paused, finished, refunds = anyio.run(run_order_loop)
    print(paused.status, paused.final_text, file=sys.stderr)
    print(finished.status, finished.final_text, refunds, file=sys.stderr)
