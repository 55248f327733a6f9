"""Strict input (issue 10, item 6): text that is not Unicode, numbers JSON cannot carry, duplicate
keys and values of the wrong JSON type are INVALID_ARGUMENTS that teach, audited, never INTERNAL."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, Literal
from uuid import UUID

import pytest
import rfc8785
from pydantic import BaseModel, Field

from maitre import Gate, Principal, Tool, Toolbox, ToolCall
from maitre.audit import verify_store
from maitre.jsonutil import sha256_hex
from maitre.stores import MemoryStores
from maitre.testing import capture_calls

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme")

Amount = Annotated[Decimal, Field(ge=1, le=5000, decimal_places=2, description="INR")]


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Line(BaseModel):
    sku: str
    price: Amount


def shop(ran: list[str]) -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write")
    def refund(
        order_id: str,
        amount: Amount,
        count: int = 1,
        weight_kg: float = 0.0,
        urgent: bool = False,
        note: str = "",
        tip: Amount | None = None,
    ) -> str:
        """Refund an order."""
        ran.append("refund")
        return f"{order_id} {amount!r} {count!r} {weight_kg!r} {urgent!r} {tip!r}"

    @box.tool
    def basket(lines: list[Line], tags: dict[str, str] | None = None) -> str:
        """Price a basket."""
        ran.append("basket")
        return str(sum(line.price for line in lines))

    @box.tool
    def book(at: datetime, room: UUID, color: Color, size: Literal["s", "m"], seats: tuple[int, int]) -> str:
        """Book a room: every argument is one JSON can only send as a string or an array."""
        ran.append("book")
        return f"{at.isoformat()} {room} {color.value} {size} {seats}"

    async def handler(arguments: dict[str, Any]) -> str:
        ran.append("imported")
        return "ok"

    box.add(
        Tool.from_schema(
            name="imported",
            description="An imported tool validated by its JSON Schema.",
            input_schema={
                "type": "object",
                "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
                "additionalProperties": False,
            },
            handler=handler,
        )
    )
    return box


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def stores() -> MemoryStores:
    return MemoryStores()


@pytest.fixture
def gate(ran: list[str], stores: MemoryStores) -> Gate:
    return Gate(shop(ran), stores=stores, audit=True)


async def ask(gate: Gate, name: str, arguments: Any):
    return await gate.call(ToolCall(id="c1", name=name, arguments=arguments), ALICE)


REFUND = {"order_id": "A1", "amount": "10.00"}

NOT_UNICODE = {
    "a lone high surrogate in a value": ({**REFUND, "note": "\ud800"}, "$.note"),
    "a lone low surrogate nested in a list": (
        {"lines": [{"sku": "ok", "price": "1.00"}, {"sku": "x\udfff", "price": "1.00"}]},
        "$.lines[1].sku",
    ),
    "a lone surrogate in a key": ({**REFUND, "\ud800": 1}, 'the key "\\ud800" in $'),
    "a nested key": ({"lines": [], "tags": {"\udc00x": "y"}}, 'the key "\\udc00x" in $.tags'),
    "an escaped surrogate in JSON text": (
        '{"order_id": "A1", "amount": "10.00", "note": "\\ud800"}',
        "$.note",
    ),
    "an escaped surrogate in JSON bytes": (b'{"order_id": "\\udbff", "amount": "10.00"}', "$.order_id"),
    "bytes that are not UTF-8": (b'{"order_id": "A\xff1", "amount": "10.00"}', "byte 15"),
}


@pytest.mark.parametrize("case", list(NOT_UNICODE), ids=list(NOT_UNICODE))
async def test_text_that_is_not_unicode_is_invalid_arguments_naming_where_it_is(gate, ran, stores, case):
    """A lone surrogate in a key or a value (raw, escaped, nested) or non-UTF-8 bytes is refused, audited."""
    arguments, where = NOT_UNICODE[case]
    name = "basket" if "lines" in str(arguments) else "refund"
    result = await ask(gate, name, arguments)
    assert result.error.code == "INVALID_ARGUMENTS", result.content
    assert "not valid Unicode" in result.content and where in result.content
    assert "Send plain UTF-8 text" in result.content
    result.content.encode("utf-8")  # the teaching message is itself valid text
    assert ran == []
    (entry,) = await stores.audit.entries()
    assert entry.error_code == "INVALID_ARGUMENTS" and entry.decision == "refused"
    assert (await verify_store(stores.audit)).ok


async def test_a_properly_paired_surrogate_escape_is_ordinary_text(gate, ran):
    """The escape pair for an emoji decodes to one valid character: it is not refused."""
    result = await ask(gate, "refund", '{"order_id": "A1", "amount": "10.00", "note": "\\ud83d\\ude00"}')
    assert not result.is_error and ran == ["refund"]


NOT_FINITE = {
    "NaN in text": '{"order_id": "A1", "amount": "10.00", "weight_kg": NaN}',
    "Infinity in text": '{"order_id": "A1", "amount": "10.00", "weight_kg": Infinity}',
    "-Infinity in text": '{"order_id": "A1", "amount": "10.00", "weight_kg": -Infinity}',
    "1e400 in text (inf in a float)": '{"order_id": "A1", "amount": "10.00", "weight_kg": 1e400}',
    "an integer beyond a double in text": '{"order_id": "A1", "amount": "10.00", "weight_kg": 1'
    + "0" * 400
    + "}",
    "an exponent past any decimal context": '{"order_id": "A1", "amount": "10.00", "weight_kg": 0.1e99999999999}',
    "a float nan in a dict": {**REFUND, "weight_kg": float("nan")},
    "a float inf in a dict": {**REFUND, "weight_kg": float("inf")},
    "a Decimal NaN in a dict": {**REFUND, "weight_kg": Decimal("NaN")},
    "NaN nested in a free-form map": {"lines": [], "tags": {"a": float("nan")}},
}


@pytest.mark.parametrize("case", list(NOT_FINITE), ids=list(NOT_FINITE))
async def test_nan_infinity_and_overflowing_numbers_are_refused_anywhere(gate, ran, stores, case):
    """JSON has no NaN or Infinity, and 1e400 would reach a float field as inf."""
    arguments = NOT_FINITE[case]
    name = "basket" if "lines" in str(arguments) else "refund"
    result = await ask(gate, name, arguments)
    assert result.error.code == "INVALID_ARGUMENTS", result.content
    assert "which JSON cannot carry" in result.content and "Send a finite number" in result.content
    assert ran == []
    (entry,) = await stores.audit.entries()
    assert entry.error_code == "INVALID_ARGUMENTS"


@pytest.mark.parametrize(
    "text",
    [
        '{"order_id": "A1", "amount": "1.00", "amount": "4999.00"}',
        '{"lines": [{"sku": "a", "price": "1.00", "sku": "b"}]}',
    ],
    ids=["top level", "nested"],
)
async def test_duplicate_keys_in_json_text_are_refused(gate, ran, stores, text):
    """Last-wins would let one parser see 1.00 and another 4999.00: a duplicate key is refused."""
    result = await ask(gate, "basket" if "lines" in text else "refund", text)
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "twice in one object" in result.content and "Send each key once" in result.content
    assert ran == []
    (entry,) = await stores.audit.entries()
    assert entry.error_code == "INVALID_ARGUMENTS"


LAX = {
    "true for an integer": ({**REFUND, "count": True}, "$.count", "A boolean (true) is not a number"),
    "a numeric string for an integer": (
        {**REFUND, "count": "12"},
        "$.count",
        "Numbers are not coerced from strings: send 12 without quotes",
    ),
    "a numeric string for a float": (
        {**REFUND, "weight_kg": "2.5"},
        "$.weight_kg",
        "send 2.5 without quotes",
    ),
    "12.0 for an integer": ({**REFUND, "count": 12.0}, "$.count", "Send a whole number"),
    '"true" for a boolean': ({**REFUND, "urgent": "true"}, "$.urgent", "Send true or false, without quotes"),
    "1 for a boolean": ({**REFUND, "urgent": 1}, "$.urgent", "Send true or false"),
    "a float for a Decimal (dict)": (
        {"order_id": "A1", "amount": 10.1},
        "$.amount",
        'send the amount as a string, like "10.00"',
    ),
    "a float for a Decimal (text)": (
        '{"order_id": "A1", "amount": 10.1}',
        "$.amount",
        "A JSON number with a fraction is not an exact decimal",
    ),
    "a float for an optional Decimal": ({**REFUND, "tip": 2.5}, "$.tip", "not an exact decimal"),
    "an integer past 2**53 for a Decimal": (
        {"order_id": "A1", "amount": 2**53 + 1},
        "$.amount",
        "An integer this large is not an exact decimal",
    ),
}


@pytest.mark.parametrize("case", list(LAX), ids=list(LAX))
async def test_values_of_the_wrong_json_type_are_not_coerced_and_the_error_teaches(gate, ran, stores, case):
    """true is not 1, "12" is not 12, 10.1 is not an exact amount: each is refused with a fix and an example."""
    arguments, where, hint = LAX[case]
    result = await ask(gate, "refund", arguments)
    assert result.error.code == "INVALID_ARGUMENTS", result.content
    assert where in result.content and hint in result.content
    assert "A valid call looks like: refund(" in result.content
    assert ran == []
    (entry,) = await stores.audit.entries()
    assert entry.error_code == "INVALID_ARGUMENTS" and entry.decision == "refused"


async def test_a_float_for_a_decimal_nested_in_a_list_of_models_is_refused(gate, ran):
    """The exactness check follows the schema into arrays and $defs, not only top-level fields."""
    result = await ask(
        gate, "basket", '{"lines": [{"sku": "a", "price": "1.00"}, {"sku": "b", "price": 0.1}]}'
    )
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "$.lines[1].price" in result.content and "not an exact decimal" in result.content
    assert ran == []


async def test_the_teaching_error_shows_what_was_received_and_keeps_the_valid_fields():
    """The received value is shown with its JSON type; the example keeps what was right and is itself valid."""
    ran: list[str] = []
    gate = Gate(shop(ran))
    result = await ask(
        gate, "refund", '{"order_id": "A7", "amount": "10.00", "count": "12", "weight_kg": 2.5}'
    )
    assert 'received "12" (string)' in result.content
    example = result.error.details["example"]
    assert '"order_id":"A7"' in example and '"weight_kg":2.5' in example and "count" not in example
    again = await ask(gate, "refund", example.removeprefix("refund(").removesuffix(")"))
    assert not again.is_error and ran == ["refund"]


ACCEPTED = {
    "a Decimal as its exact string": ({"order_id": "A1", "amount": "10.10"}, "Decimal('10.10')"),
    "a whole amount as a JSON integer": ({"order_id": "A1", "amount": 100}, "Decimal('100')"),
    "a whole amount as a JSON integer in text": ('{"order_id": "A1", "amount": 100}', "Decimal('100')"),
    "a Python Decimal from a Python caller": (
        {"order_id": "A1", "amount": Decimal("10.10")},
        "Decimal('10.10')",
    ),
    "an integer for a float": ({**REFUND, "weight_kg": 3}, " 3.0 "),
    "a float for a float, in text": ('{"order_id": "A1", "amount": "10.00", "weight_kg": 2.5}', " 2.5 "),
}


@pytest.mark.parametrize("case", list(ACCEPTED), ids=list(ACCEPTED))
async def test_exact_json_values_are_still_accepted(gate, ran, case):
    """Strictness refuses coercion, not the values JSON really has for each type."""
    arguments, shown = ACCEPTED[case]
    result = await ask(gate, "refund", arguments)
    assert not result.is_error, result.content
    assert shown in result.content and ran == ["refund"]


async def test_types_json_sends_as_strings_or_arrays_are_accepted_in_strict_mode(gate, ran):
    """Datetime, UUID, enum, Literal and tuple come as strings and arrays: JSON-mode strict keeps them."""
    arguments = {
        "at": "2026-03-01T10:00:00",
        "room": "12345678-1234-5678-1234-567812345678",
        "color": "red",
        "size": "m",
        "seats": [2, 3],
    }
    for sent in (arguments, json.dumps(arguments)):
        result = await ask(gate, "book", sent)
        assert not result.is_error, result.content
        assert result.content == "2026-03-01T10:00:00 12345678-1234-5678-1234-567812345678 red m (2, 3)"


@pytest.mark.parametrize(
    "arguments",
    [{"n": True}, {"n": "12"}, '{"x": NaN}', '{"n": 1, "n": 2}', {"x": float("inf")}, {"n": "\ud800"}],
    ids=["true", "numeric string", "NaN", "duplicate", "inf", "surrogate"],
)
async def test_schema_tools_are_as_strict(gate, ran, stores, arguments):
    """A tool validated by JSON Schema (imported over MCP) refuses the same inputs, audited."""
    result = await ask(gate, "imported", arguments)
    assert result.error.code == "INVALID_ARGUMENTS", result.content
    assert ran == []
    (entry,) = await stores.audit.entries()
    assert entry.error_code == "INVALID_ARGUMENTS"


async def test_canonical_arguments_and_fingerprint_are_rfc8785_whatever_door_the_call_came_by():
    """Hashes, approvals and idempotency keys are computed over RFC 8785 text of the arguments (hash
    format 2): a fraction sent as JSON text is the JSON number it was, the same as a caller's float."""
    gate = Gate(shop([]))
    text = '{"weight_kg": 2.5, "order_id": "A1", "amount": "10.00", "note": "café"}'
    with capture_calls(gate) as calls:
        await ask(gate, "refund", text)
        await ask(gate, "refund", {"order_id": "A1", "amount": "10.00", "note": "café", "weight_kg": 2.5})
    seen = [(c.context.canonical_arguments, c.context.fingerprint) for c in calls]
    expected = rfc8785.dumps({"amount": "10.00", "note": "café", "order_id": "A1", "weight_kg": 2.5}).decode()
    assert expected == '{"amount":"10.00","note":"café","order_id":"A1","weight_kg":2.5}'
    assert seen[0] == (expected, sha256_hex(f"refund\x00{expected}")[:32])
    assert seen[1] == seen[0]


async def test_an_unknown_key_inside_a_nested_model_is_refused_even_if_the_model_is_open(gate, ran):
    """A user's nested model allows extras by default; the gate still validates it closed."""
    result = await ask(gate, "basket", {"lines": [{"sku": "a", "price": "1.00", "discount": "0.50"}]})
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "Unknown argument 'discount' at $.lines[0].discount" in result.content
    assert ran == []
