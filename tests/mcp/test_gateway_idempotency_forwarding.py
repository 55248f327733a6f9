"""`McpUpstream.call(..., idempotency_key=...)`: the key reaches the upstream in `_meta`
(`io.maitre/idempotencyKey`), so an upstream that honours it (a maitre server here, served over
HTTP on 127.0.0.1) runs one logical write once however often it is sent: what a gateway needs to
re-send a write whose first attempt ended in doubt (a replica killed mid-call)."""

from __future__ import annotations

import pytest

from maitre import Gate, GateLimits, Toolbox
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


WRITE = {"pay": {"effect": "write", "risk": "low", "open_world": False}}
"""The gateway's operator says what `pay` is (an imported tool is destructive until someone does)."""
NO_WINDOW = GateLimits(dedupe_window_s=0.0)
"""The upstream does not fold identical runless calls by itself: only the forwarded key can."""


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "sdk"])
async def test_a_write_retried_by_another_replica_reaches_the_upstream_under_the_same_key(direct):
    """Two gateway replicas that share no store (the second took over after the first died
    mid-call, its record lost) mint the same key for the same call in the same run and send it in
    `_meta`: the upstream runs the payment once. A read carries no key."""
    from maitre import Principal, ToolCall

    box, done = ledger()
    upstream_gate = Gate(box, stores=MemoryStores(), audit=True, limits=NO_WINDOW)
    alice = Principal(user="alice", tenant="acme")
    call = ToolCall(id="c1", name="ledger.pay", arguments={"invoice": "F-9"}, run_id="run_shared")
    results = []
    async with running_http(GovernedServer(MCPApp(box, gate=upstream_gate))) as url:
        for _replica in range(2):
            async with McpUpstream(
                url,
                namespace="ledger",
                allow_loopback=True,
                scan="off",
                mode="2026-07-28",
                direct_calls=direct,
                overrides=WRITE,
            ) as upstream:
                gateway = Gate(await upstream.toolbox(), stores=MemoryStores())
                results.append(await gateway.call(call, alice))
    assert [r.is_error for r in results] == [False, False], [r.content for r in results]
    assert done == ["F-9"]  # the second replica's attempt replayed at the upstream
    assert results[1].content == results[0].content


async def test_a_client_told_not_to_forward_keys_sends_none():
    """`forward_idempotency_keys=False`: each replica's attempt is a new operation upstream."""
    from maitre import Principal, ToolCall

    box, done = ledger()
    alice = Principal(user="alice", tenant="acme")
    call = ToolCall(id="c1", name="ledger.pay", arguments={"invoice": "F-9"}, run_id="run_shared")
    upstream_gate = Gate(box, stores=MemoryStores(), limits=NO_WINDOW)
    async with running_http(GovernedServer(MCPApp(box, gate=upstream_gate))) as url:
        for _ in range(2):
            async with McpUpstream(
                url,
                namespace="ledger",
                allow_loopback=True,
                scan="off",
                forward_idempotency_keys=False,
                overrides=WRITE,
            ) as upstream:
                await Gate(await upstream.toolbox(), stores=MemoryStores()).call(call, alice)
    assert done == ["F-9", "F-9"]
