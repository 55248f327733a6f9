"""Memory test fixtures: the same tests run on SQLite and on the real PostgreSQL server.

Each Postgres store lives in its own uniquely named schema, dropped at teardown (the server keeps its
data between runs). The pgvector path runs on a throwaway server from the `pgserver` wheel (Postgres
16 + pgvector), started once per session.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore

PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
PG_SECRET = "hex:" + "5e" * 32
"""The tombstone secret of test stores on PostgreSQL (a server store must be given one)."""


class Clock:
    """A settable UTC clock, so recorded_at is deterministic."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> datetime:
        self.now += timedelta(**kwargs)
        return self.now


def _pg_available() -> str | None:
    try:
        with psycopg.connect(PG_DSN, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable: {exc}"


_PG_REASON = _pg_available()


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 11, 1, 12, 0, tzinfo=UTC))


StoreFactory = Callable[..., MemoryStore]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores on one backend; every store it makes shares one database."""
    created: list[MemoryStore] = []
    schema = f"mt_{uuid.uuid4().hex[:12]}"
    if request.param == "postgres" and _PG_REASON:
        pytest.skip(_PG_REASON)

    def make(**kwargs: object) -> MemoryStore:
        kwargs.setdefault("embedder", HashingEmbedder())
        if request.param == "sqlite":
            store = MemoryStore.sqlite(tmp_path / "memory.db", **kwargs)  # type: ignore[arg-type]
        else:
            kwargs.setdefault("secret", PG_SECRET)
            store = MemoryStore.postgres(PG_DSN, schema=schema, pgvector=False, **kwargs)  # type: ignore[arg-type]
        created.append(store)
        return store

    yield make
    for store in created:
        store.close()
    if request.param == "postgres":
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


@pytest.fixture
def store(make_store: StoreFactory, clock: Clock) -> MemoryStore:
    return make_store(clock=clock)


@pytest.fixture(scope="session")
def pgvector_dsn() -> Iterator[str]:
    """A throwaway PostgreSQL 16 with pgvector (the `pgserver` wheel), for the pgvector path."""
    pgserver = pytest.importorskip("pgserver", reason="the pgserver wheel provides Postgres with pgvector")
    datadir = tempfile.mkdtemp(prefix="maitre-pgvector-")
    server = pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
