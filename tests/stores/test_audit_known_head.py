"""The audit append sealed after the head the store remembers, inserted by one guarded statement.

Several writers on one database - stores with their own remembered head, as replicas have, tasks
and processes - must still give one chain: seq 1..n with no gap, no entry twice, every link over
the entry before it. A remembered head that is stale (another writer appended) or wrong (the head
row is gone) must never be written after: the batch is undone as a whole and resealed under the lock.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any

import anyio
import pytest

from maitre.audit import AuditEntry, verify_store
from maitre.storage.audit import SQLAuditStore
from maitre.storage.engine.base import Tx
from maitre.stores import SQLiteStores

pytestmark = pytest.mark.anyio


def _entry(i: int | str) -> AuditEntry:
    return AuditEntry(at=1.25, user="ann", tenant="acme", tool="t", decision="allow", call_id=str(i))


async def _check_chain(audit: Any, call_ids: list[str]) -> None:
    entries = await audit.entries()
    assert [e.seq for e in entries] == list(range(1, len(call_ids) + 1))  # no gap, no fork
    assert Counter(str(e.call_id) for e in entries) == Counter(call_ids)  # each append exactly once
    report = await verify_store(audit)
    assert report.ok, report.reason


@pytest.fixture
def sqlite(tmp_path: Any) -> SQLiteStores:
    """SQLite stores whose audit uses the known head (off by default on SQLite)."""
    stores = SQLiteStores(os.path.join(tmp_path, "maitre.db"))
    stores.audit = SQLAuditStore(stores.db, known_head=True)
    return stores


async def _pg(pg_dsn: str, pg_schema: str) -> Any:
    from maitre.stores.postgres import PostgresStores

    return await PostgresStores.open(pg_dsn, schema=pg_schema, pool_size=4)


async def test_a_plain_sqlite_append_is_one_statement(sqlite: SQLiteStores) -> None:
    await sqlite.audit.append(_entry(0))  # the first append reads the head under the lock
    statements: list[str] = []
    sqlite.db.conn.set_trace_callback(statements.append)
    await sqlite.audit.append(_entry(1))
    assert len(statements) == 1 and statements[0].startswith("INSERT INTO audit")
    assert "WHERE EXISTS" in statements[0]  # guarded by the head it was sealed after
    await _check_chain(sqlite.audit, ["0", "1"])


async def test_a_stale_sqlite_head_is_resealed_under_the_lock(sqlite: SQLiteStores) -> None:
    other = SQLAuditStore(sqlite.db, known_head=True)  # a second writer on the same file, with its own head
    ours: Any = sqlite.audit
    await ours.append(_entry("a1"))
    await other.append(_entry("b1"))
    await other.append(_entry("b2"))
    sealed = await ours.append(_entry("a2"))  # ours still remembers seq 1
    assert sealed.seq == 4 and ours.stale_heads == 1
    await _check_chain(ours, ["a1", "b1", "b2", "a2"])


async def test_a_missing_head_row_is_never_written_after(sqlite: SQLiteStores) -> None:
    # Someone removed the head row behind the store's back (triggers dropped): the remembered head no
    # longer exists, so the guard inserts nothing and the entry is sealed after the real head.
    audit: Any = sqlite.audit
    for i in range(3):
        await audit.append(_entry(i))
    conn = sqlite.db.conn
    conn.execute("DROP TRIGGER audit_no_delete")
    conn.execute("DELETE FROM audit WHERE seq = 3")
    sealed = await audit.append(_entry(3))
    assert sealed.seq == 3 and audit.stale_heads == 1
    await _check_chain(audit, ["0", "1", "3"])


async def test_the_locked_path_stays_selectable(sqlite: SQLiteStores) -> None:
    locked = SQLAuditStore(sqlite.db, known_head=False)
    assert SQLAuditStore(sqlite.db).known_head is False  # SQLite's default: nothing to save
    await locked.append(_entry(0))
    statements: list[str] = []
    sqlite.db.conn.set_trace_callback(statements.append)
    await locked.append(_entry(1))
    assert statements[0] == "BEGIN IMMEDIATE" and any(s.startswith("SELECT seq, hash") for s in statements)
    await _check_chain(locked, ["0", "1"])


@pytest.mark.postgres
async def test_postgres_writers_with_their_own_heads_give_one_chain(pg_dsn: str, pg_schema: str) -> None:
    # Four stores on four pools (four replicas), each 50 appends from its own task, all at once.
    replicas = [await _pg(pg_dsn, pg_schema) for _ in range(4)]
    try:

        async def writer(n: int) -> None:
            for i in range(50):
                await replicas[n].audit.append(_entry(f"{n}-{i}"))

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(writer, n)
        await _check_chain(replicas[0].audit, [f"{n}-{i}" for n in range(4) for i in range(50)])
        assert sum(r.audit.stale_heads for r in replicas) > 0  # they did clash, and recovered
        assert all(r.audit.known_head for r in replicas)  # Postgres's default
    finally:
        for replica in replicas:
            await replica.close()


@pytest.mark.postgres
async def test_a_postgres_batch_over_a_stale_head_is_undone_whole(pg_dsn: str, pg_schema: str) -> None:
    # A batch of three appends, each with a step, is sealed after seq 2; while its transaction is open
    # another replica appends seq 3. The three-row insert clashes on seq 3: no row of it and none of
    # its steps may stay, and the batch is resealed after seq 3 under the lock.
    ours, other = await _pg(pg_dsn, pg_schema), await _pg(pg_dsn, pg_schema)
    try:
        await ours.db.execute("CREATE TABLE IF NOT EXISTS {s}.side (n INTEGER)")
        await ours.audit.append(_entry("a0"))
        first_open, second_open = anyio.Event(), anyio.Event()
        release_first, release_second = anyio.Event(), anyio.Event()
        runs: Counter[str] = Counter()

        def step(name: str, opened: anyio.Event | None = None, release: anyio.Event | None = None) -> Any:
            async def run(tx: Tx) -> None:
                runs[name] += 1
                if opened is not None and release is not None:
                    opened.set()
                    await release.wait()
                await tx.execute("INSERT INTO {s}.side VALUES (1)")

            return run

        async with anyio.create_task_group() as tg:
            tg.start_soon(ours.audit.append_after, _entry("a1"), step("a1", first_open, release_first))
            await first_open.wait()  # a1 is being written alone; the next three queue behind it
            tg.start_soon(ours.audit.append_after, _entry("a2"), step("a2", second_open, release_second))
            tg.start_soon(ours.audit.append_after, _entry("a3"), step("a3"))
            tg.start_soon(ours.audit.append_after, _entry("a4"), step("a4"))
            await anyio.sleep(0.05)
            release_first.set()
            await second_open.wait()  # the batch a2..a4 is open, sealed after seq 2
            assert (await other.audit.append(_entry("b0"))).seq == 3
            release_second.set()
        assert ours.audit.stale_heads == 1
        assert runs == Counter({"a1": 1, "a2": 2, "a3": 2, "a4": 2})  # the batch ran twice ...
        assert await ours.db.fetchone("SELECT count(*) FROM {s}.side") == (4,)  # ... and stayed once
        await _check_chain(ours.audit, ["a0", "a1", "b0", "a2", "a3", "a4"])
        assert [e.call_id for e in await ours.audit.entries(since_seq=3)] == ["a2", "a3", "a4"]
    finally:
        await ours.close()
        await other.close()


@pytest.mark.postgres
async def test_a_postgres_batch_is_one_guarded_statement(pg_dsn: str, pg_schema: str) -> None:
    stores = await _pg(pg_dsn, pg_schema)
    try:
        audit: Any = stores.audit
        await audit.append(_entry(0))  # the first append reads the head under the lock
        statements: list[str] = []
        real = stores.db.execute

        async def execute(sql: str, params: Any = ()) -> int:
            statements.append(sql)
            return int(await real(sql, params))

        stores.db.execute = execute
        async with anyio.create_task_group() as tg:
            for i in range(1, 6):
                tg.start_soon(audit.append, _entry(i))
        assert len(statements) < 5 and all("WHERE EXISTS" in sql for sql in statements)
        await _check_chain(audit, [str(i) for i in range(6)])
    finally:
        await stores.close()


@pytest.mark.postgres
async def test_a_postgres_batch_larger_than_one_statement_commits_as_one(pg_dsn: str, pg_schema: str) -> None:
    # 120 appends queue behind the first: more rows than one guarded INSERT takes, so the batch is
    # several guarded INSERTs in one transaction.
    stores = await _pg(pg_dsn, pg_schema)
    try:
        audit: Any = stores.audit
        await audit.append(_entry("first"))
        transactions = [0]
        real = stores.db.transact

        async def transact(op: Any, **kwargs: Any) -> Any:
            transactions[0] += 1
            return await real(op, **kwargs)

        stores.db.transact = transact
        async with anyio.create_task_group() as tg:
            for i in range(121):
                tg.start_soon(audit.append, _entry(i))
        assert transactions[0] >= 1 and audit.stale_heads == 0
        await _check_chain(audit, ["first"] + [str(i) for i in range(121)])
    finally:
        await stores.close()


_WORKER = """
import sys, anyio
from maitre.audit import AuditEntry

