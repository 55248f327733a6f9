"""Export tools in each provider's format, with measured token costs.

Anthropic and OpenAI forbid dots in tool names, so `orders.get_order` is sent as
`orders__get_order`; `ToolDefinitions.to_canonical()` maps a name the model writes back (the gate
also accepts either spelling). MCP keeps canonical names.

Each definition's cost is counted with the offline cl100k_base tokenizer over the definition's
compact JSON, which is what travels with every request.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from ..jsonutil import compact_json
from ..tokens import count_tokens
from ..types import Effect
from .tool import Tool

__all__ = [
    "ExportFormat",
    "StrictProblem",
    "StrictProblemKind",
    "ToolDefinitions",
    "export_definitions",
    "mcp_annotations",
    "openai_strict_problems",
    "provider_name",
]

ExportFormat = Literal["anthropic", "openai", "openai-responses", "mcp"]

_MAX_PROVIDER_NAME = 64


def provider_name(canonical: str) -> str:
    """A name valid for Anthropic and OpenAI (`^[a-zA-Z0-9_-]{1,64}$`), reversible via the map."""
    name = canonical.replace(".", "__")
    if len(name) > _MAX_PROVIDER_NAME:
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_PROVIDER_NAME - 9]}_{digest}"
    return name


def mcp_annotations(tool: Tool) -> dict[str, Any]:
    """MCP tool annotations derived from static metadata (imported annotations win)."""
    derived: dict[str, Any] = {
        "readOnlyHint": tool.effect is Effect.READ,
        "destructiveHint": tool.effect is Effect.DESTRUCTIVE,
        "idempotentHint": bool(tool.idempotent),
        "openWorldHint": tool.open_world or tool.egress,  # an egress read reaches outside too
    }
    if tool.title:
        derived["title"] = tool.title
    return {**derived, **tool.annotations}


def _provider_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


StrictProblemKind = Literal["open-object", "optional", "keyword", "untyped"]


@dataclass(frozen=True, kw_only=True)
class StrictProblem:
    """One reason a schema cannot be sent to OpenAI with `strict: true`."""

    path: str
    """Where: a parameter (`extra`), a nested field (`order.lines[].sku`); empty for the root."""
    kind: StrictProblemKind
    """`open-object` (extra keys allowed), `optional` (a property not in `required`), `keyword`
    (a keyword strict mode does not take, see `detail`), `untyped` (a value of any type)."""
    detail: str = ""
    """The keyword, for `keyword`."""


_NOT_STRICT_KEYWORDS = ("pattern", "format", "minLength", "maxLength", "examples")
_TYPED = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const")


def openai_strict_problems(schema: dict[str, Any]) -> list[StrictProblem]:
    """Every reason `schema` is not closed enough for OpenAI strict mode (empty: it is).

    Strict mode needs every object closed (`additionalProperties: false`, no `patternProperties`)
    with every property required - recursively, through `items`, `anyOf` and each `$defs` entry -
    and a type for every value. A free `dict` parameter is an open object, so its tool is exported
    with `strict: false`; `maitre tools lint` says which parameter.
    """
    defs = schema.get("$defs", {}) if isinstance(schema.get("$defs"), dict) else {}
    problems: dict[tuple[str, str, str], StrictProblem] = {}
    reached: set[str] = set()

    def add(path: str, kind: StrictProblemKind, detail: str = "") -> None:
        problems.setdefault((path, kind, detail), StrictProblem(path=path, kind=kind, detail=detail))

    def walk(node: Any, path: str, expanding: tuple[str, ...], value: bool) -> None:
        if not isinstance(node, dict):
            return
        if value and not any(key in node for key in _TYPED):
            add(path, "untyped")
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.rsplit("/", 1)[-1]
            reached.add(name)
            if name not in expanding:
                walk(defs.get(name), path, (*expanding, name), False)
        types = node.get("type")
        is_object = (
            types == "object"
            or (isinstance(types, list) and "object" in types)
            or any(key in node for key in ("properties", "additionalProperties", "patternProperties"))
        )
        if is_object:
            if node.get("additionalProperties") is not False or "patternProperties" in node:
                add(path, "open-object")
            properties = node.get("properties", {})
            required = set(node.get("required", []))
            for name, sub in properties.items():
                child = f"{path}.{name}" if path else name
                if name not in required:
                    add(child, "optional")
                walk(sub, child, expanding, True)
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                walk(extra, f"{path}.*" if path else "*", expanding, True)
        for keyword in _NOT_STRICT_KEYWORDS:
            if keyword in node:
                add(path, "keyword", keyword)
        items = node.get("items")
        if isinstance(items, dict):
            walk(items, f"{path}[]", expanding, True)
        for key in ("prefixItems", "anyOf", "oneOf", "allOf"):
            options = node.get(key)
            if isinstance(options, list):
                for option in options:
                    walk(option, f"{path}[]" if key == "prefixItems" else path, expanding, True)

    walk(schema, "", (), False)
    for name, definition in defs.items():
        if name not in reached:
            walk(definition, f"$defs.{name}", (name,), False)
    return list(problems.values())


def _openai_strict(schema: dict[str, Any]) -> bool:
    """OpenAI strict mode only when every object in the schema is closed (see above)."""
    return not openai_strict_problems(schema)


def _one(tool: Tool, format: ExportFormat) -> dict[str, Any]:
    if format == "anthropic":
        return {
            "name": provider_name(tool.name),
            "description": tool.description,
            "input_schema": _provider_schema(tool.input_schema),
        }
    if format in ("openai", "openai-responses"):
        params = _provider_schema(tool.input_schema)
        function: dict[str, Any] = {
            "name": provider_name(tool.name),
            "description": tool.description,
            "parameters": params,
        }
        if _openai_strict(params):
            function["strict"] = True
        if format == "openai":
            return {"type": "function", "function": function}
        return {"type": "function", **function}
    if format == "mcp":
        data: dict[str, Any] = {"name": tool.name}
        if tool.title:
            data["title"] = tool.title
        data["description"] = tool.description
        data["inputSchema"] = tool.input_schema
        if tool.output_schema is not None:
            data["outputSchema"] = tool.output_schema
        data["annotations"] = mcp_annotations(tool)
        return data
    raise ValueError(f"unknown format {format!r}; use 'anthropic', 'openai', 'openai-responses' or 'mcp'")


class ToolDefinitions(list[dict[str, Any]]):
    """A list of provider-shaped definitions that also knows token costs and the name map."""

    format: ExportFormat
    tokens: dict[str, int]
    """Token cost of each definition, by canonical name."""
    _to_canonical: dict[str, str]

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens.values())

    def to_canonical(self, name: str) -> str:
        """Map a name as the provider/model wrote it back to the canonical tool name."""
        return self._to_canonical.get(name, name)

    def to_provider(self, canonical: str) -> str:
        return canonical if self.format == "mcp" else provider_name(canonical)


def export_definitions(tools: list[Tool], format: ExportFormat) -> ToolDefinitions:
    definitions = ToolDefinitions()
    definitions.format = format
    definitions.tokens = {}
    definitions._to_canonical = {}
    for tool in tools:
        data = _one(tool, format)
        definitions.append(data)
        definitions.tokens[tool.name] = count_tokens(compact_json(data))
        definitions._to_canonical[definitions.to_provider(tool.name)] = tool.name
    return definitions
