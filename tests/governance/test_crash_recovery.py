"""After a crash inside a write, the retry learns the truth at once, and a reconcile hook can settle it.

Before: the key of a process SIGKILLed inside a write stayed `in_flight` for a fixed 300 s lease,
and every retry was told CONFLICT "being executed right now by another request" (retryable) for
those five minutes although nobody was executing anything. Now the record names its owner, a
retry that finds the owner dead gets INVALID_STATE at once, the lease is the call's own longest
duration, and a tool's `reconcile(key)` hook resolves the doubt without a human.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre import Gate, GateLimits, IdempotencyKey, Principal, Toolbox, ToolCall
from maitre.gate.idempotency import LEASE_GRACE_S
from maitre.storage.owners import current_owner
from maitre.stores import Stores, open_stores

from .conftest import PG_DSN, drop_schema, postgres_reachable

WORKER = Path(__file__).with_name("recovery_worker.py")
ALICE = Principal(user="alice", tenant="acme")


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store several processes share."""
    if request.param == "sqlite":
        yield str(tmp_path / "maitre.db")
        return
    why = postgres_reachable()
    if why:
        pytest.skip(why)
    schema = f"maitre_rec_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{PG_DSN}?schema={schema}"
    finally:
        drop_schema(schema)


def start(url: str, ledger: Path, mode: str, reconcile: str = "none") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, str(ledger), mode, reconcile],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def crash_inside(url: str, ledger: Path, mode: str) -> None:
    """Run the write in a process and SIGKILL it inside the tool."""
    victim = start(url, ledger, mode)
    try:
        assert victim.stdout is not None and victim.stdout.readline().strip() == "IN_TOOL"
    finally:
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)


def outcome(process: subprocess.Popen) -> dict[str, Any]:
    out, err = process.communicate(timeout=90)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def retry(url: str, ledger: Path, reconcile: str = "none") -> dict[str, Any]:
    return outcome(start(url, ledger, "normal", reconcile))


def ledger_lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def test_a_retry_after_the_owner_was_sigkilled_is_invalid_state_at_once_not_conflict(store_url, tmp_path):
    """The dead owner's key is reported in doubt immediately (not CONFLICT for the lease)."""
    ledger = tmp_path / "ledger.txt"
    crash_inside(store_url, ledger, "after")
    first = retry(store_url, ledger)
    assert first["code"] == "INVALID_STATE", first
    assert first["seconds"] < 5
    assert "may or may not have taken effect" in first["content"] and "reconcile" in first["content"]
    assert retry(store_url, ledger)["code"] == "INVALID_STATE"  # it stays in doubt until someone decides
    assert len(ledger_lines(ledger)) == 1


def test_a_reconcile_hook_that_finds_the_effect_replays_it(store_url, tmp_path):
    """Killed after the side effect: the hook sees it, the key completes with its result, nothing reruns."""
    ledger = tmp_path / "ledger.txt"
    crash_inside(store_url, ledger, "after")
    first = retry(store_url, ledger, "ledger")
    assert (first["code"], first["replayed"]) == ("ok", True), first
    assert first["structured"] == {"refunded": "ORD-1", "reconciled": True}
    again = retry(store_url, ledger, "ledger")
    assert again["replayed"] and again["structured"] == first["structured"]
    assert len(ledger_lines(ledger)) == 1


def test_a_reconcile_hook_that_finds_nothing_lets_exactly_one_retry_execute(store_url, tmp_path):
    """Killed before the side effect: two retries racing, the refund is made exactly once."""
    ledger = tmp_path / "ledger.txt"
    crash_inside(store_url, ledger, "before")
    assert ledger_lines(ledger) == []
    racers = [start(store_url, ledger, "normal", "ledger") for _ in range(2)]
    results = [outcome(p) for p in racers]
    assert len(ledger_lines(ledger)) == 1
    fresh = [r for r in results if r["code"] == "ok" and not r["replayed"]]
    assert len(fresh) == 1, results
    assert all(r is fresh[0] or r["replayed"] or r["code"] == "CONFLICT" for r in results), results
    assert retry(store_url, ledger, "ledger")["replayed"]


def test_a_live_owner_in_another_process_still_gets_conflict(store_url, tmp_path):
    """While the owner is alive the retry waits (CONFLICT); once it is killed, INVALID_STATE."""
    ledger = tmp_path / "ledger.txt"
    owner = start(store_url, ledger, "after")
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "IN_TOOL"
        busy = retry(store_url, ledger)
        assert busy["code"] == "CONFLICT" and "right now" in busy["content"]
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
    assert retry(store_url, ledger)["code"] == "INVALID_STATE"
    assert len(ledger_lines(ledger)) == 1


