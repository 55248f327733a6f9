"""A toolbox served over MCP: every call through the gate, on both protocol eras and every transport."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_testkit import shop_box

from maitre.mcp.app import MCPApp
from maitre.mcp.server import RUN_META_KEY, GovernedServer
from maitre.mcp.testing import raw_request
from maitre.mcp.transports import running_http
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def _server() -> GovernedServer:
    app = MCPApp(shop_box(), name="shop", version="1.0")

    @app.resource("shop://policy", description="Refund policy", mime_type="text/markdown")
    def policy() -> str:
        return "# Refunds\nWithin 30 days."

    @app.resource("shop://orders/{order_id}/label")
    def label(order_id: str) -> bytes:
        return order_id.encode()

    @app.prompt(description="Ask about an order")
    def ask(order_id: str) -> str:
        return f"Where is {order_id}?"

    return GovernedServer(app)


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_tools_are_listed_in_order_with_annotations_from_metadata(mode):
    """Annotations come from effect/risk metadata; order is registration order; output schema is kept."""
    async with Client(_server().lowlevel, mode=mode) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["get_order", "add_note", "delete_order"]
    ann = {t.name: t.annotations for t in tools}
    assert ann["get_order"].read_only_hint and ann["get_order"].idempotent_hint
    assert not ann["add_note"].read_only_hint and not ann["add_note"].destructive_hint
    assert ann["delete_order"].destructive_hint and ann["delete_order"].open_world_hint
    assert tools[0].output_schema["properties"]["status"]["type"] == "string"
    assert tools[0].input_schema["additionalProperties"] is False


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_call_runs_through_the_gate_and_errors_teach(mode):
    """Success carries structuredContent; a gate error is isError with the teaching text and the ToolError."""
    async with Client(_server().lowlevel, mode=mode) as client:
        ok = await client.call_tool("get_order", {"order_id": "A1042"})
        bad = await client.call_tool("get_order", {"order_id": "B-1"})
        unknown = await client.call_tool("get_ordr", {})
    assert not ok.is_error and ok.structured_content == {
        "order_id": "A1042",
        "status": "shipped",
        "tenant": "local",
    }
    assert bad.is_error and "A1042" in bad.content[0].text
    assert unknown.is_error and unknown.structured_content["error"]["code"] == "UNKNOWN_TOOL"
    assert bad.meta["io.maitre/error"]["code"] == "INVALID_ARGUMENTS"
    assert "get_order" in unknown.content[0].text


async def test_resources_templates_and_prompts_are_served():
    """Static resources, templates (binary too) and prompts answer on the modern wire."""
    async with Client(_server().lowlevel, mode="2026-07-28") as client:
        assert [r.uri for r in (await client.list_resources()).resources] == ["shop://policy"]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["shop://orders/{order_id}/label"]
        text = (await client.read_resource("shop://policy")).contents[0]
        assert text.text.startswith("# Refunds") and text.mime_type == "text/markdown"
        blob = (await client.read_resource("shop://orders/A1042/label")).contents[0]
        assert blob.blob == "QTEwNDI="
        prompt = await client.get_prompt("ask", {"order_id": "A1042"})
        assert prompt.messages[0].content.text == "Where is A1042?"


async def test_one_http_endpoint_speaks_both_eras():
    """The same URL serves 2026-07-28 (stateless) and 2025-11-25 (initialize) clients."""
    async with running_http(_server()) as url:
        for mode, version in [("auto", "2026-07-28"), ("legacy", "2025-11-25")]:
            async with Client(url, mode=mode) as client:
                assert client.protocol_version == version
                result = await client.call_tool("get_order", {"order_id": "A1042"})
                assert result.structured_content["status"] == "shipped"
        status, body = await raw_request(url, "server/discover", {})
        assert status == 200 and "2026-07-28" in body["result"]["supportedVersions"]
        assert body["result"]["capabilities"]["tools"] is not None


def test_stdio_serve_prints_nothing_but_protocol():
    """`maitre serve --transport stdio`: every stdout line is one JSON-RPC message."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_order", "arguments": {"order_id": "A1042"}},
        },
    ]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "maitre.mcp",
            "serve",
            "tests/mcp/mcp_testkit.py:shop_box",
            "--transport",
            "stdio",
            "--tenant",
            "acme",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines = []
    try:
        for request in requests:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            if "id" in request:
                lines.append(json.loads(proc.stdout.readline()))
    finally:
        proc.stdin.close()
        rest = proc.stdout.read()
        proc.wait(timeout=30)
    assert rest == ""
    assert [m.get("id") for m in lines] == [1, 2]
    assert lines[1]["result"]["structuredContent"]["tenant"] == "acme"


async def test_stdio_through_the_sdk_client_on_the_modern_wire():
    """The SDK client drives `python -m maitre.mcp serve` as a subprocess."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "maitre.mcp", "serve", "tests/mcp/mcp_testkit.py:shop_box", "--transport", "stdio"],
        cwd=str(ROOT),
    )
    async with Client(params, mode="2026-07-28") as client:
        result = await client.call_tool("get_order", {"order_id": "A1042"})
    assert result.structured_content["order_id"] == "A1042"


async def test_a_run_id_in_meta_lets_the_gate_see_a_loop_across_mcp_calls():
    """With `_meta["io.maitre/runId"]` the same call repeated in one run is stopped; other runs are not."""
    async with Client(_server().lowlevel, mode="2026-07-28") as client:
        looped = [
            await client.call_tool("get_order", {"order_id": "A1042"}, meta={RUN_META_KEY: "run-1"})
            for _ in range(4)
        ]
        fresh = await client.call_tool("get_order", {"order_id": "A1042"}, meta={RUN_META_KEY: "run-2"})
        standalone = [await client.call_tool("get_order", {"order_id": "A1042"}) for _ in range(4)]
    codes = [r.meta.get("io.maitre/error", {}).get("code") for r in looped]
    assert codes[0] is None and "LOOP_DETECTED" in codes
    assert not fresh.is_error and not any(r.is_error for r in standalone)
