"""Seed 000's tool registry, on maitre: get_order and issue_refund, the same six calls, the same outcomes.

Run it: `.venv/bin/python examples/seed000_registry/registry.py`
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

import anyio
from pydantic import Field

from maitre import Gate, Principal, Toolbox, ToolCall, ToolResult

OrderId = Annotated[str, Field(pattern=r"^A\d{4}$", description="the letter A then 4 digits, like A1042")]

box = Toolbox()


@box.tool
def get_order(order_id: OrderId) -> str:
    """Look up one order by id. Use for status or delivery questions. Do not use it to search by customer name."""
    return f"Order {order_id}: shipped, arrives Friday, total 1200 INR."


@box.tool(effect="write", risk="medium")
def issue_refund(
    order_id: OrderId,
    amount: Annotated[Decimal, Field(ge=1, le=5000, decimal_places=2, description="INR, 1 to 5000")],
    reason: Annotated[Literal["damaged", "wrong_item", "late"], Field(description="why")],
) -> str:
    """Refund an order. Use only after the policy check passed. Do not use it to look up an order."""
    return f"Refund of {amount} INR queued for {order_id} ({reason})."


CALLS = [
    ("get_ordr", {"order_id": "A1042"}),
    ("get_order", {"id": "A1042"}),
    ("get_order", {"order_id": "1042"}),
    ("issue_refund", {"order_id": "A1042", "amount": 9000, "reason": "angry"}),
    ("issue_refund", {"order_id": "A1042", "amount": 1200, "reason": "damaged"}),
    ("get_order", {"order_id": "A1042"}),
]


async def run_calls() -> list[ToolResult]:
    gate = Gate(box)
    principal = Principal(user="u1")
    run = gate.new_run(principal)
    results = []
    for i, (name, arguments) in enumerate(CALLS, start=1):
        results.append(
            await gate.call(ToolCall(id=f"call_{i}", name=name, arguments=arguments), principal, run)
        )
    return results


def main() -> None:
    import sys

    print("tools sent to the model:", [d["name"] for d in box.definitions("anthropic")], file=sys.stderr)
    for (name, arguments), result in zip(CALLS, anyio.run(run_calls), strict=True):
        print(f"\ncall  : {name}({arguments})", file=sys.stderr)
        print("error :" if result.is_error else "result:", result.content, file=sys.stderr)


if __name__ == "__main__":
    main()