# -- in one process, on every backend ---------------------------------------------------------------


def _owner(**changes: Any) -> str:
    fields = json.loads(current_owner())
    fields.update(changes)
    return json.dumps(fields)


def _write_box(executed: list[str], **options: Any) -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write", business_key=("order",), **options)
    async def ship(order: str) -> dict:
        """Ship an order."""
        executed.append(order)
        return {"shipped": order}

    return box


def _ship(id: str = "c1") -> ToolCall:
    return ToolCall(id=id, name="ship", arguments={"order": "o1"})


@pytest.mark.anyio
async def test_the_lease_is_the_calls_longest_duration_not_five_minutes(stores):
    """timeout 2 s, one retry, backoff cap 0.5 s: the lease is 2*2 + 0.5 + grace, not 300 s."""
    seen: list[Any] = []
    box = Toolbox()

    @box.tool(effect="write", timeout=2, retries=1)
    async def charge(order: str, key: IdempotencyKey, store: Stores) -> str:
        """Charge an order."""
        seen.append(await store.idempotency.get(key, tenant="acme"))
        return "charged"

    gate = Gate(box, stores=stores, limits=GateLimits(retry_backoff_cap_s=0.5))
    result = await gate.call(ToolCall(id="c", name="charge", arguments={"order": "o1"}), ALICE)
    assert not result.is_error
    record = seen[0]
    assert record.lease_until - record.created_at == pytest.approx(2 * 2 + 0.5 + LEASE_GRACE_S)
    assert record.owner == current_owner()


async def _claim_as(gate: Gate, stores: Stores, owner: str) -> None:
    """Record the intent of the next `ship` call as if `owner` had claimed it and was executing."""
    from maitre.gate.base import CallContext
    from maitre.gate.idempotency import mint_key

    ctx = CallContext(gate=gate, call=_ship(), principal=ALICE, run=gate.new_run(ALICE))
    ctx.tool = gate.find_tool("ship")
    ctx.validated_json = {"order": "o1"}
    key = mint_key(ctx)
    assert (
        await stores.idempotency.begin(key, tenant="acme", tool="ship", fingerprint="f", owner=owner) is None
    )


@pytest.mark.anyio
async def test_an_owner_on_another_machine_is_never_judged_dead_before_its_lease(stores):
    """A pid of another host means nothing here: the retry waits (CONFLICT), nothing runs twice."""
    executed: list[str] = []
    gate = Gate(_write_box(executed), stores=stores)
    await _claim_as(gate, stores, _owner(host="another-host", pid=1))
    result = await gate.call(_ship(), ALICE)
    assert result.error.code == "CONFLICT" and executed == []


@pytest.mark.anyio
async def test_an_owner_whose_pid_now_belongs_to_another_process_is_dead(stores):
    """Same host, pid alive but started at another time (pid reuse): INVALID_STATE at once."""
    executed: list[str] = []
    gate = Gate(_write_box(executed), stores=stores)
    await _claim_as(gate, stores, _owner(pid=1, start=-1))
    result = await gate.call(_ship(), ALICE)
    assert result.error.code == "INVALID_STATE" and result.error.details["cause"] == "owner_gone"
    assert executed == []


@pytest.mark.anyio
async def test_an_owner_that_is_this_process_is_alive(stores):
    """Another task of this very process holds the key: CONFLICT, never a takeover."""
    executed: list[str] = []
    gate = Gate(_write_box(executed, reconcile=lambda key: None), stores=stores)
    await _claim_as(gate, stores, current_owner())
    result = await gate.call(_ship(), ALICE)
    assert result.error.code == "CONFLICT" and executed == []


