"""Imported tools whose upstream spells names with `::` or `/`, or writes draft-04/07 schemas:
admitted under a stable valid name, called upstream by their own spelling, validated as the draft
meant (a draft-04 boolean bound, a draft-07 tuple whose objects stay closed)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from test_mcp_import_guard import forwarded, serving

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.mcp.client import McpUpstream, toolbox_from_mcp
from maitre.tools.tool import base_name_for

pytestmark = pytest.mark.anyio
USER = Principal(user="u", tenant="t")


def odd_names_server() -> MCPServer:
    server = MCPServer("odd")

    @server.tool(name="repo::search", annotations=ToolAnnotations(readOnlyHint=True))
    def search(query: str) -> str:
        return f"found {query}"

    @server.tool(name="files/read", annotations=ToolAnnotations(readOnlyHint=True))
    def read(path: str) -> str:
        return f"read {path}"

    return server


async def test_names_with_separators_get_stable_valid_names_and_are_called_by_their_own_spelling() -> None:
    calls: list[dict[str, Any]] = []
    async with serving(odd_names_server(), calls) as url:
        box = await toolbox_from_mcp(url, namespace="odd", allow_loopback=True, trust_annotations=True)
        names = sorted(tool.name for tool in box)
        assert names == sorted(f"odd.{base_name_for(n)}" for n in ("repo::search", "files/read"))
        gate = Gate(box)
        result = await gate.call(
            ToolCall(id="1", name=f"odd.{base_name_for('repo::search')}", arguments={"query": "x"}), USER
        )
        assert not result.is_error and "found x" in result.content
    assert forwarded(calls, "repo::search") == [{"query": "x"}]
    assert {tool.upstream_name for tool in box} == {"repo::search", "files/read"}


def _tool(schema: dict[str, Any]) -> Any:
    upstream = McpUpstream("http://127.0.0.1:9/mcp", namespace="d", allow_loopback=True)
    return upstream._to_tool({"name": "t", "description": "A tool.", "inputSchema": schema})


async def _validate(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    tool = _tool(schema)
    box = Toolbox(tools=[tool])
    result = await Gate(box).call(ToolCall(id="1", name=tool.name, arguments=arguments), USER)
    return result.error.code if result.error else None


async def test_a_draft_04_boolean_bound_is_admitted_and_means_what_draft_04_meant() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 5, "exclusiveMinimum": True}},
        "required": ["n"],
    }
    assert await _validate(schema, {"n": 5}) == "INVALID_ARGUMENTS"  # exclusive: 5 itself is out
    # a write tool by default: the approval is asked only once the arguments are valid
    assert await _validate(schema, {"n": 6}) == "APPROVAL_REQUIRED"


async def test_a_draft_07_tuple_of_objects_stays_closed_after_normalisation() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "items": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "integer"}],
            }
        },
    }
    assert await _validate(schema, {"pair": [{"a": "x", "smuggled": 1}, 2]}) == "INVALID_ARGUMENTS"
    assert await _validate(schema, {"pair": [{"a": "x"}, 2]}) == "APPROVAL_REQUIRED"
