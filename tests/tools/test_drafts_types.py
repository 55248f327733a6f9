"""Type names real catalogues write that JSON Schema does not define (issue 17, item 1).

BFCL's 1,853 functions use `dict`, `float`, `tuple`, `any` and Java/JavaScript spellings; OpenAPI
writers use format names as types; Swagger 2.0 has `x-nullable`. `normalise_schema` reads each as
the JSON type it names, and the gate's validator then means what the catalogue meant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from maitre import Tool, ToolDefinitionError
from maitre.tools.drafts import normalise_schema, schema_validator

BFCL = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "bfcl"


def validator(schema: dict[str, Any]) -> Any:
    return schema_validator(normalise_schema(schema))


def test_bfcl_dict_float_and_tuple_mean_object_number_and_array():
    v = validator(
        {
            "type": "dict",
            "properties": {
                "rate": {"type": "float"},
                "point": {"type": "tuple", "items": {"type": "integer"}},
                "count": {"type": "long"},
                "name": {"type": "String"},
                "meta": {"type": "HashMap"},
            },
            "required": ["rate"],
        }
    )
    assert v.is_valid({"rate": 1.5, "point": [1, 2], "count": 3, "name": "x", "meta": {}})
    assert not v.is_valid({"rate": "fast"})
    assert not v.is_valid({"rate": 1.0, "point": "1,2"})
    assert not v.is_valid({"rate": 1.0, "count": 2.5})
    assert not v.is_valid({"rate": 1.0, "name": 5})
    assert not v.is_valid([1.5])  # the root `dict` is an object


def test_any_and_an_empty_type_constrain_nothing():
    v = validator({"type": "object", "properties": {"x": {"type": "any"}, "y": {"type": ""}}})
    for value in (1, "a", None, [1], {"k": 1}):
        assert v.is_valid({"x": value, "y": value})
    union = validator({"type": "object", "properties": {"x": {"type": ["string", "any"]}}})
    assert union.is_valid({"x": 3})


def test_openapi_format_names_as_types_and_swagger_x_nullable():
    v = validator(
        {
            "type": "object",
            "properties": {
                "id": {"type": "int64"},
                "price": {"type": "double", "x-nullable": True},
                "tags": {"type": ["str", "none"]},
            },
        }
    )
    assert v.is_valid({"id": 7, "price": None, "tags": None})
    assert v.is_valid({"price": 2.5, "tags": "a"})
    assert not v.is_valid({"id": 1.5})
    assert not v.is_valid({"tags": 3})


def test_a_type_that_is_neither_json_nor_an_alias_is_still_refused():
    with pytest.raises(ToolDefinitionError):
        validator({"type": "object", "properties": {"x": {"type": "gizmo"}}})


def test_a_schema_without_aliases_is_left_exactly_as_it_is():
    schema = {"type": "object", "properties": {"x": {"type": ["string", "null"]}}, "required": ["x"]}
    assert normalise_schema(schema) == schema


def test_draft_04_boolean_exclusive_minimum_with_a_bfcl_type():
    v = validator(
        {"type": "dict", "properties": {"n": {"type": "float", "minimum": 0, "exclusiveMinimum": True}}}
    )
    assert v.is_valid({"n": 0.1})
    assert not v.is_valid({"n": 0})


def _bfcl_functions() -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for path in sorted(BFCL.glob("BFCL_v4_*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                for function in json.loads(line)["function"]:
                    seen.setdefault(function["name"], function)
    return seen


@pytest.mark.skipif(not BFCL.is_dir(), reason="benchmarks/data/bfcl is not in this checkout")
def test_every_bfcl_function_loads_as_a_tool():
    functions = _bfcl_functions()
    assert len(functions) == 1853

    async def handler(arguments: dict[str, Any]) -> None:
        return None

    tools = [
        Tool.from_schema(
            name=f["name"],
            description=f["description"],
            input_schema=f["parameters"],
            handler=handler,
            namespace="bfcl",
        )
        for f in functions.values()
    ]
    assert len({t.name for t in tools}) == 1853
    assert {t.upstream_name for t in tools} == set(functions)
