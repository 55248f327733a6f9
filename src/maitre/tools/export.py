"""Export tools in each provider's format, with measured token costs.

Anthropic and OpenAI forbid dots in tool names, so `orders.get_order` is sent as
`orders__get_order`; `ToolDefinitions.to_canonical()` maps a name the model writes back (the gate
also accepts either spelling). MCP keeps canonical names.

Each definition's cost is counted with the offline cl100k_base tokenizer over the definition's
compact JSON, which is what travels with every request.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from ..jsonutil import compact_json
from ..tokens import count_tokens
from ..types import Effect
from .tool import Tool

__all__ = ["ExportFormat", "ToolDefinitions", "export_definitions", "mcp_annotations", "provider_name"]

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
        "openWorldHint": tool.open_world,
    }
    if tool.title:
        derived["title"] = tool.title
    return {**derived, **tool.annotations}


def _provider_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


def _openai_strict(schema: dict[str, Any]) -> bool:
    """OpenAI strict mode needs every property required and every object closed."""

    def ok(node: Any) -> bool:
        if isinstance(node, dict):
            if "properties" in node:
                if set(node.get("required", [])) != set(node["properties"]):
                    return False
                if node.get("additionalProperties") is not False:
                    return False
            if any(key in node for key in ("pattern", "format", "minLength", "maxLength", "examples")):
                return False
            return all(ok(value) for key, value in node.items() if key not in ("enum", "const", "default"))
        if isinstance(node, list):
            return all(ok(item) for item in node)
        return True

    return ok(schema)


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
