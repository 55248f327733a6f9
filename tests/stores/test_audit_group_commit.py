"""A write's result and its audit line commit together; concurrent appends share one commit.

Commits are counted from the statements SQLite really runs (`set_trace_callback`), and every chain
is verified afterwards: batching must never cost a gap, a duplicate or a broken link.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.audit import AuditEntry, verify_store
from maitre.exceptions import StoreError
from maitre.storage.engine.base import Tx
from maitre.stores import SQLiteStores

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme")


def _entry(i: int) -> AuditEntry:
    return AuditEntry(at=1.5 + i, user="ann", tenant="acme", tool="t", decision="allow", call_id=f"c{i}")


class Shop:
    def __init__(self) -> None:
        self.runs: list[str] = []
        self.box = Toolbox()
        shop = self

        @self.box.tool(effect="write", risk="low", business_key=("order_id",))
        def refund(order_id: str) -> str:
            """Refund an order."""
            shop.runs.append(order_id)
            return f"refunded {order_id}"


@pytest.fixture
def sqlite(tmp_path: Any) -> SQLiteStores:
    return SQLiteStores(os.path.join(tmp_path, "maitre.db"))


def _trace(stores: SQLiteStores) -> list[str]:
    statements: list[str] = []
    stores.db.conn.set_trace_callback(statements.append)
    return statements


async def test_a_write_stores_its_result_in_the_transaction_that_audits_it(sqlite: SQLiteStores) -> None:
    shop = Shop()
    gate = Gate(shop.box, stores=sqlite)
    statements = _trace(sqlite)
    result = await gate.call(ToolCall(id="c1", name="refund", arguments={"order_id": "A1"}), ALICE)
    assert not result.is_error and shop.runs == ["A1"]
    commits = [i for i, sql in enumerate(statements) if sql.startswith("COMMIT")]
    assert len(commits) == 1  # the claim autocommits; completion + audit are one transaction
    begin = max(i for i, sql in enumerate(statements[: commits[0]]) if sql.startswith("BEGIN"))
    inside = statements[begin : commits[0]]
    assert any(sql.startswith("UPDATE idempotency SET state = 'completed'") for sql in inside)
    assert any(sql.startswith("INSERT INTO audit") for sql in inside)
    record = await sqlite.idempotency.get(gate_key(sqlite), tenant="acme")
    assert record is not None and record.state == "completed"
    again = await gate.call(ToolCall(id="c2", name="refund", arguments={"order_id": "A1"}), ALICE)
    assert again.replayed and shop.runs == ["A1"]
    assert (await verify_store(sqlite.audit)).ok
    await sqlite.close()


def gate_key(stores: SQLiteStores) -> str:
    (key,) = stores.db.conn.execute("SELECT idem_key FROM idempotency").fetchone()
    return str(key)


async def test_when_the_audit_line_cannot_be_written_the_result_is_still_kept(sqlite: SQLiteStores) -> None:
    sqlite.db.conn.execute(
        "CREATE TRIGGER no_refund_lines BEFORE INSERT ON audit WHEN NEW.tool = 'refund' "
        "BEGIN SELECT RAISE(ABORT, 'audit disk full'); END"
    )
    shop = Shop()
    gate = Gate(shop.box, stores=sqlite)
    result = await gate.call(ToolCall(id="c1", name="refund", arguments={"order_id": "A1"}), ALICE)
    assert result.is_error and shop.runs == ["A1"]  # the gate never raises; the tool ran once
    record = await sqlite.idempotency.get(gate_key(sqlite), tenant="acme")
    assert record is not None and record.state == "completed"  # stored on its own
    sqlite.db.conn.execute("DROP TRIGGER no_refund_lines")
    retry = await gate.call(ToolCall(id="c2", name="refund", arguments={"order_id": "A1"}), ALICE)
    assert retry.replayed and shop.runs == ["A1"]  # so a retry replays it, never runs it again
    await sqlite.close()


async def test_concurrent_sqlite_writers_are_each_audited_once_in_one_commit(sqlite: SQLiteStores) -> None:
    shop = Shop()
    gate = Gate(shop.box, stores=sqlite)
    statements = _trace(sqlite)
    callers, each = 8, 15

    async def caller(n: int) -> None:
        for i in range(each):
            order = f"O{n}-{i}"
            result = await gate.call(ToolCall(id=order, name="refund", arguments={"order_id": order}), ALICE)
            assert not result.is_error, result.content

    async with anyio.create_task_group() as tg:
        for n in range(callers):
            tg.start_soon(caller, n)
    calls = callers * each
    assert sorted(shop.runs) == sorted(f"O{n}-{i}" for n in range(callers) for i in range(each))
    commits = sum(1 for sql in statements if sql.startswith("COMMIT"))
    assert commits == calls  # a SQLite transaction never waits: one (result + audit) commit per call
    entries = await sqlite.audit.entries()
    assert [e.seq for e in entries] == list(range(1, calls + 1))
    assert sorted(str(e.call_id) for e in entries) == sorted(shop.runs)
    assert (await verify_store(sqlite.audit)).ok
    states = sqlite.db.conn.execute("SELECT DISTINCT state FROM idempotency").fetchall()
    assert states == [("completed",)]
    await sqlite.close()


@pytest.fixture
async def pg(pg_dsn: str, pg_schema: str) -> Any:
    from maitre.stores.postgres import PostgresStores

    stores = await PostgresStores.open(pg_dsn, schema=pg_schema, pool_size=8)
    try:
        yield stores
    finally:
        await stores.close()


def _count_transactions(stores: Any) -> list[int]:
    count = [0]
    real = stores.db.transact

    async def counted(op: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return await real(op, **kwargs)

    stores.db.transact = counted
    return count


@pytest.mark.postgres
async def test_postgres_batches_appends_that_arrive_during_a_write(pg: Any) -> None:
    stores = pg
    shop = Shop()
    gate = Gate(shop.box, stores=stores)
    transactions = _count_transactions(stores)

    async def caller(n: int) -> None:
        for i in range(5):
            order = f"P{n}-{i}"
            result = await gate.call(ToolCall(id=order, name="refund", arguments={"order_id": order}), ALICE)
            assert not result.is_error, result.content

    async with anyio.create_task_group() as tg:
        for n in range(6):
            tg.start_soon(caller, n)
    assert len(shop.runs) == 30
    assert transactions[0] < 30  # appends that queued behind a write shared its commit
    entries = await stores.audit.entries()
    assert [e.seq for e in entries] == list(range(1, 31))
    assert sorted(str(e.call_id) for e in entries) == sorted(shop.runs)
    assert (await verify_store(stores.audit)).ok
    retry = await gate.call(ToolCall(id="r", name="refund", arguments={"order_id": "P0-0"}), ALICE)
    assert retry.replayed and len(shop.runs) == 30


@pytest.mark.postgres
async def test_a_refused_step_fails_only_its_own_append(pg: Any) -> None:
    audit: Any = pg.audit
    await pg.db.execute("CREATE TABLE IF NOT EXISTS {s}.side (n INTEGER)")
    outcomes: dict[int, Any] = {}

    async def refused(tx: Tx) -> None:
        raise StoreError("idempotency key 'k' is unknown (released or never begun)")

    async def fine(tx: Tx) -> None:
        await tx.execute("INSERT INTO {s}.side VALUES (1)")

    async def one(i: int, step: Any) -> None:
        try:
            outcomes[i] = await audit.append_after(_entry(i), step)
        except StoreError as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        for i in range(8):  # the first writes alone; the other seven queue and go in one batch
            tg.start_soon(one, i, refused if i == 4 else fine)
    assert isinstance(outcomes.pop(4), StoreError)
    assert sorted(e.seq for e in outcomes.values()) == list(range(1, 8))
    assert await pg.db.fetchone("SELECT count(*) FROM {s}.side") == (7,)
    assert (await verify_store(audit)).ok


@pytest.mark.postgres
async def test_a_writer_cancelled_mid_write_hands_the_queue_to_the_next(pg: Any) -> None:
    audit: Any = pg.audit
    scope = anyio.CancelScope()
    written: dict[int, AuditEntry] = {}

    async def leader() -> None:
        with scope:
            await audit.append(_entry(1))

    async def follower(i: int) -> None:
        written[i] = await audit.append(_entry(i))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(leader)
            await anyio.sleep(0.001)  # the leader is inside its transaction, waiting on the server
            tg.start_soon(follower, 2)
            tg.start_soon(follower, 3)
            await anyio.lowlevel.checkpoint()
            scope.cancel()
    assert sorted(e.seq for e in written.values()) == sorted({e.seq for e in written.values()})
    calls = [e.call_id for e in await audit.entries()]
    assert "c2" in calls and "c3" in calls  # the queued appends were written by the next leader
    assert (await verify_store(audit)).ok