async def main(kind, where, name, count):
    if kind == "sqlite":
        from maitre.stores import SQLiteStores
        from maitre.storage.audit import SQLAuditStore
        stores = SQLiteStores(where)
        stores.audit = SQLAuditStore(stores.db, known_head=True)
    else:
        from maitre.stores.postgres import PostgresStores
        dsn, schema = where.split("|")
        stores = await PostgresStores.open(dsn, schema=schema)
    try:
        for i in range(count):
            await stores.audit.append(AuditEntry(
                at=1.0, user="u", tenant="t", tool="x", decision="allow", call_id=f"{name}-{i}"))
    finally:
        await stores.close()

anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
"""


async def _two_processes(kind: str, where: str) -> None:
    async def run(name: str) -> None:
        done = await anyio.run_process([sys.executable, "-c", _WORKER, kind, where, name, "50"], check=False)
        assert done.returncode == 0, done.stderr.decode()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "p")
            tg.start_soon(run, "q")


async def test_two_sqlite_processes_give_one_chain(sqlite: SQLiteStores) -> None:
    await sqlite.audit.append(_entry("first"))  # the schema exists before the workers race
    await _two_processes("sqlite", sqlite.db.path)
    await _check_chain(sqlite.audit, ["first"] + [f"{p}-{i}" for p in "pq" for i in range(50)])


@pytest.mark.postgres
async def test_two_postgres_processes_give_one_chain(pg_dsn: str, pg_schema: str) -> None:
    stores = await _pg(pg_dsn, pg_schema)
    try:
        await stores.audit.append(_entry("first"))
        await _two_processes("postgres", f"{pg_dsn}|{pg_schema}")
        await _check_chain(stores.audit, ["first"] + [f"{p}-{i}" for p in "pq" for i in range(50)])
    finally:
        await stores.close()
