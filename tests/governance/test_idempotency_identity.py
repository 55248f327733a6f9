"""Idempotency keys are bound to the verified principal, and a write retried without a run runs once.

Each test runs on memory, SQLite and Postgres (the `stores` fixture). Before keys carried the user
and a runless basis, a write sent twice without a run id executed twice (each call minted its key
from a fresh random run), and a second user of the tenant naming the first user's run id was
replayed the first user's stored result.
"""

from __future__ import annotations

import anyio
import pytest

from maitre import Gate, GateLimits, Principal, Toolbox, ToolCall
from maitre.gate.base import CallOptions
from maitre.stores import Stores, open_stores

from .conftest import make_gate

pytestmark = pytest.mark.anyio

BOB = Principal(user="bob", tenant="acme")


class Ledger:
    """A write tool whose every execution is counted, and whose result names who it ran for."""

    def __init__(self, delay: float = 0.0) -> None:
        self.executed: list[tuple[str, str]] = []
        self.box = Toolbox()
        ledger = self

        @self.box.tool(effect="write")
        async def ship(order: str, who: Principal) -> dict:
            """Ship an order."""
            ledger.executed.append((who.user, order))
            if delay:
                await anyio.sleep(delay)
            return {"shipped": order, "for": who.user, "n": len(ledger.executed)}


def ship(order: str = "o1", id: str = "c1", run_id: str | None = None) -> ToolCall:
    return ToolCall(id=id, name="ship", arguments={"order": order}, run_id=run_id)


async def twins(stores: Stores, n: int) -> list[Stores]:
    """`n` more handles on the same backing store (other connections, as other processes have)."""
    db = getattr(stores, "db", None)
    if db is None:
        return [stores] * n
    if hasattr(db, "schema"):
        return [await open_stores(db.dsn, schema=db.schema) for _ in range(n)]
    return [await open_stores(db.path) for _ in range(n)]


async def close_twins(stores: Stores, handles: list[Stores]) -> None:
    for handle in {id(h): h for h in handles}.values():
        if handle is not stores:
            await handle.close()


async def test_a_runless_write_retried_with_the_same_arguments_replays_instead_of_running_twice(
    stores, alice
):
    """Two identical calls without a run id: one execution; the retry says it was a replay."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores)
    first = await gate.call(ship(id="a"), alice)
    second = await gate.call(ship(id="b"), alice)
    assert ledger.executed == [("alice", "o1")]
    assert not first.replayed and second.replayed and not second.is_error
    assert second.structured == first.structured  # the stored value, unchanged
    assert second.content.startswith(first.content)
    assert "[replayed: an identical call by you" in second.content and "nothing ran again" in second.content
    other = await gate.call(ship("o2", id="c"), alice)  # other arguments: another operation
    assert not other.replayed and len(ledger.executed) == 2


async def test_two_users_of_one_tenant_naming_the_same_run_id_each_execute_and_see_only_their_own_result(
    stores, alice
):
    """Bob sending Alice's run id reaches his own key: his call runs, and never replays hers."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores)
    hers = await gate.call(ship(run_id="run_shared"), alice)
    his = await gate.call(ship(run_id="run_shared"), BOB)
    assert ledger.executed == [("alice", "o1"), ("bob", "o1")]
    assert not his.replayed and his.structured["for"] == "bob"
    assert "alice" not in his.content
    again = await gate.call(ship(id="c2", run_id="run_shared"), alice)
    assert again.replayed and again.structured == hers.structured


async def test_runless_calls_of_two_users_never_replay_each_others_result(stores, alice):
    """The runless dedupe window is per principal: Bob's identical call executes."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores)
    await gate.call(ship(), alice)
    his = await gate.call(ship(), BOB)
    assert not his.replayed and his.structured["for"] == "bob"
    assert len(ledger.executed) == 2


async def test_after_the_window_a_runless_write_runs_again_exactly_once_even_with_concurrent_callers(
    stores, alice
):
    """Past `dedupe_window_s`, five concurrent identical calls: exactly one executes, none twice."""
    ledger = Ledger(delay=0.3)
    gate = Gate(ledger.box, stores=stores, limits=GateLimits(dedupe_window_s=0.2))
    assert not (await gate.call(ship(), alice)).is_error
    await anyio.sleep(0.3)
    handles = await twins(stores, 5)
    gates = [Gate(ledger.box, stores=s, limits=GateLimits(dedupe_window_s=0.2)) for s in handles]
    results = []

    async def one(i: int) -> None:
        results.append(await gates[i].call(ship(id=f"c{i}"), alice))

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(one, i)
    assert len(ledger.executed) == 2
    outcomes = sorted("replayed" if r.replayed else (r.error.code if r.error else "ok") for r in results)
    assert outcomes.count("ok") == 1
    assert set(outcomes) <= {"ok", "CONFLICT", "replayed"}
    within = await gate.call(ship(id="late"), alice)  # inside the new window: the new result replays
    assert within.replayed and within.structured["n"] == 2
    await close_twins(stores, handles)


async def test_of_many_concurrent_begins_after_the_window_exactly_one_owns_the_key(stores):
    """The store's take-over of a stale completed key is atomic: 20 racers, one owner."""
    idem = stores.idempotency
    assert await idem.begin("k", tenant="acme", tool="t", fingerprint="f", now=1000.0) is None
    await idem.complete("k", '{"content":"done"}', tenant="acme", now=1001.0)
    inside = await idem.begin(
        "k", tenant="acme", tool="t", fingerprint="f", now=1005.0, reuse_completed_after_s=10
    )
    assert inside is not None and inside.state == "completed"
    handles = await twins(stores, 4)
    owners = []

    async def racer(i: int) -> None:
        store = handles[i % 4].idempotency
        got = await store.begin(
            "k",
            tenant="acme",
            tool="t",
            fingerprint="f",
            now=1020.0,
            owner=f"o{i}",
            reuse_completed_after_s=10,
        )
        if got is None:
            owners.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(racer, i)
    assert len(owners) == 1
    record = await idem.get("k", tenant="acme")
    assert record is not None and (record.state, record.result, record.owner) == (
        "in_flight",
        None,
        f"o{owners[0]}",
    )
    await close_twins(stores, handles)


