"""`GovernedServer._input_schema` hands the SDK no schema for a tool that declares no `x-mcp-header`
(its `Mcp-Param-*` check could refuse nothing), and the full schema for one that does: the answers
are the same as with the SDK reading every schema."""

from __future__ import annotations

from typing import Annotated, Any

import httpx
import pytest
from pydantic import Field

from maitre import Toolbox
from maitre.mcp import server as server_module
from maitre.mcp.app import MCPApp
from maitre.mcp.server import GovernedServer
from maitre.mcp.testing import MODERN, envelope
from maitre.mcp.transports import running_http

pytestmark = pytest.mark.anyio


def _server() -> GovernedServer:
    box = Toolbox()

    @box.tool
    def region(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Echo the region (its header names it)."""
        return region

    @box.tool
    def echo(text: str) -> str:
        """Return the text."""
        return text

    return GovernedServer(MCPApp(box, name="params", version="1.0"))


async def _post(url: str, name: str, arguments: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": envelope(None)},
    }
    sent = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
        **headers,
    }
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, json=body, headers=sent)


CASES = [
    ("region", {"region": "eu-west1"}, {"Mcp-Param-Region": "eu-west1"}),
    ("region", {"region": "eu-west1"}, {"Mcp-Param-Region": "us-east1"}),  # mismatch: refused
    ("region", {"region": "eu-west1"}, {}),  # missing: refused
    ("echo", {"text": "hi"}, {}),
    ("echo", {"text": "hi"}, {"Mcp-Param-Text": "other"}),  # not declared: the SDK ignores it
]


async def _outcomes(url: str) -> list[tuple[int, Any]]:
    outcomes = []
    for name, arguments, headers in CASES:
        response = await _post(url, name, arguments, headers)
        answer = response.json()
        outcomes.append(
            (response.status_code, answer.get("error", {}).get("code") or answer["result"]["content"])
        )
    return outcomes


async def test_only_a_schema_with_header_annotations_reaches_the_sdks_check(monkeypatch):
    served = _server()
    assert served._input_schema("echo") is None
    assert served._input_schema("region") is served.app.toolbox.get("region").input_schema
    async with running_http(served) as url:
        shortcut = await _outcomes(url)
        monkeypatch.setattr(server_module, "_X_MCP_HEADER", '"type"')  # every schema "has" it: no shortcut
        served._header_free.clear()
        assert served._input_schema("echo") is not None
        full = await _outcomes(url)
    assert shortcut == full
    assert [status for status, _ in shortcut] == [200, 400, 400, 200, 200]
