"""Writes run once: runtime-minted keys, replays, in-flight conflicts, uncertain outcomes; budgets."""

import anyio
import pytest

from maitre import Principal, Toolbox, ToolCall
from maitre.gate.budget import Budgets, RateLimit

from .conftest import make_gate

pytestmark = pytest.mark.anyio

REFUND = {"order_id": "ORD-00000001", "amount": "120.00", "reason": "not_received"}


def refund(arguments=REFUND, id="c1"):
    return ToolCall(id=id, name="shop.create_refund", arguments=arguments)


async def test_a_completed_key_replays_the_stored_result_without_executing(shop, stores, alice):
    gate = make_gate(shop, stores)
    first = await gate.call(refund(), alice, gate.new_run(alice))
    second = await gate.call(refund(id="c2"), alice, gate.new_run(alice))  # another run: same business key
    assert not first.is_error and not first.replayed
    assert second.replayed and second.content == first.content
    assert len(shop.refunds) == 1
    assert shop.refunds[0]["key"].startswith("idk2_")  # hash format version 2
    entries = await stores.audit.entries()
    assert [e.replayed for e in entries] == [False, True]


async def test_the_business_key_ignores_fields_that_do_not_identify_the_operation(shop, stores, alice):
    gate = make_gate(shop, stores)
    await gate.call(refund(), alice)
    other_reason = await gate.call(refund({**REFUND, "reason": "other"}), alice)
    other_amount = await gate.call(refund({**REFUND, "amount": "121.00"}), alice)
    assert other_reason.replayed and not other_amount.replayed
    assert len(shop.refunds) == 2


async def test_a_key_written_by_the_model_is_refused(shop, stores, alice):
    gate = make_gate(shop, stores)
    result = await gate.call(refund({**REFUND, "key": "my-own-key-123456"}), alice)
    assert result.error.code == "INVALID_ARGUMENTS" and "Unknown argument 'key'" in result.content
    assert shop.refunds == []


async def test_a_clean_tool_failure_releases_the_key(shop, stores, alice):
    gate = make_gate(shop, stores)
    big = {**REFUND, "amount": "4500.00"}
    failed = await gate.call(refund(big), alice)
    assert failed.error.code == "INVALID_STATE" and "manager" in failed.content
    again = await gate.call(refund(big, id="c2"), alice)
    assert again.error.code == "INVALID_STATE" and not again.replayed  # executed again: nothing had happened


async def test_concurrent_duplicates_run_once_and_the_rest_conflict_or_replay(stores, alice):
    box = Toolbox()
    executed = []

    @box.tool(effect="write", business_key=("order",))
    async def ship(order: str) -> str:
        """Ship an order."""
        executed.append(order)
        await anyio.sleep(0.2)
        return "shipped"

    from maitre import Gate

    gate = Gate(box, stores=stores)
    results = []

    async def one(i: int) -> None:
        results.append(await gate.call(ToolCall(id=f"c{i}", name="ship", arguments={"order": "o1"}), alice))

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(one, i)
    assert executed == ["o1"]
    codes = sorted(r.error.code if r.error else "ok" for r in results)
    assert codes == ["CONFLICT"] * 4 + ["ok"]
    conflict = next(r for r in results if r.error)
    assert conflict.error.retryable and conflict.error.retry_after_s
    later = await gate.call(ToolCall(id="later", name="ship", arguments={"order": "o1"}), alice)
    assert later.replayed and executed == ["o1"]


async def test_a_write_that_timed_out_is_uncertain_and_never_runs_again(stores, alice):
    box = Toolbox()
    executed = []

    @box.tool(effect="write", timeout=0.1, retries=3)
    async def charge_card(order: str) -> str:
        """Charge a card."""
        executed.append(order)
        await anyio.sleep(1)
        return "charged"

    from maitre import Gate

    gate = Gate(box, stores=stores)
    run = gate.new_run(alice)  # without a business key, the key is the run id + the call's arguments
    first = await gate.call(ToolCall(id="a", name="charge_card", arguments={"order": "o1"}), alice, run)
    assert first.error.code == "TIMEOUT" and "may or may not" in first.content
    second = await gate.call(ToolCall(id="b", name="charge_card", arguments={"order": "o1"}), alice, run)
    assert executed == ["o1"]  # no retry of a write after a timeout, in the call or later
    assert second.error.code == "INVALID_STATE" and "did not finish cleanly" in second.content


