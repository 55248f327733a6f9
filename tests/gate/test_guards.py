"""Timeouts, retries, loop guards, retry budgets and result caps (seed 002's four guards)."""

import time

import pytest

from maitre import GateLimits

from .conftest import call

pytestmark = pytest.mark.anyio


async def test_async_tools_are_cancelled_at_the_deadline(gate, principal):
    start = time.perf_counter()
    result = await gate.call(call("slow_async", {"seconds": 5}), principal)
    elapsed = time.perf_counter() - start
    assert result.error.code == "TIMEOUT" and result.error.retryable
    assert elapsed < 1.0


async def test_sync_tools_time_out_in_their_worker_thread(gate, principal):
    start = time.perf_counter()
    result = await gate.call(call("slow_sync", {"seconds": 1.5}), principal)
    assert result.error.code == "TIMEOUT"
    assert time.perf_counter() - start < 1.0
    fast = await gate.call(call("slow_sync", {"seconds": 0.01}), principal)
    assert fast.content == "done"


async def test_declared_transient_errors_are_retried_with_backoff(gate, principal, calls):
    result = await gate.call(call("flaky", {"fail_times": 2}), principal)
    assert not result.is_error and result.usage["attempts"] == 3
    assert calls["flaky"] == 3


async def test_retries_stop_at_the_cap(gate, principal, calls):
    result = await gate.call(call("overloaded"), principal)
    assert result.error.code == "TEMPORARY_UNAVAILABLE"
    assert calls["overloaded"] == 3  # 1 + retries=2


async def test_deterministic_errors_are_never_retried(gate, principal, calls):
    result = await gate.call(call("deterministic"), principal)
    assert result.error.code == "NOT_FOUND"
    assert calls["deterministic"] == 1


async def test_the_same_call_three_times_in_a_run_is_a_loop(gate, principal, calls):
    run = gate.new_run(principal)
    codes = []
    for i in range(4):
        result = await gate.call(call("get_order", {"order_id": "A1042"}, id=f"c{i}"), principal, run)
        codes.append(result.error.code if result.error else "ok")
    assert codes == ["ok", "ok", "LOOP_DETECTED", "LOOP_DETECTED"]
    assert calls["get_order"] == 2
    assert "Change approach" in result.content


async def test_loop_state_follows_the_run_id_when_no_run_object_is_passed(gate, principal, calls):
    for i in range(3):
        result = await gate.call(call("get_order", {"order_id": "A1042"}, id=f"c{i}", run_id="r1"), principal)
    assert result.error.code == "LOOP_DETECTED"
    other = await gate.call(call("get_order", {"order_id": "A1042"}, run_id="r2"), principal)
    assert not other.is_error


async def test_the_same_error_three_times_in_a_row_is_a_loop(gate, principal):
    run = gate.new_run(principal)
    codes = []
    for order in ("A9999", "A9999"):
        codes.append((await gate.call(call("get_order", {"order_id": order}), principal, run)).error.code)
    # a third identical error would also be a repeated call; vary the run to isolate the error streak
    run.fingerprints.clear()
    codes.append((await gate.call(call("get_order", {"order_id": "A9999"}), principal, run)).error.code)
    assert codes == ["NOT_FOUND", "NOT_FOUND", "LOOP_DETECTED"]


async def test_invalid_call_budget_tells_the_model_to_stop_retrying_the_tool(gate, principal, calls):
    run = gate.new_run(principal)
    bad = ["1", "2", "3"]
    results = [await gate.call(call("get_order", {"order_id": b}), principal, run) for b in bad]
    assert [r.error.code for r in results] == ["INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "BUDGET_EXCEEDED"]
    assert "stop retrying get_order" in results[-1].content
    assert "$.order_id" in results[-1].content  # the last one still teaches
    after = await gate.call(call("get_order", {"order_id": "A1042"}), principal, run)
    assert after.error.code == "BUDGET_EXCEEDED"
    assert "get_order" not in calls
    other_tool = await gate.call(
        call("issue_refund", {"order_id": "A1042", "amount": "5", "reason": "late"}), principal, run
    )
    assert not other_tool.is_error


async def test_an_oversized_result_is_cut_and_paged_through_a_handle(gate, principal):
    result = await gate.call(call("big_log"), principal)
    assert not result.is_error and result.handle
    assert result.usage["tokens"] > 1000
    assert f'read_result(handle="{result.handle}", page=2)' in result.content
    assert result.structured is None
    page2 = await gate.call(call("read_result", {"handle": result.handle, "page": 2}), principal)
    assert not page2.is_error and "page 2 of" in page2.content
    stranger = await gate.call(
        call("read_result", {"handle": result.handle, "page": 2}),
        principal.__class__(user="u2", tenant="other"),
    )
    assert stranger.error.code == "NOT_FOUND"
    colleague = await gate.call(  # same tenant, another user: as private as the call that made it
        call("read_result", {"handle": result.handle, "page": 2}),
        principal.__class__(user="someone-else", tenant=principal.tenant),
    )
    assert colleague.error.code == "NOT_FOUND"


async def test_limits_are_configurable(calls, principal):
    from maitre import Gate

    from .conftest import make_box

    gate = Gate(make_box(calls), limits=GateLimits(repeat_limit=2, max_argument_bytes=100))
    run = gate.new_run(principal)
    await gate.call(call("get_order", {"order_id": "A1042"}), principal, run)
    second = await gate.call(call("get_order", {"order_id": "A1042"}), principal, run)
    assert second.error.code == "LOOP_DETECTED"
    big = await gate.call(call("get_order", {"order_id": "A" * 200}), principal, run)
    assert "limit is 100" in big.content
