"""Deletion reaches every copy: rows, history, embeddings, full text, summaries, profile, file bytes.

Each test writes facts containing a made-up word that occurs nowhere else, deletes them, and then
searches every table of the store (and, for SQLite, the raw bytes of the database file and its WAL)
for that word. A tombstone must then stop the same fact from being extracted or replayed back,
without the tombstone holding the text.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from maitre.embeddings import HashingEmbedder
from maitre.memory import Candidate, ConversationTurn, MemoryStore, WriteAction

from .conftest import PG_SECRET

StoreFactory = Callable[..., MemoryStore]
SECRET_CITY = "Zorbluxville"
SECRET_OLD_CITY = "Quaxmoorton"
MARKERS = ("zorblux", "quaxmoor")  # lower-case prefixes also catch stemmed FTS tokens


def leaks_in_tables(store: MemoryStore) -> list[str]:
    """Every (table, row) of the store, as text, that still contains a marker (after erasure ran)."""
    assert store.wait_erased(10), "the background checkpoint / VACUUM did not finish"
    found: list[str] = []
    if store.backend.kind == "sqlite":
        conn = sqlite3.connect(store.backend.location)  # type: ignore[attr-defined]
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            assert "memory_fts_content" in tables or "memory_fts_data" in tables
            for table in tables:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    text = repr(row).lower()
                    found += [f"{table}: {text[:120]}" for m in MARKERS if m in text]
            for row in conn.execute("SELECT * FROM sqlite_master"):
                found += [f"sqlite_master: {row}" for m in MARKERS if m in repr(row).lower()]
        finally:
            conn.close()
        return found
    schema = store.backend.schema  # type: ignore[attr-defined]
    with psycopg.connect(store.backend.dsn, autocommit=True) as conn:  # type: ignore[attr-defined]
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
            )
        ]
        assert {"memory_facts", "memory_index", "memory_summaries", "memory_tombstones"} <= set(tables)
        for table in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t'):  # type: ignore[arg-type]
                found += [f"{table}: {text[:120]}" for m in MARKERS if m in text.lower()]
        # Planner statistics keep sample values of columns; they must not keep deleted ones.
        for row in conn.execute(
            "SELECT tablename, attname, most_common_vals::text, histogram_bounds::text FROM pg_stats "
            "WHERE schemaname = %s",
            (schema,),
        ):
            found += [f"pg_stats: {row[:2]}" for m in MARKERS if m in repr(row).lower()]
    return found


def leaks_in_files(path: Path) -> list[str]:
    found = []
    for suffix in ("", "-wal", "-shm", "-journal"):
        f = Path(str(path) + suffix)
        if f.exists():
            data = f.read_bytes().lower()
            found += [f"{f.name} contains {m!r}" for m in MARKERS if m.encode() in data]
    return found


def populate(store: MemoryStore) -> dict[str, str]:
    store.write("u1", "city", SECRET_OLD_CITY, "2026-01-05", "user message")
    store.write("u1", "diet", "vegetarian food only", "2026-01-09", "user message")
    current = store.write("u1", "city", SECRET_CITY, "2026-03-20", "user message")
    store.write("u1", "dentist", "Dr Mehta", "2026-03-21", "user message")
    store.write("u2", "city", "Chennai", "2026-02-01", "user message")
    assert current is not None
    diet = store.current("u1", "diet")
    old = store.history("u1", "city")[0]
    assert diet is not None
    store.add_summary(
        "u1", f"Moved from {SECRET_OLD_CITY} to {SECRET_CITY}; vegetarian.", [old.id, current.id, diet.id]
    )
    store.add_summary("u1", "Eats vegetarian food only.", [diet.id], kind="diet-note")
    assert SECRET_CITY in store.profile("u1").text
    assert store.retrieve("u1", "zorbluxville city")[0].value == SECRET_CITY
    return {"current": current.id, "old": old.id}


def test_delete_reaches_every_copy(make_store: StoreFactory, clock) -> None:  # type: ignore[no-untyped-def]
    store = make_store(clock=clock)
    populate(store)
    if store.backend.kind == "postgres":
        with psycopg.connect(store.backend.dsn, autocommit=True) as conn:  # type: ignore[attr-defined]
            conn.execute(f'ANALYZE "{store.backend.schema}".memory_facts')  # type: ignore[attr-defined]
    assert leaks_in_tables(store), "the test must see the text before the delete"

    report = store.delete("u1", "city")
    assert store.wait_erased(10), "the background checkpoint / VACUUM finished"

    assert (
        report.facts == 2
        and report.summaries_removed == 1
        and report.profile_rebuilt
        and report.tombstones == 2
    )
    assert leaks_in_tables(store) == []
    if store.backend.kind == "sqlite":
        assert leaks_in_files(Path(store.backend.location)) == []  # type: ignore[attr-defined]
    # What should stay, stays.
    assert sorted(s.kind for s in store.summaries("u1")) == ["diet-note", "profile"]
    assert store.profile("u1").text == "diet: vegetarian food only"
    assert store.current("u1", "dentist").value == "Dr Mehta"  # type: ignore[union-attr]
    assert [h.value for h in store.retrieve("u2", "city")] == ["Chennai"]
    assert store.retrieve("u1", "zorbluxville city") == []
    exported = repr(store.export("u1")).lower()
    assert not any(m in exported for m in MARKERS)


def test_sqlite_file_bytes_after_close(tmp_path: Path, clock) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.db"
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    # Enough other rows that pages are shared and the FTS index has several segments.
    for i in range(300):
        store.write(f"user{i % 7}", f"note_{i}", f"ordinary value number {i}", "2026-01-01", "m")
    populate(store)
    assert leaks_in_files(path), "the text is on disk before the delete"
    store.delete("u1", "city")
    assert store.wait_erased(10)
    assert leaks_in_files(path) == []
    store.close()
    assert leaks_in_files(path) == []


def test_tombstone_blocks_reextraction_and_replay_but_not_unforget(store: MemoryStore) -> None:
    populate(store)
    store.delete("u1", "city")
    # The tombstone holds an HMAC, never the text.
    with store.backend.read() as db:
        rows = db.execute("SELECT digest FROM memory_tombstones")
    assert rows and all(re.fullmatch(r"[0-9a-f]{64}", r[0]) for r in rows)
    # Re-extraction from an old conversation and a replayed import are both blocked.
    outcomes = store.remember(
        "u1", [ConversationTurn(role="user", id="old-7", content=f"I live in {SECRET_CITY}.")]
    )
    assert [o.action for o in outcomes] == [WriteAction.BLOCKED]
    replay = store.apply("u1", Candidate(key="City", value=SECRET_OLD_CITY.upper(), valid_from="2026-01-05"))
    assert replay.action == WriteAction.BLOCKED
    assert store.history("u1", "city") == [] and leaks_in_tables(store) == []
    # The same fact for another user is not blocked (the digest includes tenant and user).
    assert store.write("u2", "city", SECRET_CITY, "2026-03-01", "m") is not None
    store.delete("u2", "city")
    # A new value for the deleted key is fine, and the user may deliberately re-state a forgotten one.
    assert store.write("u1", "city", "Mysuru", "2026-05-01", "m").value == "Mysuru"  # type: ignore[union-attr]
    back = store.write("u1", "city", SECRET_CITY, "2026-06-01", "m", unforget=True)
    assert back is not None and back.value == SECRET_CITY
    # Lifting one tombstone lifts only that one.
    still = store.apply(
        "u1", Candidate(key="city", value=SECRET_OLD_CITY, valid_from="2026-01-05", source="replay")
    )
    assert still.action == WriteAction.BLOCKED and still.current.value == SECRET_CITY  # type: ignore[union-attr]


def test_forgetting_the_current_value_does_not_revive_an_older_one(store: MemoryStore) -> None:
    store.write("u1", "city", "Pune", "2026-01-05", "m")
    store.write("u1", "city", SECRET_CITY, "2026-03-20", "m")
    report = store.delete("u1", "city", SECRET_CITY)
    assert report.facts == 1
    assert store.current("u1", "city") is None, "Pune must not come back"
    assert store.write("u1", "city", "Mumbai", "2025-01-01", "import") is None, "an old replay stays history"
    assert [f.value for f in store.history("u1", "city") if f.value] == ["Mumbai", "Pune"]
    assert leaks_in_tables(store) == []
    assert store.write("u1", "city", "Goa", "2026-07-01", "m").value == "Goa"  # type: ignore[union-attr]


def test_delete_user_erases_everything_of_that_user_only(make_store: StoreFactory, clock) -> None:  # type: ignore[no-untyped-def]
    store = make_store(clock=clock)
    populate(store)
    report = store.delete_user("u1")
    assert report.facts == 4 and report.tombstones == 4
    assert store.facts("u1", include_history=True) == [] and store.summaries("u1") == []
    assert store.profile("u1").text == ""
    assert leaks_in_tables(store) == []
    assert store.current("u2", "city").value == "Chennai"  # type: ignore[union-attr]
    assert store.delete_user("nobody").facts == 0


def test_summary_lineage_must_point_at_own_facts(store: MemoryStore) -> None:
    from maitre.exceptions import UserError

    ids = populate(store)
    with pytest.raises(UserError):
        store.add_summary("u2", "steal", [ids["current"]])
    with pytest.raises(UserError):
        store.add_summary("u1", "x", [ids["current"]], kind="profile")


def test_pgvector_path_deletes_too(pgvector_dsn: str, clock) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStore.postgres(
        pgvector_dsn,
        schema="del_pgvector",
        pgvector=True,
        embedder=HashingEmbedder(),
        clock=clock,
        secret=PG_SECRET,
    )
    try:
        assert store.backend.native_vectors
        populate(store)
        store.delete("u1", "city")
        assert leaks_in_tables(store) == []
        assert store.retrieve("u1", "zorbluxville city") == []
        assert [h.value for h in store.retrieve("u2", "city")] == ["Chennai"]
    finally:
        store.backend.drop_schema()  # type: ignore[attr-defined]
        store.close()
