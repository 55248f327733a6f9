"""Deletion never waits on readers (issue 16): `delete()` returns at once with a reader held open.

The reader's snapshot predates the delete and legitimately pins the old pages (SQLite) or tuples
(PostgreSQL). The delete must return at once anyway (it used to wait out the 30 s busy timeout in
`wal_checkpoint(TRUNCATE)`), and the marker must be gone within a few seconds after that reader's
transaction ends: from the database file and the WAL, scanned byte by byte, on SQLite; from every
table, the planner statistics and the dead tuples (VACUUM done) on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore

from .conftest import _PG_REASON, PG_DSN, PG_SECRET, Clock
from .test_memory_deletion import MARKERS, leaks_in_files, leaks_in_tables, populate

FEW_SECONDS = 5.0


def _poll(check, timeout: float = FEW_SECONDS) -> float | None:  # type: ignore[no-untyped-def]
    """Seconds until `check()` is true, or None if it never was within `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def test_sqlite_delete_returns_at_once_with_a_reader_held_and_the_bytes_go_when_it_ends(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "memory.db"
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    for i in range(200):
        store.write(f"user{i % 5}", f"note_{i}", f"ordinary value number {i}", "2026-01-01", "m")
    populate(store)
    with sqlite3.connect(path) as conn:  # the marker is in the main file too, not only in the WAL
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert leaks_in_files(path)

    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    seen = [r[0] for r in reader.execute("SELECT value FROM memory_facts WHERE key = 'city'")]
    assert any(m in v.lower() for v in seen for m in MARKERS)
    try:
        started = time.monotonic()
        report = store.delete("u1", "city")
        took = time.monotonic() - started
        assert report.facts == 2
        assert took < 1.0, f"delete waited {took:.1f} s for a reader"
        # The reader still sees its snapshot: that is its right, and it pins the old pages.
        assert [r[0] for r in reader.execute("SELECT value FROM memory_facts WHERE key = 'city'")] == seen
        assert not store.wait_erased(0.3), "erasure cannot finish while the reader pins the pages"
        assert leaks_in_files(path), "the pinned pages are still on disk (the test must see them)"
        # Other work goes on meanwhile, without waiting either.
        started = time.monotonic()
        store.write("u2", "diet", "vegan", "2026-02-01", "m")
        assert time.monotonic() - started < 1.0
    finally:
        reader.execute("COMMIT")
        reader.close()

    gone_after = _poll(lambda: not leaks_in_files(path))
    assert gone_after is not None, leaks_in_files(path)
    assert store.wait_erased(FEW_SECONDS)
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was emptied"
    assert leaks_in_tables(store) == []
    store.close()
    assert leaks_in_files(path) == []


def test_sqlite_a_second_store_process_reading_does_not_stall_delete(tmp_path: Path, clock: Clock) -> None:
    """The reader may be another MemoryStore on the same file (another process, in production)."""
    path = tmp_path / "memory.db"
    writer = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    populate(writer)
    other = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    with other.backend.read() as db:
        db.execute("BEGIN")
        db.execute("SELECT count(*) FROM memory_facts")
        started = time.monotonic()
        writer.delete("u1", "city")
        assert time.monotonic() - started < 1.0
        db.execute("COMMIT")
    assert writer.wait_erased(FEW_SECONDS)
    assert leaks_in_files(path) == []
    other.close()
    writer.close()


@pytest.mark.postgres
def test_postgres_delete_returns_at_once_with_a_reader_held_and_vacuum_runs_when_it_ends(
    clock: Clock,
) -> None:
    if _PG_REASON:
        pytest.skip(_PG_REASON)
    schema = f"mt_readers_{int(time.time() * 1000) % 10**9}"
    store = MemoryStore.postgres(
        PG_DSN, schema=schema, pgvector=False, embedder=HashingEmbedder(), clock=clock, secret=PG_SECRET
    )
    monitor = psycopg.connect(PG_DSN, autocommit=True)
    reader = psycopg.connect(PG_DSN, autocommit=True)  # BEGIN below is ours
    try:
        populate(store)
        monitor.execute(f'ANALYZE "{schema}".memory_facts')  # type: ignore[arg-type]
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        seen = reader.execute(
            f"SELECT value FROM \"{schema}\".memory_facts WHERE user_id = 'u1' AND key = 'city'"
        ).fetchall()  # type: ignore[arg-type]
        assert len(seen) == 2

        started = time.monotonic()
        assert store.delete("u1", "city").facts == 2
        took = time.monotonic() - started
        assert took < 1.0, f"delete waited {took:.1f} s for a reader"
        again = reader.execute(
            f"SELECT value FROM \"{schema}\".memory_facts WHERE user_id = 'u1' AND key = 'city'"
        ).fetchall()  # type: ignore[arg-type]
        assert again == seen, "the reader keeps its snapshot"
        assert not store.wait_erased(0.5), "VACUUM must wait until no snapshot can see the tuples"
    finally:
        reader.execute("COMMIT")
        reader.close()

    try:
        assert store.wait_erased(FEW_SECONDS), "VACUUM ran within a few seconds of the reader ending"
        assert leaks_in_tables(store) == []  # every table and pg_stats' sample values

        def no_dead_tuples() -> bool:
            rows = monitor.execute(
                "SELECT sum(n_dead_tup) FROM pg_stat_user_tables WHERE schemaname = %s "
                "AND relname IN ('memory_facts', 'memory_index')",
                (schema,),
            ).fetchone()
            return rows is not None and int(rows[0] or 0) == 0

        assert _poll(no_dead_tuples) is not None, "VACUUM removed the deleted tuples, not only hid them"
    finally:
        store.close()
        monitor.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
        monitor.close()
