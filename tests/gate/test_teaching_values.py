"""Teaching examples keep the model's values (issue 19, item 3): only what is wrong or missing is
filled, flat fields that belong in a nested model are moved into it, and what maitre made up is a
placeholder no one mistakes for data - and is named as one."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from maitre import Gate, Principal, Toolbox, ToolCall

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")

OrderId = Annotated[str, Field(pattern=r"^ORD-[0-9]{6}$", description="ORD- then 6 digits")]
Amount = Annotated[Decimal, Field(gt=0, le=100_000, decimal_places=2)]


class RefundRequest(BaseModel):
    amount: Amount
    reason: Literal["duplicate_charge", "damaged", "late"]
    note: str


def box(ran: list[dict[str, Any]]) -> Toolbox:
    shop = Toolbox()

    @shop.tool(effect="write")
    def refund(
        order_id: OrderId, amount: Amount, reason: Literal["duplicate_charge", "damaged", "late"]
    ) -> str:
        """Refund an order."""
        ran.append({"order_id": order_id, "amount": str(amount), "reason": reason})
        return "queued"

    @shop.tool(effect="write")
    def refund_request(order_id: OrderId, request: RefundRequest) -> str:
        """Refund an order, the details in a request."""
        ran.append({"order_id": order_id, **request.model_dump(mode="json")})
        return "queued"

    @shop.tool
    def find(city: str, limit: int = 10) -> list[str]:
        """Find events in a city."""
        return []

    return shop


async def ask(gate: Gate, name: str, arguments: Any) -> Any:
    return await gate.call(ToolCall(id="c1", name=name, arguments=arguments), ALICE)


def arguments_of(example: str, name: str) -> dict[str, Any]:
    return json.loads(example.removeprefix(f"{name}(").removesuffix(")"))


async def test_the_models_valid_amount_and_reason_survive_a_wrong_order_id() -> None:
    """Issue 19: the example replaced a correct 1,200.00 refund with a made-up 10.00 one."""
    ran: list[dict[str, Any]] = []
    gate = Gate(box(ran))
    result = await ask(gate, "refund", {"order_id": "12345", "amount": "1200.00", "reason": "damaged"})
    assert result.error.code == "INVALID_ARGUMENTS"
    example = arguments_of(result.error.details["example"], "refund")
    assert example["amount"] == "1200.00" and example["reason"] == "damaged"
    assert example["order_id"] != "12345"
    assert result.error.details["placeholders"] == ["$.order_id"]
    assert "$.order_id is a placeholder" in result.content and "send the real value" in result.content


async def test_flat_fields_that_belong_in_the_nested_model_are_moved_into_it_not_replaced() -> None:
    ran: list[dict[str, Any]] = []
    gate = Gate(box(ran))
    sent = {
        "order_id": "ORD-123456",
        "amount": "1200.00",
        "reason": "duplicate_charge",
        "note": "charged twice",
    }
    result = await ask(gate, "refund_request", sent)
    assert result.error.code == "INVALID_ARGUMENTS"
    example = arguments_of(result.error.details["example"], "refund_request")
    assert example == {
        "order_id": "ORD-123456",
        "request": {"amount": "1200.00", "reason": "duplicate_charge", "note": "charged twice"},
    }
    assert "placeholders" not in result.error.details, "nothing was made up"
    again = await ask(gate, "refund_request", example)
    assert not again.is_error
    assert ran == [
        {"order_id": "ORD-123456", "amount": "1200.00", "reason": "duplicate_charge", "note": "charged twice"}
    ]


async def test_inside_a_nested_model_only_the_wrong_field_is_filled() -> None:
    gate = Gate(box([]))
    sent = {"order_id": "ORD-123456", "request": {"amount": "1200.00", "reason": "angry", "note": "twice"}}
    result = await ask(gate, "refund_request", sent)
    example = arguments_of(result.error.details["example"], "refund_request")
    assert example["request"]["amount"] == "1200.00" and example["request"]["note"] == "twice"
    assert example["request"]["reason"] in ("duplicate_charge", "damaged", "late")
    assert result.error.details["placeholders"] == ["$.request.reason"]


async def test_a_missing_free_text_field_is_a_placeholder_that_cannot_pass_for_data() -> None:
    gate = Gate(box([]))
    result = await ask(
        gate, "refund_request", {"order_id": "ORD-123456", "request": {"amount": "5.00", "reason": "late"}}
    )
    example = arguments_of(result.error.details["example"], "refund_request")
    assert example["request"] == {"amount": "5.00", "reason": "late", "note": "<note>"}


async def test_unknown_fields_and_wrong_optional_values_are_dropped_not_invented() -> None:
    gate = Gate(box([]))
    result = await ask(gate, "find", {"city": "Pune", "limit": "ten", "colour": "red"})
    example = arguments_of(result.error.details["example"], "find")
    assert example == {"city": "Pune"}
    assert "placeholders" not in result.error.details
