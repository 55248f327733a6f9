"""Several processes sharing one store: the atomicity guarantees hold across processes, not just tasks.

N spawned processes (no state inherited by fork) race on the same SQLite file or Postgres schema:
`begin()` on the same idempotency keys, `consume()` on the same approvals, `append()` to one audit
log. One pool of workers serves every race to keep the suite fast. A last test SIGKILLs a process in
the middle of a SQLite write transaction and checks that nothing committed is lost and nothing
uncommitted appears.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import store_race_workers

from maitre.audit import verify_store
from maitre.stores import ApprovalRequest, SQLiteStores, Stores

WORKERS = 4
KEYS = 25
APPENDS = 40


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[Any, Any]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    with ctx.Pool(WORKERS, initializer=store_race_workers.init_worker, initargs=(barrier,)) as workers:
        yield workers, barrier


def _where(kind: str, tmp_path: Any, request: pytest.FixtureRequest) -> tuple[str, str | None]:
    if kind == "sqlite":
        return os.path.join(tmp_path, "shared.db"), None
    return request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")


async def _open(kind: str, where: str, schema: str | None) -> Stores:
    if kind == "sqlite":
        return SQLiteStores(where)
    from maitre.stores.postgres import PostgresStores

    return await PostgresStores.open(where, schema=schema or "maitre")


def _run(
    pool: tuple[Any, Any], kind: str, where: str, schema: str | None, op: str, count: int
) -> list[list[Any]]:
    workers, _ = pool
    tasks = [(kind, where, schema, op, worker, count) for worker in range(WORKERS)]
    return workers.map(store_race_workers.race, tasks, chunksize=1)


KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("kind", KINDS)
def test_processes_racing_begin_on_a_key_leave_exactly_one_owner(
    pool: tuple[Any, Any], kind: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """4 processes x 25 keys, all processes hitting each key at once: every key has one owner."""
    where, schema = _where(kind, tmp_path, request)
    anyio.run(_prepare, kind, where, schema)
    won = _run(pool, kind, where, schema, "begin", KEYS)
    owners = Counter(key for keys in won for key in keys)
    assert owners == Counter(range(KEYS))


@pytest.mark.parametrize("kind", KINDS)
def test_processes_racing_consume_on_an_approval_get_exactly_one_true(
    pool: tuple[Any, Any], kind: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """4 processes x 25 approved requests, all consuming each at once: each is used exactly once."""
    where, schema = _where(kind, tmp_path, request)

    async def approve_all() -> None:
        stores = await _open(kind, where, schema)
        now = time.time()
        for i in range(KEYS):
            await stores.approvals.create(
                ApprovalRequest(
                    id=f"apr-{i}",
                    tool="issue_refund",
                    arguments={"i": i},
                    call_hash="a" * 64,
                    user="ann",
                    tenant="acme",
                    created_at=now,
                    expires_at=now + 600,
                )
            )
            await stores.approvals.decide(f"apr-{i}", approve=True, approver="bob")
        await stores.close()

    anyio.run(approve_all)
    won = _run(pool, kind, where, schema, "consume", KEYS)
    uses = Counter(i for ids in won for i in ids)
    assert uses == Counter(range(KEYS))


@pytest.mark.parametrize("kind", KINDS)
def test_processes_appending_at_once_build_one_valid_chain(
    pool: tuple[Any, Any], kind: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """4 processes x 40 appends: seqs 1..160, no duplicates, and the chain verifies."""
    where, schema = _where(kind, tmp_path, request)
    anyio.run(_prepare, kind, where, schema)
    won = _run(pool, kind, where, schema, "append", APPENDS)
    seqs = sorted(seq for worker_seqs in won for seq in worker_seqs)
    assert seqs == list(range(1, WORKERS * APPENDS + 1))
    assert all(len(worker_seqs) == APPENDS for worker_seqs in won)

    async def check() -> None:
        stores = await _open(kind, where, schema)
        report = await verify_store(stores.audit)
        await stores.close()
        assert report.ok and report.checked == WORKERS * APPENDS, report

    anyio.run(check)


async def _prepare(kind: str, where: str, schema: str | None) -> None:
    # Create the tables before the race (the race itself is on data, not on DDL).
    stores = await _open(kind, where, schema)
    await stores.close()


_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time, anyio
    from maitre.audit import AuditEntry
    from maitre.stores import SQLiteStores

    async def main():
        stores = SQLiteStores(sys.argv[1])
        assert await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f") is None
        await stores.audit.append(AuditEntry(at=time.time(), user="u", tenant="acme", tool="t",
                                             decision="allow"))
        conn = stores.db.conn
        conn.execute("BEGIN IMMEDIATE")   # hold the write lock with uncommitted work
        conn.execute("INSERT INTO runs VALUES ('ghost', 'acme', 'x', '{}', 0, 0)")
        print("ready", flush=True)
        time.sleep(60)

    anyio.run(main)
    """
)


def test_a_process_killed_inside_a_sqlite_write_loses_nothing_committed(tmp_path: Any) -> None:
    """SIGKILL while holding the write lock: the lock is freed, commits survive, the rest vanishes."""
    path = os.path.join(tmp_path, "crash.db")
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, path], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)

    async def check() -> None:
        stores = SQLiteStores(path, busy_timeout_s=2)
        record = await stores.idempotency.get("k1", tenant="acme")
        assert record is not None and record.state == "in_flight"
        assert await stores.runs.load("ghost") is None
        assert (await verify_store(stores.audit)).checked == 1
        started = time.monotonic()
        await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
        assert time.monotonic() - started < 1.0
        await stores.close()

    anyio.run(check)
