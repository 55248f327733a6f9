"""Hostile tools contained (issue 10, item 5): each test is an attack a tool can make on its host.

A tool may raise what no well-behaved code raises (SystemExit, KeyboardInterrupt, GeneratorExit, a
BaseException of its own), hang its worker thread forever, or return far more than anyone can read.
None of these may stop the gate, starve the other tools, or outlast the call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from maitre import Gate, GateLimits, Principal, Toolbox, ToolCall
from maitre.exceptions import ToolDefinitionError
from maitre.gate.execute import SYNC_POOL_SIZE, sync_threads_held
from maitre.gate.shape import split_pages
from maitre.stores import MemoryStores
from maitre.tokens import count_tokens, truncate_to_tokens

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme")


class Custom(BaseException):
    """A BaseException of the tool's own, which `except Exception` does not catch."""


RAISED: list[BaseException] = [
    SystemExit(3),
    KeyboardInterrupt(),
    GeneratorExit(),
    Custom("boom"),
    asyncio.CancelledError(),  # raised by the tool itself, while nobody cancelled the caller
]


def _call(name: str, arguments: dict[str, Any] | None = None, id: str = "c1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments or {})


def _raising_box(exc: BaseException) -> Toolbox:
    box = Toolbox()

    @box.tool
    def sync_raiser() -> str:
        """Raise from a worker thread."""
        raise exc

    @box.tool
    async def async_raiser_at_once() -> str:
        """Raise before the first suspension point."""
        raise exc

    @box.tool
    async def async_raiser_later() -> str:
        """Raise after suspending once."""
        await anyio.sleep(0.01)
        raise exc

    @box.tool
    def ping() -> str:
        """Answer."""
        return "pong"

    return box


@pytest.mark.parametrize("exc", RAISED, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("tool", ["sync_raiser", "async_raiser_at_once", "async_raiser_later"])
async def test_a_tool_raising_any_base_exception_is_an_audited_internal_result(exc, tool):
    """SystemExit and friends from a tool come back as INTERNAL, audited, and the gate keeps working."""
    stores = MemoryStores()
    gate = Gate(_raising_box(exc), stores=stores)
    result = await gate.call(_call(tool), ALICE)
    assert result.is_error and result.error.code == "INTERNAL"
    assert result.error.details["exception"] == type(exc).__name__
    assert "internal error" in result.content
    after = await gate.call(_call("ping", id="c2"), ALICE)
    assert after.content == "pong"
    entries = await stores.audit.entries()
    assert [(e.tool, e.error_code) for e in entries] == [(tool, "INTERNAL"), ("ping", None)]


async def test_a_write_that_raised_system_exit_is_uncertain_and_never_runs_again():
    """The tool ran before it raised, so its key is marked uncertain: a retry does not execute it twice."""
    box = Toolbox()
    runs: list[str] = []

    @box.tool(effect="write", business_key=("order_id",))
    def cancel_order(order_id: str) -> str:
        """Cancel an order, then die."""
        runs.append(order_id)
        raise SystemExit(1)

    gate = Gate(box, stores=MemoryStores())
    first = await gate.call(_call("cancel_order", {"order_id": "A1"}), ALICE)
    again = await gate.call(_call("cancel_order", {"order_id": "A1"}, id="c2"), ALICE)
    assert first.error.code == "INTERNAL"
    assert again.is_error and again.error.code == "INVALID_STATE"
    assert "may" in again.content and runs == ["A1"]


def _sleepy_box() -> Toolbox:
    box = Toolbox()

    @box.tool(timeout=30)
    async def sleepy() -> str:
        """Sleep for a long time."""
        await anyio.sleep(20)
        return "woke"

    return box


async def test_the_hosts_own_cancellation_still_propagates_through_an_anyio_scope():
    """A host that cancels its own work is obeyed: the gate does not turn that into a result."""
    gate = Gate(_sleepy_box())
    start = time.perf_counter()
    with anyio.move_on_after(0.1) as scope:
        await gate.call(_call("sleepy"), ALICE)
        pytest.fail("the call returned instead of being cancelled")
    assert scope.cancelled_caught and time.perf_counter() - start < 2


async def test_the_hosts_own_cancellation_still_propagates_through_task_cancel():
    """`task.cancel()` on the calling task raises CancelledError out of `Gate.call`, as before."""
    gate = Gate(_sleepy_box())
    task = asyncio.create_task(gate.call(_call("sleepy"), ALICE))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- the worker-thread pool ---------------------------------------------------------------------


@pytest.fixture
def gates_released() -> Iterator[threading.Event]:
    """An event the hung tools wait on; set at teardown, which then waits for their threads to return."""
    release = threading.Event()
    yield release
    release.set()
    deadline = time.monotonic() + 10
    while sync_threads_held() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sync_threads_held() == 0, "hung tool threads did not return"


def _hanging_box(release: threading.Event, tools: int, **options: Any) -> Toolbox:
    box = Toolbox()
    for i in range(tools):

        def hang() -> str:
            """Block the worker thread until the test lets go."""
            release.wait(30)
            return "late"

        box.add_tool(hang, name=f"hang{i}", timeout=0.3, **options)

    @box.tool(timeout=5)
    def ping() -> str:
        """Answer at once."""
        return "pong"

    return box


async def _timed(gate: Gate, name: str, id: str) -> tuple[Any, float]:
    start = time.perf_counter()
    result = await gate.call(_call(name, id=id), ALICE)
    return result, time.perf_counter() - start


async def _many(gate: Gate, names: list[str]) -> list[tuple[Any, float]]:
    out: list[tuple[Any, float]] = [None] * len(names)  # type: ignore[list-item]

    async def one(i: int, name: str) -> None:
        out[i] = await _timed(gate, name, f"c{i}")

    async with anyio.create_task_group() as tg:
        for i, name in enumerate(names):
            tg.start_soon(one, i, name)
    return out


async def test_seventy_hung_calls_of_one_tool_cannot_starve_the_other_sync_tools(gates_released):
    """The per-tool limit (8 by default) refuses the extra calls at once; another sync tool still answers."""
    gate = Gate(_hanging_box(gates_released, 1))
    outcomes = await _many(gate, ["hang0"] * 70)
    timed_out = [t for r, t in outcomes if r.error.code == "TIMEOUT"]
    refused = [(r, t) for r, t in outcomes if r.error.code == "TEMPORARY_UNAVAILABLE"]
    assert len(timed_out) == 8 and len(refused) == 62
    assert all(t < 0.25 for _, t in refused)  # refused at admission, not at the 0.3 s deadline
    assert all(r.error.retryable and r.error.retry_after_s for r, _ in refused)
    # The eight timed-out threads are still stuck: they still count against the tool's limit.
    stuck, took = await _timed(gate, "hang0", "again")
    assert stuck.error.code == "TEMPORARY_UNAVAILABLE" and took < 0.25
    pong, took = await _timed(gate, "ping", "p")
    assert pong.content == "pong" and took < 1.0


async def test_a_full_thread_pool_refuses_at_once_and_recovers_when_threads_return(gates_released):
    """Hung tools beyond the pool's size: every sync call is TEMPORARY_UNAVAILABLE at once, then works again."""
    tools = SYNC_POOL_SIZE // 8 + 1
    gate = Gate(_hanging_box(gates_released, tools))
    outcomes = await _many(gate, [f"hang{i}" for i in range(tools) for _ in range(8)])
    assert sum(r.error.code == "TIMEOUT" for r, _ in outcomes) == SYNC_POOL_SIZE
    refused = [(r, t) for r, t in outcomes if r.error.code == "TEMPORARY_UNAVAILABLE"]
    assert len(refused) == 8 and all(t < 0.25 for _, t in refused)
    assert sync_threads_held() == SYNC_POOL_SIZE
    busy, took = await _timed(gate, "ping", "p1")
    assert busy.error.code == "TEMPORARY_UNAVAILABLE" and took < 0.25
    assert "worker threads" in busy.content and busy.error.retry_after_s
    gates_released.set()
    deadline = time.monotonic() + 5
    while sync_threads_held() and time.monotonic() < deadline:  # noqa: ASYNC110 - a counter, not an event
        await anyio.sleep(0.01)
    pong, _ = await _timed(gate, "ping", "p2")
    assert pong.content == "pong"


async def test_a_tools_own_concurrency_limit_is_enforced_and_validated(gates_released):
    """`max_concurrency=2` lets two calls in; `max_concurrency=0` is a definition error."""
    gate = Gate(_hanging_box(gates_released, 1, max_concurrency=2))
    outcomes = await _many(gate, ["hang0"] * 3)
    assert sorted(r.error.code for r, _ in outcomes) == ["TEMPORARY_UNAVAILABLE", "TIMEOUT", "TIMEOUT"]
    refused = next(r for r, _ in outcomes if r.error.code == "TEMPORARY_UNAVAILABLE")
    assert refused.error.details == {"reason": "tool_concurrency", "limit": 2}
    with pytest.raises(ToolDefinitionError, match="max_concurrency"):
        Toolbox().add_tool(lambda: "x", name="bad", max_concurrency=0)


# -- big results ----------------------------------------------------------------------------------

MIXED = "line {i}: naïve café – 東京 📦 ok\n"


@pytest.mark.parametrize("page_tokens", [1, 3, 16, 200])
def test_pages_concatenate_back_to_the_original_text_exactly(page_tokens):
    """Pages cut on token boundaries never split a character and lose or duplicate nothing."""
    text = "".join(MIXED.format(i=i) for i in range(60)) + "🧪" * 7 + "\ud800 lone"
    pages = split_pages(text, page_tokens)
    assert "".join(pages) == text and all(pages)
    if page_tokens >= 16:
        assert all(count_tokens(p) <= page_tokens + 2 for p in pages[:-1])
        assert len(pages) >= count_tokens(text) // page_tokens
    kept, rest = truncate_to_tokens(text, page_tokens)
    assert kept + rest == text and kept == pages[0]


def _big_box() -> Toolbox:
    box = Toolbox()
    line = "2026-01-01T00:00:00Z hub-7 INFO parcel moved to bay 42 (ok) \u00e9\n"

    @box.tool(timeout=5)
    def huge_text() -> str:
        """Return 50 MB of log."""
        return line * (50 * 1024 * 1024 // len(line))

    @box.tool(timeout=5)
    def huge_data() -> list[dict[str, Any]]:
        """Return about 50 MB of rows."""
        return [{"id": i, "note": "x" * 40} for i in range(800_000)]

    @box.tool(timeout=5, max_result_bytes=64 * 1024, max_result_tokens=100_000)
    def wide() -> str:
        """Return more bytes than the tool's byte cap but fewer tokens than its token cap."""
        return "é" * 100_000

    return box


@pytest.mark.parametrize("tool", ["huge_text", "huge_data"])
async def test_a_50_mb_result_comes_back_capped_with_a_handle_within_seconds(tool):
    """The byte cap applies before any token work: the call returns fast, capped, with the rest paged."""
    gate = Gate(_big_box(), limits=GateLimits(handle_ttl_s=60))
    start = time.perf_counter()
    result = await gate.call(_call(tool), ALICE)
    assert time.perf_counter() - start < 10
    assert not result.is_error and result.handle and result.structured is None
    assert "dropped" in result.content and len(result.content.encode()) < 20_000
    assert result.usage["bytes_dropped"] > 40 * 1024 * 1024
    last = await gate.call(_call("read_result", {"handle": result.handle, "page": 2}), ALICE)
    assert not last.is_error and "page 2 of" in last.content


async def test_the_byte_cap_cuts_on_a_character_boundary_even_without_a_handle():
    """Over the byte cap but within the token cap: the kept part is shown whole, with the drop said."""
    result = await Gate(_big_box()).call(_call("wide"), ALICE)
    assert not result.is_error and result.handle is None
    shown, note = result.content.split("\n[", 1)
    assert shown == "é" * (64 * 1024 // 2) and "dropped" in note
    assert result.usage["bytes_dropped"] == 200_000 - 64 * 1024
