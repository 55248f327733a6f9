"""`McpUpstream.call(..., idempotency_key=...)`: the key reaches the upstream in `_meta`
(`io.maitre/idempotencyKey`), so an upstream that honours it (a maitre server here, served over
HTTP on 127.0.0.1) runs one logical write once however often it is sent: what a gateway needs to
re-send a write whose first attempt ended in doubt (a replica killed mid-call)."""

from __future__ import annotations

import pytest

from maitre import Gate, Toolbox
from maitre.mcp.app import MCPApp
from maitre.mcp.client import McpUpstream
from maitre.mcp.server import GovernedServer
from maitre.mcp.transports import running_http
from maitre.stores import MemoryStores
from maitre.types import ToolError

pytestmark = pytest.mark.anyio


def ledger() -> tuple[Toolbox, list[str]]:
    box = Toolbox()
    done: list[str] = []

    @box.tool(effect="write", requires_approval=False)
    async def pay(invoice: str) -> str:
        """Pay one invoice."""
        done.append(invoice)
        return f"paid {invoice} ({len(done)})"

    return box, done


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sdk"])
async def test_the_same_key_runs_the_write_once_and_another_key_runs_it_again(direct):
    box, done = ledger()
    gate = Gate(box, stores=MemoryStores(), audit=True)
    async with (
        running_http(GovernedServer(MCPApp(box, gate=gate))) as url,
        McpUpstream(
            url, namespace="ledger", allow_loopback=True, scan="off", mode="2026-07-28", direct_calls=direct
        ) as upstream,
    ):
        await upstream.toolbox()
        first = await upstream.call("pay", {"invoice": "F-1"}, idempotency_key="gw:key-1")
        again = await upstream.call("pay", {"invoice": "F-1"}, idempotency_key="gw:key-1")
        other = await upstream.call("pay", {"invoice": "F-1"}, idempotency_key="gw:key-2")
    assert done == ["F-1", "F-1"]  # key-1 once, key-2 once
    assert first == again == "paid F-1 (1)"
    assert other == "paid F-1 (2)"


async def test_a_key_that_is_not_printable_ascii_is_refused_before_anything_is_sent():
    box, done = ledger()
    server = GovernedServer(MCPApp(box, gate=Gate(box, stores=MemoryStores())))
    async with (
        running_http(server) as url,
        McpUpstream(url, namespace="ledger", allow_loopback=True, scan="off") as upstream,
    ):
        await upstream.toolbox()
        for bad in ("", "x" * 129, "key with spaces", "k\r\nX-Injected: 1"):
            with pytest.raises(ToolError) as refused:
                await upstream.call("pay", {"invoice": "F-9"}, idempotency_key=bad)
            assert refused.value.code == "INVALID_ARGUMENTS"
    assert done == []
