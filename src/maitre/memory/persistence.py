"""Memory's tables written once: a versioned `Schema` ("memory" in `maitre_schema`) for both backends.

Why this module exists: the memory tables used to be created by each backend with
`CREATE ... IF NOT EXISTS` and no version, so a newer layout could never be told from an older one.
They are now the `memory` component of the storage layer's schema table (`maitre_schema`), migrated
forward by the same rules as the gate's tables (`maitre.storage.engine.migrations.apply_schema`):
a database written by a newer maitre is refused with a one-line `StoreError`, and a memory database
written before the version table existed (it has `memory_facts`) is recognised as version 1.

The memory store is synchronous (the async face runs it in worker threads, and a write may embed
inside its transaction), while the engines' units of work are async and may be re-run. So the
backends keep their own connections, and run the shared migration code through `run_migration`:
a `Tx` over a plain DB-API connection whose methods never suspend, driven to its end in one step
(the same technique as the SQLite engine's `_drive`). The lexical and vector indexes come from the
engines' `SearchHooks` (`maitre.storage.engine.sqlite.SQLITE_SEARCH`,
`maitre.storage.engine.postgres.PostgresSearch`), driven the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from maitre.storage.engine.base import Dialect, Migration, Schema, SearchHooks, Tx
from maitre.storage.engine.migrations import VERSION_TABLE, Introspection, apply_schema
from maitre.storage.engine.sqlite import SQLITE_SEARCH

from .vectors import encode_vector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "COMMON_SCHEMA",
    "EPISODE_SCHEMA",
    "INDEX",
    "MEMORY_TABLES",
    "MemoryIndex",
    "SyncTx",
    "drive",
    "memory_schema",
    "postgres_introspection",
    "run_migration",
    "sqlite_introspection",
]

T = TypeVar("T")

#: Tables shared by both backends (`{SERIAL_PK}` is the one type spelled differently).
COMMON_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS memory_meta (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
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
    """CREATE TABLE IF NOT EXISTS memory_tombstones (
        digest TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS memory_summaries (
        id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (tenant, user_id, id))""",
    """CREATE TABLE IF NOT EXISTS memory_summary_sources (
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        summary_id TEXT NOT NULL,
        fact_id TEXT NOT NULL,
        PRIMARY KEY (tenant, user_id, summary_id, fact_id))""",
    "CREATE INDEX IF NOT EXISTS memory_summary_sources_fact ON memory_summary_sources (fact_id)",
    """CREATE TABLE IF NOT EXISTS memory_versions (
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        version BIGINT NOT NULL,
        PRIMARY KEY (tenant, user_id))""",
]

#: Version 2 (issue 16): episodes (raw conversation turns) beside facts, their links to the facts
#: extracted from them, and the per-user log of vector changes (incremental refresh of the caches).
EPISODE_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS memory_episodes (
        seq {SERIAL_PK},
        id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        session TEXT NOT NULL,
        speaker TEXT NOT NULL,
        role TEXT NOT NULL,
        source TEXT NOT NULL,
        at BIGINT NOT NULL,
        recorded_at BIGINT NOT NULL,
        text TEXT NOT NULL,
        context TEXT NOT NULL,
        vec {BLOB} NOT NULL,
        wvec {BLOB} NOT NULL,
        UNIQUE (tenant, user_id, id))""",
    "CREATE INDEX IF NOT EXISTS memory_episodes_at ON memory_episodes (tenant, user_id, at)",
    """CREATE TABLE IF NOT EXISTS memory_episode_facts (
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        episode_id TEXT NOT NULL,
        fact_id TEXT NOT NULL,
        PRIMARY KEY (tenant, user_id, episode_id, fact_id))""",
    "CREATE INDEX IF NOT EXISTS memory_episode_facts_fact ON memory_episode_facts (tenant, user_id, fact_id)",
    """CREATE TABLE IF NOT EXISTS memory_vector_log (
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        version BIGINT NOT NULL,
        added TEXT NOT NULL,
        removed TEXT NOT NULL,
        PRIMARY KEY (tenant, user_id, version))""",
]
_EPISODE_SQLITE = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_episodes_fts USING fts5(scope, body, context, tokenize='porter unicode61')",
]
_EPISODE_POSTGRES = [
    "ALTER TABLE memory_episodes ADD COLUMN IF NOT EXISTS tsv tsvector",
    "CREATE INDEX IF NOT EXISTS memory_episodes_tsv ON memory_episodes USING gin (tsv)",
]

