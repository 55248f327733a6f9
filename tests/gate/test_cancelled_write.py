"""A write whose caller is cancelled while it runs is still recorded, once, before the cancellation goes on.

The attack: a resume worker (or a console shutting down) is cancelled while an approved refund runs
in its worker thread. The refund happens anyway - a thread cannot be stopped - so if the gate let the
cancellation through at once, the idempotency key would stay in flight with no result, no audit
entry would say the refund ran, and the next try with the same approval would be refused ("the
approval is used") instead of replaying. Each test cancels a write mid-way, then checks that the
cancellation still reached the caller, the tool ran once, the call is audited once, and a retry
replays the stored result.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.stores import MemoryStores, Stores, open_stores

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme")
BOB = Principal(user="bob", tenant="acme")


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        yield MemoryStores()
        return
    async with await open_stores(str(tmp_path / "gate.db")) as opened:
        yield opened


def shop(ran: list[str], *, delay_s: float = 0.3, timeout: float = 10.0, risk: str = "medium") -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write", risk=risk, business_key=("order_id",), timeout=timeout)
    def refund(order_id: str) -> str:
        """Refund an order (in a worker thread)."""
        time.sleep(delay_s)
        ran.append(order_id)
        return f"refunded {order_id}"

    @box.tool(effect="write", business_key=("order_id",), timeout=timeout)
    async def refund_async(order_id: str) -> str:
        """Refund an order (on the event loop)."""
        await anyio.sleep(delay_s)
        ran.append(order_id)
        return f"refunded {order_id}"

    return box


def call(tool: str, id: str = "c1", order_id: str = "A1") -> ToolCall:
    return ToolCall(id=id, name=tool, arguments={"order_id": order_id}, run_id="run-1")


async def executions(stores: Stores, tool: str) -> list[Any]:
    return [e for e in await stores.audit.entries() if e.tool == tool and e.decision in ("allow", "approved")]


async def cancelled_in_scope(gate: Gate, tool_call: ToolCall, after_s: float = 0.05, **kw: Any) -> float:
    """Call under a cancel scope that fires mid-write; the seconds the caller was held."""
    started = time.perf_counter()
    with anyio.move_on_after(after_s) as scope:
        await gate.call(tool_call, ALICE, **kw)
        pytest.fail("the call returned instead of being cancelled")
    assert scope.cancelled_caught  # the caller's cancellation still went on
    return time.perf_counter() - started


@pytest.mark.parametrize("tool", ["refund", "refund_async"])
async def test_a_write_cancelled_by_a_cancel_scope_finishes_is_recorded_and_replays(stores, tool):
    ran: list[str] = []
    gate = Gate(shop(ran), stores=stores)

    held = await cancelled_in_scope(gate, call(tool))
    assert ran == ["A1"] and held >= 0.25  # the write ran to its end (the async one too), then it stopped
    (entry,) = await executions(stores, tool)  # audited once, as executed
    assert entry.error_code is None and entry.result_digest is not None

    again = await gate.call(call(tool, id="c2"), ALICE)
    assert not again.is_error and again.replayed and again.content == "refunded A1"
    assert ran == ["A1"]


async def test_a_sync_write_whose_task_is_cancelled_natively_is_waited_for_and_recorded(stores):
    ran: list[str] = []
    gate = Gate(shop(ran), stores=stores)

    task = asyncio.create_task(gate.call(call("refund"), ALICE))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ran == ["A1"]  # the thread had finished before the cancellation came out
    (entry,) = await executions(stores, "refund")
    assert entry.error_code is None
    again = await gate.call(call("refund", id="c2"), ALICE)
    assert again.replayed and again.content == "refunded A1" and ran == ["A1"]


async def test_an_async_write_cancelled_natively_is_uncertain_and_never_runs_again(stores):
    ran: list[str] = []
    gate = Gate(shop(ran), stores=stores)

    task = asyncio.create_task(gate.call(call("refund_async"), ALICE))
    await asyncio.sleep(0.05)
    task.cancel()  # thrown into the tool itself: it may have done half its work
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ran == []
    (entry,) = [e for e in await stores.audit.entries() if e.tool == "refund_async"]
    assert entry.decision == "error" and entry.error_code == "TIMEOUT"
    again = await gate.call(call("refund_async", id="c2"), ALICE)
    assert again.is_error and again.error.code == "INVALID_STATE"
    assert again.error.details["idempotency"] == "uncertain"
    await anyio.sleep(0.3)
    assert ran == []


async def test_an_approved_write_cancelled_mid_way_replays_under_the_same_approval(stores):
    ran: list[str] = []
    gate = Gate(shop(ran, risk="high"), stores=stores)
    asked = await gate.call(call("refund"), ALICE)
    assert asked.approval is not None
    approval_id = asked.approval.approval_id
    await gate.approvals.approve(approval_id, BOB)

    await cancelled_in_scope(gate, call("refund", id="c2"), approval_id=approval_id)
    assert ran == ["A1"]
    (entry,) = await executions(stores, "refund")
    assert entry.approval_id == approval_id

    again = await gate.call(call("refund", id="c3"), ALICE, approval_id=approval_id)
    assert not again.is_error, again.content  # not "the approval is used"
    assert again.replayed and again.content == "refunded A1" and ran == ["A1"]


async def test_a_cancelled_caller_is_held_no_longer_than_the_tools_timeout(stores):
    release = threading.Event()
    box = Toolbox()

    @box.tool(effect="write", business_key=("order_id",), timeout=0.3)
    def stuck(order_id: str) -> str:
        """Hang until released."""
        release.wait(10)
        return "done"

    gate = Gate(box, stores=stores)
    try:
        held = await cancelled_in_scope(gate, call("stuck"))
    finally:
        release.set()
    assert 0.2 <= held < 2.0
    (entry,) = [e for e in await stores.audit.entries() if e.tool == "stuck"]
    assert entry.error_code == "TIMEOUT"  # may or may not have acted: uncertain, not run again
    again = await gate.call(call("stuck", id="c2"), ALICE)
    assert again.is_error and again.error.code == "INVALID_STATE"


async def test_a_read_is_still_abandoned_at_once(stores):
    box = Toolbox()

    @box.tool(timeout=10)
    def lookup(order_id: str) -> str:
        """Look up slowly."""
        time.sleep(0.5)
        return "found"

    gate = Gate(box, stores=stores)
    held = await cancelled_in_scope(gate, call("lookup"))
    assert held < 0.3  # nothing to record for a read: the caller goes at once
