"""A tiny shop toolbox for the MCP tests."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from maitre import Principal, Toolbox


class Order(BaseModel):
    order_id: str
    status: str
    tenant: str


def shop_box() -> Toolbox:
    box = Toolbox()

    @box.tool
    def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")], principal: Principal) -> Order:
        """Look up one order by its id. Use it for status questions; not for refunds."""
        return Order(order_id=order_id, status="shipped", tenant=principal.tenant)

    @box.tool(effect="write", risk="medium")
    def add_note(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")], note: str) -> str:
        """Add a note to an order. Use it to record what the customer said."""
        return f"noted on {order_id}"

    @box.tool(effect="destructive", risk="high", open_world=True)
    def delete_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
        """Delete an order for good. Use it only when the customer asks to erase it."""
        return f"deleted {order_id}"

    return box
