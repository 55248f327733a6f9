"""Typed functions become strict JSON Schema 2020-12 tools."""

from datetime import date
from decimal import Decimal
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from maitre import Principal, RunContext, Toolbox, ToolDefinitionError
from maitre.tools.schema import SCHEMA_DIALECT


def test_hints_annotated_fields_and_docstring_become_a_strict_schema():
    box = Toolbox()

    @box.tool
    def find_events(
        city: Annotated[str, Field(min_length=2, max_length=40)],
        kind: Literal["outdoor", "indoor"],
        max_price_inr: Annotated[int, Field(ge=0, le=100_000)] = 100_000,
        on: date | None = None,
    ) -> dict:
        """List Saturday's events in a city. Use it to plan a day. Do not use it for weather.

        Args:
            city: City name, for example Pune.
            max_price_inr: Only events at or below this price.
        """
        return {}

    schema = box.get("find_events").input_schema
    assert schema["$schema"] == SCHEMA_DIALECT
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["city", "kind"]
    props = schema["properties"]
    assert props["city"] == {
        "type": "string",
        "minLength": 2,
        "maxLength": 40,
        "description": "City name, for example Pune.",
    }
    assert props["kind"]["enum"] == ["outdoor", "indoor"]
    assert props["max_price_inr"]["minimum"] == 0 and props["max_price_inr"]["maximum"] == 100_000
    assert "title" not in str(schema)
    assert box.get("find_events").description.startswith("List Saturday's events in a city.")
    assert "Args" not in box.get("find_events").description


def test_decimal_money_is_an_exact_decimal_string_never_a_float():
    box = Toolbox()

    @box.tool(effect="write")
    def issue_refund(
        amount: Annotated[Decimal, Field(gt=0, le=5000, max_digits=10, decimal_places=2)],
    ) -> str:
        """Refund."""
        return str(amount)

    prop = box.get("issue_refund").input_schema["properties"]["amount"]
    assert prop["type"] == "string"
    assert prop["pattern"] == r"^\d{1,8}(\.\d{1,2})?$"
    assert "2 decimal places" in prop["description"]
    assert "number" not in str(prop)


def test_context_parameters_are_injected_and_hidden_from_the_schema():
    box = Toolbox()

    @box.tool
    def whoami(principal: Principal, run: RunContext, verbose: bool = False) -> str:
        """Say who calls."""
        return principal.user

    tool = box.get("whoami")
    assert list(tool.input_schema["properties"]) == ["verbose"]
    assert set(tool.context_params) == {"principal", "run"}


def test_nested_models_are_closed_and_output_models_give_an_output_schema():
    class Item(BaseModel):
        sku: Annotated[str, Field(pattern=r"^SKU-\d{3}$")]
        qty: int

    class Receipt(BaseModel):
        order_id: str
        total: Decimal

    box = Toolbox("shop")

    @box.tool(effect="write")
    def create_order(items: list[Item]) -> Receipt:
        """Create an order."""
        return Receipt(order_id="A1", total=Decimal("1.00"))

    tool = box.get("shop.create_order")
    item_schema = tool.input_schema["$defs"]["Item"]
    assert item_schema["additionalProperties"] is False
    assert tool.output_schema["properties"]["order_id"]["type"] == "string"


def test_functions_that_cannot_be_described_are_refused_with_a_clear_error():
    box = Toolbox()
    with pytest.raises(ToolDefinitionError, match="no type annotation"):

        @box.tool
        def untyped(x):  # type: ignore[no-untyped-def]
            """x"""

    with pytest.raises(ToolDefinitionError, match=r"\*args"):

        @box.tool
        def star(*args: int) -> None:
            """x"""

    with pytest.raises(ToolDefinitionError, match="timeout"):
        box.add_tool(lambda: None, name="bad", timeout=0)


def test_stores_and_the_minted_key_are_injected_too():
    from maitre import IdempotencyKey
    from maitre.stores import Stores

    box = Toolbox()

    @box.tool(effect="write")
    def record(note: str, stores: Stores, key: IdempotencyKey) -> str:
        """Record a note."""
        return key

    tool = box.get("record")
    assert list(tool.input_schema["properties"]) == ["note"]
    assert set(tool.context_params) == {"stores", "key"}
