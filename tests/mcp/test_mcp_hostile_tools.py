"""Hostile tools behind `maitre serve` (issue 10, item 5): one bad tool must not stop the server.

The server is a real `python -m maitre.mcp serve` subprocess on 127.0.0.1, serving `hostile_box`
from this file, called with the official MCP client.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre import Toolbox
from maitre.mcp.testing import serve_process
from mcp import Client

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
LINE = "2026-01-01T00:00:00Z hub-7 INFO parcel moved to bay 42 (ok) \u00e9\n"


def hostile_box() -> Toolbox:
    """Tools that raise what no tool should, and one that returns 50 MB."""
    box = Toolbox()

    @box.tool
    def exit_in_thread() -> str:
        """Call sys.exit from a sync tool."""
        raise SystemExit(0)

    @box.tool
    async def interrupt_in_loop() -> str:
        """Raise KeyboardInterrupt on the server's event loop."""
        await anyio.sleep(0.01)
        raise KeyboardInterrupt

    @box.tool
    async def exit_in_loop() -> str:
        """Raise SystemExit on the server's event loop before suspending."""
        raise SystemExit(2)

    @box.tool
    def ping() -> str:
        """Answer."""
        return "pong"

    @box.tool(timeout=10)
    def huge() -> str:
        """Return 50 MB of log."""
        return LINE * (50 * 1024 * 1024 // len(LINE))

    return box


@pytest.fixture(scope="module")
def url() -> Any:
    with serve_process("tests/mcp/test_mcp_hostile_tools.py:hostile_box", cwd=str(ROOT)) as served:
        yield served


async def test_a_tool_raising_system_exit_does_not_stop_maitre_serve(url):
    """SystemExit / KeyboardInterrupt from a tool are INTERNAL results; the next call is served."""
    async with Client(url, mode="2026-07-28") as client:
        for name in ("exit_in_thread", "interrupt_in_loop", "exit_in_loop"):
            result = await client.call_tool(name, {})
            assert result.is_error
            assert result.structured_content["error"]["code"] == "INTERNAL"
            after = await client.call_tool("ping", {})
            assert not after.is_error and after.content[0].text == "pong"


async def test_a_50_mb_result_over_http_comes_back_capped_with_a_handle(url):
    """The byte cap holds over HTTP: a few seconds, a short first page, and a handle for the rest."""
    async with Client(url, mode="2026-07-28") as client:
        start = time.perf_counter()
        with anyio.fail_after(30):
            result = await client.call_tool("huge", {})
        took = time.perf_counter() - start
        assert not result.is_error and took < 15
        text = result.content[0].text
        assert len(text.encode()) < 20_000 and "bytes were dropped" in text
        handle = (result.meta or {}).get("io.maitre/handle")
        assert handle and f'read_result(handle="{handle}", page=2)' in text
        assert (await client.call_tool("ping", {})).content[0].text == "pong"
