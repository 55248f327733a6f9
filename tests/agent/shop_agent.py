"""A support agent used by the agent tests and by the cross-process resume test (`make_agent(store)`)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from maitre import Toolbox, ToolError
from maitre.agent import Agent, Limits
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says, tool_error

LEDGER = Path(__file__).with_name(".ledger")  # overridden by tests through set_ledger()


def set_ledger(path: Path) -> None:
    global LEDGER
    LEDGER = path


def shop_box() -> Toolbox:
    box = Toolbox("shop")

    @box.tool
    def get_order(
        order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$", description="like A1042")],
    ) -> dict[str, Any]:
        """Look up an order."""
        if order_id == "A0000":
            raise ToolError("NOT_FOUND", "No order A0000.")
        return {"order_id": order_id, "status": "delivered", "total_inr": 1200}

    @box.tool(effect="write", risk="high", business_key=("order_id",))
    def issue_refund(
        order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")],
        amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)],
    ) -> str:
        """Refund an order (needs approval)."""
        with LEDGER.open("a") as f:
            f.write(f"{order_id} {amount}\n")
        return f"Refunded {amount} INR for {order_id}."

    return box


def refund_model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                "look up",
                when=last_user_says("refund"),
                then=lambda r: call("shop.get_order", order_id="A1042"),
            ),
            Rule(
                "refund",
                when=after_tool("get_order", ok=True),
                then=lambda r: call("shop.issue_refund", order_id="A1042", amount="1200.00"),
            ),
            Rule(
                "denied",
                when=tool_error("APPROVAL_DENIED"),
                then=lambda r: f"Not refunded: {last_tool_result(r).content}",
            ),
            Rule(
                "done",
                when=after_tool("issue_refund", ok=True),
                then=lambda r: f"Done: {last_tool_result(r).content}",
            ),
        ]
    )


def make_agent(store: Any) -> Agent:
    return Agent(refund_model(), shop_box(), stores=store, limits=Limits(max_steps=6))