@pytest.mark.anyio
async def test_a_timed_out_write_whose_reconcile_finds_the_effect_replays_it(stores):
    """The tool acted, then hung past its deadline: the next call asks the hook and replays."""
    charged: list[str] = []

    def reconcile(key: IdempotencyKey) -> dict | None:
        return {"charged": charged[0], "reconciled": True} if charged else None

    box = Toolbox()

    @box.tool(effect="write", business_key=("order",), timeout=0.1, reconcile=reconcile)
    async def charge(order: str) -> dict:
        """Charge an order."""
        charged.append(order)
        await anyio.sleep(1)
        return {"charged": order}

    gate = Gate(box, stores=stores)
    call = ToolCall(id="c", name="charge", arguments={"order": "o1"})
    assert (await gate.call(call, ALICE)).error.code == "TIMEOUT"
    second = await gate.call(call, ALICE)
    assert second.replayed and not second.is_error
    assert second.structured == {"charged": "o1", "reconciled": True}
    third = await gate.call(call, ALICE)
    assert third.replayed and third.structured == second.structured
    assert charged == ["o1"]
    decisions = [e.decision for e in await stores.audit.entries()]
    assert decisions[-2:] == ["replayed", "replayed"]


@pytest.mark.anyio
async def test_concurrent_retries_of_an_in_doubt_key_reconcile_one_at_a_time_and_execute_once(stores):
    """The hook finds nothing: of five racing retries exactly one executes; the others wait or replay."""
    executed: list[str] = []
    slow = {"first": True}

    async def reconcile(key: IdempotencyKey) -> None:
        await anyio.sleep(0.1)
        return None

    box = Toolbox()

    @box.tool(effect="write", business_key=("order",), timeout=0.3, reconcile=reconcile)
    async def charge(order: str) -> str:
        """Charge an order."""
        if slow.pop("first", False):
            await anyio.sleep(1)  # stopped at the deadline before acting
        executed.append(order)
        return "charged"

    gate = Gate(box, stores=stores)
    call = ToolCall(id="c", name="charge", arguments={"order": "o1"})
    assert (await gate.call(call, ALICE)).error.code == "TIMEOUT"
    assert executed == []
    results = []

    async def one() -> None:
        results.append(await gate.call(call, ALICE))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert executed == ["o1"]
    codes = sorted("replayed" if r.replayed else (r.error.code if r.error else "ok") for r in results)
    assert codes.count("ok") == 1 and set(codes) <= {"ok", "CONFLICT", "replayed"}


@pytest.mark.anyio
async def test_a_reconcile_hook_that_raises_leaves_the_key_for_a_human(stores):
    """A failing check decides nothing: INVALID_STATE, nothing executes, the key stays in doubt."""
    executed: list[str] = []

    def reconcile(key: IdempotencyKey) -> None:
        raise SystemExit("the provider is down")

    box = Toolbox()

    @box.tool(effect="write", business_key=("order",), timeout=0.1, reconcile=reconcile)
    async def charge(order: str) -> str:
        """Charge an order."""
        executed.append(order)
        await anyio.sleep(1)
        return "charged"

    gate = Gate(box, stores=stores)
    call = ToolCall(id="c", name="charge", arguments={"order": "o1"})
    assert (await gate.call(call, ALICE)).error.code == "TIMEOUT"
    for _ in range(2):
        result = await gate.call(call, ALICE)
        assert result.error.code == "INVALID_STATE" and "SystemExit" in result.content
    assert executed == ["o1"]


# -- an existing database ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_idempotency_table_written_before_owners_gets_the_column_when_opened(store_url):
    """A table without `owner` (the previous version's) is upgraded on open; its records still read."""
    stores = await open_stores(store_url)
    await stores.idempotency.begin("old", tenant="acme", tool="t", fingerprint="f", now=1.0, lease_s=10)
    await _drop_owner_column(stores)
    await stores.close()

    stores = await open_stores(store_url)
    try:
        old = await stores.idempotency.begin("old", tenant="acme", tool="t", fingerprint="f", now=50.0)
        assert old is not None and (old.state, old.owner) == ("uncertain", None)  # lease passed
        assert (
            await stores.idempotency.begin("new", tenant="acme", tool="t", fingerprint="f", owner="me")
            is None
        )
        new = await stores.idempotency.get("new", tenant="acme")
        assert new is not None and new.owner == "me"
    finally:
        await stores.close()


async def _drop_owner_column(stores: Stores) -> None:
    db: Any = stores.db  # type: ignore[attr-defined]
    if hasattr(db, "schema"):
        await db.execute(db.q("ALTER TABLE {s}.idempotency DROP COLUMN owner"))
        return
    conn = sqlite3.connect(db.path)
    try:
        conn.execute("ALTER TABLE idempotency DROP COLUMN owner")
        conn.commit()
    finally:
        conn.close()
    assert "owner" not in {
        row[1] for row in sqlite3.connect(db.path).execute("PRAGMA table_info(idempotency)")
    }