MEMORY_TABLES = frozenset(
    {
        "memory_meta",
        "memory_episodes",
        "memory_episode_facts",
        "memory_vector_log",
        "memory_facts",
        "memory_tombstones",
        "memory_summaries",
        "memory_summary_sources",
        "memory_versions",
    }
)
"""The tables every memory database has (the backend's search tables come on top)."""

INDEX = "memory"
"""The search index's name: SQLite `memory_fts` + `memory_vectors`, Postgres `memory_index`."""

_SERIAL_PK = {"sqlite": "INTEGER PRIMARY KEY AUTOINCREMENT", "postgres": "BIGSERIAL PRIMARY KEY"}
_BLOB = {"sqlite": "BLOB", "postgres": "BYTEA"}


def _legacy_version(present: frozenset[str], marker: int) -> int | None:
    # Before `maitre_schema`, the memory tables had one layout (version 1), with no marker.
    return 1 if "memory_facts" in present else None


def memory_schema(dialect: str) -> Schema:
    """The memory component for `dialect` (`sqlite` or `postgres`).

    Postgres' `memory_index` is created by the backend after the migration: its vector column's
    type depends on the embedder's dimension and on whether pgvector can be enabled."""
    common = [statement.replace("{SERIAL_PK}", _SERIAL_PK[dialect]) for statement in COMMON_SCHEMA]
    episodes = [
        statement.replace("{SERIAL_PK}", _SERIAL_PK[dialect]).replace("{BLOB}", _BLOB[dialect])
        for statement in EPISODE_SCHEMA
    ]
    return Schema(
        component="memory",
        migrations=[
            Migration(
                version=1,
                statements=common,
                sqlite=SQLITE_SEARCH.index_ddl(INDEX, dim=0, native_vectors=False),
            ),
            Migration(version=2, statements=episodes, sqlite=_EPISODE_SQLITE, postgres=_EPISODE_POSTGRES),
        ],
        tables=MEMORY_TABLES,
        legacy_version=_legacy_version,
    )


_RENDERED: dict[tuple[str, str], dict[str, str]] = {}


def _rendered(dialect: Dialect) -> dict[str, str]:
    """The rendered-statement cache of one dialect and schema (the statements are few and fixed)."""
    key = (dialect.name, dialect.schema_prefix)
    cache = _RENDERED.get(key)
    if cache is None:
        cache = _RENDERED.setdefault(key, {})
    return cache


class SyncTx:
    """A `Tx` over a synchronous DB-API connection (`sqlite3` or `psycopg`): it never suspends.

    Args:
        conn: the connection, already inside the transaction the caller opened.
        dialect: renders the portable SQL (`?`, `{s}.`) for this connection.
    """

    __slots__ = ("_conn", "_dialect", "_sql")

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self._conn = conn
        self._dialect = dialect
        self._sql = _rendered(dialect)

    def _run(self, sql: str, params: Sequence[Any]) -> Any:
        text = self._sql.get(sql)
        if text is None:
            text = self._sql[sql] = self._dialect.render(sql)
        # Parameters always go along, so `%%` (Postgres) is read the way `render` wrote it.
        return self._conn.execute(text, tuple(params))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._run(sql, params).rowcount)

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        cursor = self._run(sql, params)
        if cursor.description is None:
            return None
        row = cursor.fetchone()
        return None if row is None else tuple(row)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._run(sql, params)
        return [] if cursor.description is None else [tuple(row) for row in cursor.fetchall()]

    async def lock(self, table: str) -> None:
        """Nothing to do: the backend's write transaction holds its own locks."""


def drive(work: Awaitable[T]) -> T:
    """Run an awaitable that only awaits a `SyncTx` (so it finishes without suspending)."""
    steps = work.__await__()
    try:
        steps.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    if isinstance(work, Coroutine):
        work.close()
    raise RuntimeError("a memory unit of work awaited something other than its SyncTx")


async def _sqlite_tables(tx: Tx) -> frozenset[str]:
    rows = await tx.fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")
    # FTS5's shadow tables (memory_fts_data, ...) belong to memory_fts.
    return frozenset(name for (name,) in rows if not name.startswith("sqlite_"))


async def _sqlite_columns(tx: Tx, table: str) -> frozenset[str]:
    return frozenset(row[1] for row in await tx.fetchall(f"PRAGMA table_info({table})"))


