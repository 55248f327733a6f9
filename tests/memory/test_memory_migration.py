"""The memory tables as the `memory` component of `maitre_schema`: old databases open, newer ones are refused.

A memory database written before the version table existed has the tables below (copied from the
backends as they were, as data) and no `maitre_schema`. The old database is built from those
statements and filled with the rows a store wrote (the row layout did not change, so the rows are
what the old code wrote too), then opened by today's code: it is recognised as version 1, gets its
row in `maitre_schema`, and every fact, hit, history and summary is what the writing store returns.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from maitre.embeddings import HashingEmbedder
from maitre.exceptions import StoreError
from maitre.memory import MemoryStore
from maitre.memory.persistence import memory_schema
from maitre.storage import SQLiteStores

from .conftest import _PG_REASON, PG_DSN, PG_SECRET, Clock

MEMORY_VERSION = memory_schema("sqlite").version
"""The memory schema's version today: an old database is migrated forward to it (version 2 added episodes)."""

# The memory schema before `maitre_schema` (memory/backend.py COMMON_SCHEMA + each backend's setup).
OLD_COMMON = [
    "CREATE TABLE IF NOT EXISTS memory_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS memory_facts (
        seq {SERIAL_PK},
        id TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        key TEXT NOT NULL,
        slot TEXT NOT NULL,
        value TEXT NOT NULL,
        valid_from BIGINT NOT NULL,
        recorded_at BIGINT NOT NULL,
        source TEXT NOT NULL,
        origin TEXT NOT NULL,
        status TEXT NOT NULL,
        superseded_by TEXT,
        superseded_at BIGINT,
        retracted INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS memory_facts_slot ON memory_facts (tenant, user_id, slot)",
    "CREATE INDEX IF NOT EXISTS memory_facts_user ON memory_facts (tenant, user_id, status, key)",
    "CREATE TABLE IF NOT EXISTS memory_tombstones (digest TEXT PRIMARY KEY, created_at BIGINT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS memory_summaries (
        id TEXT NOT NULL, tenant TEXT NOT NULL, user_id TEXT NOT NULL, kind TEXT NOT NULL,
        text TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (tenant, user_id, id))""",
    """CREATE TABLE IF NOT EXISTS memory_summary_sources (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, summary_id TEXT NOT NULL, fact_id TEXT NOT NULL,
        PRIMARY KEY (tenant, user_id, summary_id, fact_id))""",
    "CREATE INDEX IF NOT EXISTS memory_summary_sources_fact ON memory_summary_sources (fact_id)",
    """CREATE TABLE IF NOT EXISTS memory_versions (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL, version BIGINT NOT NULL,
        PRIMARY KEY (tenant, user_id))""",
]
OLD_SQLITE = [
    *(s.replace("{SERIAL_PK}", "INTEGER PRIMARY KEY AUTOINCREMENT") for s in OLD_COMMON),
    "CREATE TABLE IF NOT EXISTS memory_vectors (seq INTEGER PRIMARY KEY, tenant TEXT NOT NULL, "
    "user_id TEXT NOT NULL, vec BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_vectors_user ON memory_vectors (tenant, user_id)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(scope, body, tokenize='porter unicode61')",
]
OLD_POSTGRES = [
    *(s.replace("{SERIAL_PK}", "BIGSERIAL PRIMARY KEY") for s in OLD_COMMON),
    "CREATE TABLE memory_index (seq BIGINT PRIMARY KEY, tenant TEXT NOT NULL, "
    "user_id TEXT NOT NULL, tsv tsvector NOT NULL, emb BYTEA NOT NULL)",
    "CREATE INDEX memory_index_user ON memory_index (tenant, user_id)",
    "CREATE INDEX memory_index_tsv ON memory_index USING gin (tsv)",
]
PLAIN_TABLES = [
    "memory_meta",
    "memory_facts",
    "memory_tombstones",
    "memory_summaries",
    "memory_summary_sources",
    "memory_versions",
]
QUERIES = ["where does alice live", "what does she eat", "dentist appointment", "employer"]


def fill(store: MemoryStore) -> None:
    """A little of everything: superseded and current facts, two users, a summary, a forgotten fact."""
    paris = store.write("alice", "city", "Paris", "2025-01-01", "chat-1")
    lyon = store.write("alice", "city", "Lyon", "2026-03-01", "chat-2")
    assert paris is not None and lyon is not None
    store.write("alice", "diet", "vegetarian", "2025-06-01", "chat-1")
    store.write("alice", "employer", "Acme Robotics", "2025-02-01", "chat-3")
    store.write("alice", "dentist", "Dr Martin on rue Royale", "2026-01-10", "chat-4")
    store.write("bob", "city", "Berlin", "2025-05-05", "chat-9")
    store.write("bob", "diet", "vegan", "2025-05-05", "chat-9")
    store.add_summary("alice", "moved from Paris to Lyon in March", sources=[paris.id, lyon.id])
    store.write("bob", "allergy", "peanuts", "2025-05-06", "chat-9")
    store.delete("bob", "allergy")


def snapshot(store: MemoryStore) -> dict[str, object]:
    """What a user of the store can read back."""
    out: dict[str, object] = {}
    for user in ("alice", "bob"):
        out[f"{user}/facts"] = store.facts(user, include_history=True)
        out[f"{user}/history"] = store.history(user, "city")
        out[f"{user}/summaries"] = [(s.text, s.kind) for s in store.summaries(user)]
        for query in QUERIES:
            out[f"{user}/{query}"] = [
                (h.fact.id, h.fact.value, round(h.score, 9), h.similarity, h.lexical)
                for h in store.retrieve(user, query, 5)
            ]
    out["users"] = store.users()
    return out


def test_a_sqlite_memory_file_from_before_the_version_table_opens_with_everything(
    tmp_path: Path, clock: Clock
) -> None:
    source = MemoryStore.sqlite(tmp_path / "source.db", embedder=HashingEmbedder(), clock=clock)
    fill(source)
    expected = snapshot(source)
    source.close()

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for statement in OLD_SQLITE:
        conn.execute(statement)
    conn.execute("ATTACH DATABASE ? AS src", (str(tmp_path / "source.db"),))
    for table in (*PLAIN_TABLES, "memory_vectors"):
        conn.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table}")
    conn.execute(
        "INSERT INTO main.memory_fts (rowid, scope, body) SELECT rowid, scope, body FROM src.memory_fts"
    )
    conn.execute("DETACH DATABASE src")
    # The tombstone secret is not in the database: a copy of a store is the file and its key file.
    shutil.copyfile(tmp_path / "source.db.key", tmp_path / "old.db.key")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "maitre_schema" not in tables and "memory_facts" in tables
    assert conn.execute("SELECT count(*) FROM memory_facts").fetchone()[0] >= 6
    conn.close()

    store = MemoryStore.sqlite(old, embedder=HashingEmbedder(), clock=clock)
    try:
        assert snapshot(store) == expected
        with sqlite3.connect(old) as check:
            assert check.execute("SELECT component, version FROM maitre_schema").fetchall() == [
                ("memory", MEMORY_VERSION)
            ]
        # A forgotten fact stays forgotten (the tombstones and the secret came along).
        assert store.write("bob", "allergy", "peanuts", "2025-05-06", "chat-9") is None
        # New writes get fresh seqs and are found.
        store.write("alice", "city", "Marseille", "2026-09-01", "chat-5")
        assert store.current("alice", "city").value == "Marseille"  # type: ignore[union-attr]
        assert [h.fact.value for h in store.retrieve("alice", "city Marseille", 1)] == ["Marseille"]
    finally:
        store.close()
    reopened = MemoryStore.sqlite(old, embedder=HashingEmbedder(), clock=clock)
    try:
        assert reopened.current("alice", "city").value == "Marseille"  # type: ignore[union-attr]
    finally:
        reopened.close()


def test_a_memory_file_of_a_newer_schema_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    MemoryStore.sqlite(path, embedder=HashingEmbedder()).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE maitre_schema SET version = 99 WHERE component = 'memory'")
    with pytest.raises(StoreError, match=r"schema version 99 \(memory\).*upgrade maitre") as info:
        MemoryStore.sqlite(path, embedder=HashingEmbedder())
    assert "\n" not in str(info.value)


@pytest.mark.anyio
async def test_memory_and_the_gate_stores_share_one_file_each_with_its_version(tmp_path: Path) -> None:
    path = tmp_path / "maitre.db"
    stores = SQLiteStores(path)
    await stores.close()
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder())
    store.write("alice", "city", "Lyon")
    store.close()
    stores = SQLiteStores(path)
    await stores.close()
    with sqlite3.connect(path) as conn:
        rows = dict(conn.execute("SELECT component, version FROM maitre_schema").fetchall())
    assert rows["memory"] == MEMORY_VERSION and "gate" in rows
    reopened = MemoryStore.sqlite(path, embedder=HashingEmbedder())
    try:
        assert reopened.current("alice", "city").value == "Lyon"  # type: ignore[union-attr]
    finally:
        reopened.close()


@pytest.fixture
def pg_schemas() -> Iterator[tuple[str, str]]:
    if _PG_REASON:
        pytest.skip(_PG_REASON)
    tag = uuid.uuid4().hex[:10]
    names = (f"mt_src_{tag}", f"mt_old_{tag}")
    yield names
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.postgres
def test_a_postgres_memory_schema_from_before_the_version_table_opens_with_everything(
    pg_schemas: tuple[str, str], clock: Clock
) -> None:
    src, old = pg_schemas
    source = MemoryStore.postgres(
        PG_DSN, schema=src, pgvector=False, embedder=HashingEmbedder(), clock=clock, secret=PG_SECRET
    )
    fill(source)
    expected = snapshot(source)
    source.close()

    with psycopg.connect(PG_DSN, autocommit=True) as conn, conn.transaction():
        conn.execute(f'CREATE SCHEMA "{old}"')
        conn.execute(f'SET LOCAL search_path TO "{old}"')
        for statement in OLD_POSTGRES:
            conn.execute(statement)
        for table in (*PLAIN_TABLES, "memory_index"):
            conn.execute(f'INSERT INTO "{old}".{table} SELECT * FROM "{src}".{table}')
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('\"{old}\".memory_facts', 'seq'), "
            f'(SELECT max(seq) FROM "{old}".memory_facts))'
        )
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (old,)
            )
        }
        assert "maitre_schema" not in tables and "memory_facts" in tables

    store = MemoryStore.postgres(
        PG_DSN, schema=old, pgvector=False, embedder=HashingEmbedder(), clock=clock, secret=PG_SECRET
    )
    try:
        assert snapshot(store) == expected
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            rows = conn.execute(f'SELECT component, version FROM "{old}".maitre_schema').fetchall()
        assert rows == [("memory", MEMORY_VERSION)]
        assert store.write("bob", "allergy", "peanuts", "2025-05-06", "chat-9") is None
        store.write("alice", "city", "Marseille", "2026-09-01", "chat-5")
        assert [h.fact.value for h in store.retrieve("alice", "city Marseille", 1)] == ["Marseille"]
    finally:
        store.close()