async def test_per_class_budget_allows_three_writes_per_run(shop, stores, alice):
    gate = make_gate(shop, stores, budgets=Budgets(per_class={"write": 3}))
    run = gate.new_run(alice)
    codes = []
    for i in range(5):
        args = {**REFUND, "amount": f"{10 + i}.00"}
        result = await gate.call(refund(args, id=f"c{i}"), alice, run)
        codes.append(result.error.code if result.error else "ok")
    assert codes == ["ok", "ok", "ok", "BUDGET_EXCEEDED", "BUDGET_EXCEEDED"]
    assert len(shop.refunds) == 3
    read = await gate.call(
        ToolCall(id="r", name="shop.get_order", arguments={"order_id": "ORD-00000001"}), alice, run
    )
    assert not read.is_error


async def test_per_tool_budget_counts_executions_not_replays(shop, stores, alice):
    gate = make_gate(shop, stores, budgets=Budgets(per_tool={"shop.create_refund": 2}))
    run = gate.new_run(alice)
    assert not (await gate.call(refund(), alice, run)).is_error
    assert (await gate.call(refund(id="c2"), alice, run)).replayed
    assert run.tool_calls["shop.create_refund"] == 1
    assert not (await gate.call(refund({**REFUND, "amount": "1.00"}, id="c3"), alice, run)).is_error
    other = await gate.call(refund({**REFUND, "amount": "2.00"}, id="c4"), alice, run)
    assert other.error.code == "BUDGET_EXCEEDED"
    assert len(shop.refunds) == 2


async def test_rate_limits_answer_with_retry_after(shop, stores, alice):
    gate = make_gate(shop, stores, budgets=Budgets(rate_limit=RateLimit(per_second=1, burst=2)))
    codes = []
    for i in range(3):
        result = await gate.call(
            ToolCall(id=f"r{i}", name="shop.get_order", arguments={"order_id": "ORD-00000001"}), alice
        )
        codes.append(result.error.code if result.error else "ok")
    assert codes == ["ok", "ok", "RATE_LIMITED"]
    assert 0 < result.error.retry_after_s <= 1.0
    bob = Principal(user="bob", tenant="acme")
    assert not (
        await gate.call(ToolCall(id="b", name="shop.get_order", arguments={"order_id": "ORD-00000001"}), bob)
    ).is_error


async def test_a_tool_can_ask_for_the_gates_stores(stores, alice):
    from maitre import Gate
    from maitre.stores import Stores

    box = Toolbox()

    @box.tool
    async def count_audit(stores_: Stores) -> int:
        """How many audit entries exist."""
        return len(await stores_.audit.entries())

    gate = Gate(box, stores=stores)
    await gate.call(ToolCall(id="1", name="count_audit", arguments={}), alice)
    second = await gate.call(ToolCall(id="2", name="count_audit", arguments={}), alice)
    assert second.structured == 1  # the first call's entry, written by the gate into the same stores


async def test_rate_limits_shared_through_redis(alice):
    import uuid

    from maitre import Gate
    from maitre.stores import open_stores

    try:
        stores = await open_stores(
            "memory://",
            rate_limits_url="redis://127.0.0.1:6379/0",
            rate_limits_prefix=f"maitre-test-{uuid.uuid4().hex[:8]}:",
        )
    except Exception as exc:  # pragma: no cover - the server is part of the machine
        pytest.skip(f"Redis at 127.0.0.1:6379 is not reachable: {exc}")
    box = Toolbox()

    @box.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    try:
        gates = [
            Gate(box, stores=stores, budgets=Budgets(rate_limit=RateLimit(per_second=0.5, burst=2)))
            for _ in range(2)
        ]
        codes = []
        for i in range(3):
            result = await gates[i % 2].call(ToolCall(id=str(i), name="ping", arguments={}), alice)
            codes.append(result.error.code if result.error else "ok")
        assert codes == ["ok", "ok", "RATE_LIMITED"]  # two gates, one bucket
    finally:
        await stores.close()