async def test_a_host_key_replays_across_different_runs_of_the_same_principal(stores, alice):
    """The host's key is the operation: a second run sending it replays; without it, it runs."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores)
    click = CallOptions(idempotency_key="click-7f3a")
    first = await gate.call(ship(run_id="run_one"), alice, options=click)
    second = await gate.call(ship(id="c2", run_id="run_two"), alice, options=click)
    assert second.replayed and second.structured == first.structured
    assert "[replayed" not in second.content  # the host chose to retry: no note for the model
    plain = await gate.call(ship(id="c3", run_id="run_three"), alice)
    assert not plain.replayed
    assert len(ledger.executed) == 2


async def test_a_host_key_sent_again_with_other_arguments_is_refused_and_runs_nothing(stores, alice):
    """The key names one operation: reused for another order it is a conflict, never a replay of
    the first order's result (which would tell the caller the second one was shipped)."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores)
    click = CallOptions(idempotency_key="click-7f3a")
    first = await gate.call(ship("o1"), alice, options=click)
    other = await gate.call(ship("o2", id="c2"), alice, options=click)
    assert other.is_error and other.error.code == "CONFLICT" and not other.replayed
    assert other.error.details == {"idempotency": "key_reused"}
    assert "o1" not in other.content  # the first operation's result is not handed out
    again = await gate.call(ship("o1", id="c3", run_id="run_two"), alice, options=click)
    assert again.replayed and again.structured == first.structured  # the same operation still replays
    assert ledger.executed == [("alice", "o1")]


async def test_a_host_key_of_one_user_is_not_usable_by_another(stores, alice):
    """Bob sending Alice's host key executes his own call and never gets her stored result."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores)
    click = CallOptions(idempotency_key="click-7f3a")
    await gate.call(ship(), alice, options=click)
    his = await gate.call(ship(), BOB, options=click)
    assert not his.replayed and his.structured["for"] == "bob"
    assert ledger.executed == [("alice", "o1"), ("bob", "o1")]


async def test_a_runless_write_that_needs_approval_never_runs_again_without_one_after_the_window(
    shop, stores, alice
):
    """Past the window the stored result no longer counts as done, so it cannot skip the approval."""
    gate = make_gate(shop, stores, limits=GateLimits(retry_backoff_s=0.001, dedupe_window_s=0.1))
    call = ToolCall(
        id="c1", name="shop.issue_large_refund", arguments={"order_id": "ORD-00000001", "amount": "4500.00"}
    )
    asked = await gate.call(call, alice)
    assert asked.error.code == "APPROVAL_REQUIRED"
    await gate.approvals.approve(asked.error.details["approval_id"], Principal(user="manager", tenant="acme"))
    done = await gate.call(call, alice, approval_id=asked.error.details["approval_id"])
    assert not done.is_error and len(shop.refunds) == 1
    await anyio.sleep(0.2)
    later = await gate.call(call, alice)
    assert len(shop.refunds) == 1
    assert later.replayed or later.error.code in ("APPROVAL_REQUIRED", "CONFLICT")


async def test_the_window_does_not_apply_to_a_call_inside_a_run(stores, alice):
    """A retry in the same run replays however late it comes (the window is for runless calls only)."""
    ledger = Ledger()
    gate = Gate(ledger.box, stores=stores, limits=GateLimits(dedupe_window_s=0.05))
    run = gate.new_run(alice)
    await gate.call(ship(), alice, run)
    await anyio.sleep(0.1)
    again = await gate.call(ship(id="c2"), alice, run)
    assert again.replayed and len(ledger.executed) == 1
