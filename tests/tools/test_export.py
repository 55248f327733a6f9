"""OpenAI strict mode only when every object in the schema is closed; otherwise strict: false."""

from typing import Any

from pydantic import BaseModel

from maitre import Toolbox
from maitre.tools.export import StrictProblem, export_definitions, openai_strict_problems


class Line(BaseModel):
    sku: int
    qty: int


class Order(BaseModel):
    lines: list[Line]
    notes: dict[str, str]


class Closed(BaseModel):
    lines: list[Line]


class Tree(BaseModel):
    label: int
    children: list["Tree"]


def box() -> Toolbox:
    box = Toolbox()

    @box.tool
    def closed(count: int, order: Closed, tree: Tree) -> str:
        """Every object closed, every property required (recursive models too)."""
        return ""

    @box.tool
    def free(count: int, extra: dict) -> str:
        """A free dict parameter."""
        return ""

    @box.tool
    def nested(order: Order) -> str:
        """A closed model holding an open dict."""
        return ""

    @box.tool
    def listed(rows: list[dict[str, Any]]) -> str:
        """Open objects inside an array."""
        return ""

    @box.tool
    def anything(value: Any) -> str:
        """A value of any type."""
        return ""

    @box.tool
    def optional(count: int, format: int = 0) -> str:
        """An optional parameter (named like a keyword, which is not a keyword)."""
        return ""

    return box


def strict_flags(format: str) -> dict[str, bool | None]:
    definitions = export_definitions(box().tools(), format)  # type: ignore[arg-type]
    if format == "openai":
        return {d["function"]["name"]: d["function"].get("strict") for d in definitions}
    return {d["name"]: d.get("strict") for d in definitions}


def test_only_a_fully_closed_schema_is_exported_strict():
    for format in ("openai", "openai-responses"):
        assert strict_flags(format) == {
            "closed": True,
            "free": None,
            "nested": None,
            "listed": None,
            "anything": None,
            "optional": None,
        }


def test_each_problem_names_the_parameter_that_causes_it():
    tools = {tool.name: tool.input_schema for tool in box().tools()}
    assert openai_strict_problems(tools["closed"]) == []
    assert openai_strict_problems(tools["free"]) == [StrictProblem(path="extra", kind="open-object")]
    assert openai_strict_problems(tools["nested"]) == [StrictProblem(path="order.notes", kind="open-object")]
    assert openai_strict_problems(tools["listed"]) == [StrictProblem(path="rows[]", kind="open-object")]
    assert openai_strict_problems(tools["anything"]) == [StrictProblem(path="value", kind="untyped")]
    assert openai_strict_problems(tools["optional"]) == [StrictProblem(path="format", kind="optional")]


def test_definitions_nobody_references_are_checked_too():
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
        "$defs": {"Loose": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
    }
    assert openai_strict_problems(schema) == [StrictProblem(path="$defs.Loose", kind="open-object")]


def test_an_open_root_or_pattern_properties_are_open_objects():
    assert openai_strict_problems({"type": "object", "properties": {}}) == [
        StrictProblem(path="", kind="open-object")
    ]
    schema = {
        "type": "object",
        "patternProperties": {"^x": {"type": "string"}},
        "additionalProperties": False,
    }
    assert StrictProblem(path="", kind="open-object") in openai_strict_problems(schema)


def test_constraints_strict_mode_does_not_take_still_keep_it_off():
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^A[0-9]{4}$"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    assert openai_strict_problems(schema) == [StrictProblem(path="id", kind="keyword", detail="pattern")]
