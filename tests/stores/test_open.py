"""Opening stores from a URL, sharing one SQLite file, and waiting for a busy file without blocking."""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from typing import Any

import anyio
import pytest

from maitre.stores import (
    ApprovalRequest,
    MemoryStores,
    SQLiteStores,
    StoreBusyError,
    StoreError,
    open_stores,
)

pytestmark = pytest.mark.anyio


def _request(id_: str = "apr-1") -> ApprovalRequest:
    now = time.time()
    return ApprovalRequest(
        id=id_,
        tool="issue_refund",
        arguments={"amount": "12.50"},
        call_hash="a" * 64,
        user="ann",
        tenant="acme",
        created_at=now,
        expires_at=now + 600,
    )


async def test_memory_url_opens_memory_stores() -> None:
    stores = await open_stores("memory://")
    assert isinstance(stores, MemoryStores) and stores.backend == "memory"
    await stores.close()


async def test_a_plain_path_opens_one_sqlite_file_in_wal_mode(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "nested", "dir", "maitre.db")
    async with await open_stores(path) as stores:
        assert stores.backend == "sqlite"
        await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"approvals", "idempotency", "audit", "handles", "runs", "rate_limits"} <= tables
    conn.close()


async def test_sqlite_urls_follow_file_url_style_and_take_options(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    absolute = os.path.join(tmp_path, "abs.db")
    stores = await open_stores(f"sqlite://{absolute}")  # sqlite:///tmp/... -> /tmp/...
    assert stores.db.path == absolute  # type: ignore[attr-defined]
    await stores.close()
    monkeypatch.chdir(tmp_path)
    stores = await open_stores("sqlite://rel.db?synchronous=full")
    assert stores.db.path == "rel.db"  # type: ignore[attr-defined]
    assert stores.db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # type: ignore[attr-defined]
    await stores.close()
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStores(os.path.join(tmp_path, "x.db"), synchronous="SOMETIMES")  # type: ignore[arg-type]


async def test_unknown_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown store URL"):
        await open_stores("mysql://localhost/db")
    with pytest.raises(ValueError, match="redis://"):
        await open_stores("memory://", rate_limits_url="http://127.0.0.1:6379")


async def test_a_closed_store_refuses_work(tmp_path: Any) -> None:
    stores = SQLiteStores(os.path.join(tmp_path, "closed.db"))
    await stores.close()
    await stores.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await stores.runs.load("r1")


async def test_a_file_from_a_newer_maitre_is_refused(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "future.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        SQLiteStores(path)


async def test_two_openers_of_one_file_share_approvals_like_a_server_and_the_cli(tmp_path: Any) -> None:
    """The gate creates a request; the CLI, opening the same file separately, approves it."""
    path = os.path.join(tmp_path, "shared.db")
    server = SQLiteStores(path)
    await server.approvals.create(_request())

    def cli_approve() -> None:
        async def approve() -> None:
            async with await open_stores(path) as cli:
                assert [r.id for r in await cli.approvals.list(status="pending")] == ["apr-1"]
                await cli.approvals.decide("apr-1", approve=True, approver="bob")

        anyio.run(approve)

    await anyio.to_thread.run_sync(cli_approve)
    assert await server.approvals.consume("apr-1", call_hash="a" * 64)
    await server.close()


async def test_a_locked_sqlite_file_is_waited_for_without_blocking_the_event_loop(tmp_path: Any) -> None:
    """While another connection holds the write lock, the loop keeps running; the write lands after."""
    path = os.path.join(tmp_path, "busy.db")
    stores = SQLiteStores(path, busy_timeout_s=5)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    ticks = 0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.sleep(0.005)

    async def release_later() -> None:
        await anyio.sleep(0.2)
        other.execute("COMMIT")

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        tg.start_soon(release_later)
        await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
        done.set()
    assert ticks >= 10, "the event loop was blocked while waiting for the lock"
    assert await stores.runs.load("r1") == ("ok", "{}")
    other.close()
    await stores.close()


async def test_a_store_locked_for_too_long_raises_busy(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "stuck.db")
    stores = SQLiteStores(path, busy_timeout_s=0.2)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(StoreBusyError):
        await stores.audit.append(_audit_entry())
    assert 0.15 < time.monotonic() - started < 2
    other.execute("ROLLBACK")
    other.close()
    await stores.close()


def _audit_entry() -> Any:
    from maitre.audit import AuditEntry

    return AuditEntry(at=time.time(), user="ann", tenant="acme", tool="t", decision="allow")


@pytest.mark.postgres
async def test_a_postgres_url_takes_its_schema_from_the_query(pg_dsn: str, pg_schema: str) -> None:
    async with await open_stores(f"{pg_dsn}?schema={pg_schema}&connect_timeout=5") as stores:
        assert stores.backend == "postgres" and stores.db.schema == pg_schema  # type: ignore[attr-defined]
        await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(f'SELECT status FROM "{pg_schema}".runs').fetchone()
    assert row == ("ok",)


@pytest.mark.postgres
async def test_postgres_schema_names_must_be_plain_identifiers(pg_dsn: str) -> None:
    from maitre.stores.postgres import PostgresStores

    with pytest.raises(ValueError, match="identifier"):
        PostgresStores(pg_dsn, schema='x"; DROP TABLE y; --')


@pytest.mark.redis
async def test_rate_limits_can_live_in_redis_next_to_sqlite(tmp_path: Any, redis_url: str) -> None:
    prefix = f"maitre-test:{uuid.uuid4().hex}:"
    stores = await open_stores(
        os.path.join(tmp_path, "m.db"), rate_limits_url=redis_url, rate_limits_prefix=prefix
    )
    from maitre.stores import RedisRateLimiter

    assert isinstance(stores.rate_limits, RedisRateLimiter)
    assert await stores.rate_limits.acquire("k", rate_per_s=1, burst=1, now=100.0) == 0.0
    assert await stores.rate_limits.acquire("k", rate_per_s=1, burst=1, now=100.0) == pytest.approx(1.0)
    await stores.close()
    import redis

    client = redis.Redis.from_url(redis_url)
    client.delete(prefix + "k")
    client.close()