async def _no_marker(tx: Tx) -> int:
    return 0


async def _keep_marker(tx: Tx, version: int) -> None:
    return None


def sqlite_introspection() -> Introspection:
    """The SQLite catalogue, for the memory component (the legacy `user_version` is the gate's)."""
    return Introspection(
        tables=_sqlite_tables,
        columns=_sqlite_columns,
        legacy_marker=_no_marker,
        set_legacy_marker=_keep_marker,
    )


def postgres_introspection(schema: str) -> Introspection:
    """The Postgres catalogue of `schema`, for the memory component (no legacy marker)."""

    async def tables(tx: Tx) -> frozenset[str]:
        rows = await tx.fetchall(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (schema,)
        )
        return frozenset(name for (name,) in rows)

    async def columns(tx: Tx, table: str) -> frozenset[str]:
        rows = await tx.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ?",
            (schema, table),
        )
        return frozenset(name for (name,) in rows)

    return Introspection(
        tables=tables, columns=columns, legacy_marker=_no_marker, set_legacy_marker=_keep_marker
    )


def run_migration(conn: Any, *, dialect: Dialect, location: str, introspect: Introspection) -> int:
    """Migrate the memory component inside the transaction `conn` is in; the version before."""
    schema = memory_schema(dialect.name)
    tx = SyncTx(conn, dialect)
    before = drive(apply_schema(tx, schema, dialect=dialect, location=location, introspect=introspect))
    # `apply_schema` writes the row only when it ran a step; a database from before the version
    # table is already at version 1, and gets its row here so later versions need no guessing.
    drive(
        tx.execute(
            f"CREATE TABLE IF NOT EXISTS {{s}}.{VERSION_TABLE} "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
    )
    drive(
        tx.execute(
            f"INSERT INTO {{s}}.{VERSION_TABLE} (component, version) VALUES (?, ?) "
            "ON CONFLICT (component) DO NOTHING",
            (schema.component, schema.version),
        )
    )
    return before


class MemoryIndex:
    """Memory's lexical and vector index: an engine's `SearchHooks`, driven on a `SyncTx`.

    The indexes hold current facts only (see `memory.backend`); lexical hits are re-checked
    against `memory_facts` where the engine's text index does not hold the scope exactly."""

    __slots__ = ("hooks", "native_vectors")

    def __init__(self, hooks: SearchHooks, *, native_vectors: bool = False) -> None:
        self.hooks = hooks
        self.native_vectors = native_vectors
        """True when the database ranks vectors itself (pgvector)."""

    def add(self, tx: SyncTx, rows: Sequence[tuple[int, str, str, str, NDArray[np.float32]]]) -> None:
        """Index current facts `(seq, tenant, user, text, vector)`."""
        encoded = [(seq, tenant, user, text, encode_vector(vec)) for seq, tenant, user, text, vec in rows]
        drive(self.hooks.add(tx, INDEX, encoded, native_vectors=self.native_vectors))

    def remove(self, tx: SyncTx, rows: Sequence[tuple[int, str, str, str]]) -> None:
        """Drop facts `(seq, tenant, user, text)` from both indexes."""
        drive(self.hooks.remove(tx, INDEX, [row[0] for row in rows]))

    def lexical(self, tx: SyncTx, tenant: str, user: str, terms: list[str], limit: int) -> list[int]:
        """Seqs of the user's current facts matching any term, best first."""
        return drive(self.hooks.lexical(tx, INDEX, tenant, user, terms, limit, rows_table="memory_facts"))

    def dense(
        self, tx: SyncTx, tenant: str, user: str, query: NDArray[np.float32], limit: int
    ) -> list[tuple[int, float]]:
        """(seq, cosine) ranked by the database (only with native vectors)."""
        return drive(self.hooks.dense(tx, INDEX, tenant, user, encode_vector(query), limit))

    def load_vectors(self, tx: SyncTx, tenant: str, user: str) -> tuple[list[int], list[bytes]]:
        """Every (seq, float32 blob) of the user's current facts, for the numpy scan."""
        return drive(self.hooks.load_vectors(tx, INDEX, tenant, user))

    def purge(self, tx: SyncTx) -> None:
        """Inside a deletion: drop the text index's remnants of removed rows."""
        drive(self.hooks.purge(tx, INDEX))
