"""The Postgres engine: one schema, connections from `psycopg_pool`, for many processes and hosts.

- **The pool** is `psycopg_pool.AsyncConnectionPool` (autocommit connections): a connection is
  checked on borrow (`check_connection`, one round trip, so a server restart or an idle connection
  killed by a proxy costs a reconnect, not a failed call), replaced after `max_lifetime_s`, and
  reconnected in the background when the server comes back (`reconnect_timeout_s`). As in
  HikariCP's `aliveBypassWindowMs`, a connection that came back to the pool less than
  `alive_bypass_s` ago (0.5 s) is not checked again: under load every borrow would otherwise pay a
  round trip (measured: 3x the cost of a governed write's three store calls) for a connection that
  was demonstrably alive a moment ago. The pool opens
  on first use inside the running event loop and is bound to it: open and use an engine inside one
  `anyio.run`.
- **Units of work** run in `conn.transaction()` under the default READ COMMITTED isolation; the
  concerns lock what they read-check-write (`SELECT ... FOR UPDATE`, `Tx.lock(table)` which is
  `LOCK TABLE ... IN EXCLUSIVE MODE`: other writers wait, readers do not). `immediate` changes
  nothing here. `pipeline=True` sends the statements of a unit of work together (psycopg pipeline
  mode): the audit append is two round trips instead of five.
- **Search** (`PostgresSearch`, the engine's `SearchHooks`): one table per index with a `tsvector`
  (`to_tsvector('english', ...)`, GIN index, ranked with `ts_rank_cd`, query words OR-ed as with
  BM25) and the vector as pgvector's `vector(dim)` when the extension is there, ranked exactly in
  SQL by cosine distance (no HNSW: pgvector 0.6's HNSW returns its `ef_search` nearest rows
  *before* the scope filter, which loses recall), else a BYTEA of float32 the caller ranks in numpy.
- **Schema management** runs in one transaction under a transaction-level advisory lock, so
  processes starting together do not race on DDL. Everything lives in one schema (`schema=`),
  whose name must be a plain identifier.
"""

from __future__ import annotations

import contextlib
import re
import struct
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio

from maitre._extras import MissingExtraError, missing_modules
from maitre.exceptions import StoreError
from maitre.storage.engine.base import Dialect, Schema, Tx
from maitre.storage.engine.migrations import Introspection, apply_schema

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool
except ImportError:  # pragma: no cover - exercised only without the extra (tests/packaging)
    if missing_modules("postgres"):
        raise MissingExtraError("postgres", "The Postgres stores", missing_modules("postgres")) from None
    raise

__all__ = ["POSTGRES_SEARCH", "PostgresEngine", "PostgresSearch", "postgres_dialect", "vector_literal"]

T = TypeVar("T")

_DDL_LOCK_ID = 0x6D61697472650001  # "maitre" + 1: serialises schema changes across processes.
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def postgres_dialect(schema: str) -> Dialect:
    """The Postgres dialect for tables in `schema`."""
    return Dialect(
        name="postgres",
        mark="%s",
        schema_prefix=f'"{schema}".',
        least="LEAST",
        greatest="GREATEST",
        for_update=" FOR UPDATE",
        types={"REAL": "double precision", "BOOL": "boolean", "BIGINT": "bigint", "WITHOUT_ROWID": ""},
    )


_WORD = re.compile(r"[^\W_]+")


def vector_literal(vector: bytes) -> str:
    """pgvector's text form of float32 little-endian bytes (7 significant digits, as float32 holds)."""
    values = struct.unpack(f"<{len(vector) // 4}f", vector)
    return "[" + ",".join(f"{x:.7g}" for x in values) + "]"


class PostgresSearch:
    """`SearchHooks` on Postgres: `<index>_index (seq, tenant, user_id, tsv, emb)` in the schema."""

    def index_ddl(self, index: str, *, dim: int, native_vectors: bool) -> list[str]:
        emb = f"vector({int(dim)})" if native_vectors else "BYTEA"
        return [
            f"CREATE TABLE {{s}}.{index}_index (seq BIGINT PRIMARY KEY, tenant TEXT NOT NULL, "
            f"user_id TEXT NOT NULL, tsv tsvector NOT NULL, emb {emb} NOT NULL)",
            f"CREATE INDEX {index}_index_user ON {{s}}.{index}_index (tenant, user_id)",
            f"CREATE INDEX {index}_index_tsv ON {{s}}.{index}_index USING gin (tsv)",
        ]

    async def add(
        self, tx: Tx, index: str, rows: Sequence[tuple[int, str, str, str, bytes]], *, native_vectors: bool
    ) -> None:
        if native_vectors:
            sql = (
                f"INSERT INTO {{s}}.{index}_index (seq, tenant, user_id, tsv, emb) "
                "VALUES (?, ?, ?, to_tsvector('english', ?), ?::vector)"
            )
            for key, tenant, user, text, vector in rows:
                await tx.execute(sql, (key, tenant, user, text, vector_literal(vector)))
        else:
            sql = (
                f"INSERT INTO {{s}}.{index}_index (seq, tenant, user_id, tsv, emb) "
                "VALUES (?, ?, ?, to_tsvector('english', ?), ?)"
            )
            for key, tenant, user, text, vector in rows:
                await tx.execute(sql, (key, tenant, user, text, vector))

    async def remove(self, tx: Tx, index: str, keys: Sequence[int]) -> None:
        if keys:
            await tx.execute(f"DELETE FROM {{s}}.{index}_index WHERE seq = ANY(?)", (list(keys),))

    async def lexical(
        self,
        tx: Tx,
        index: str,
        tenant: str,
        user: str,
        terms: Sequence[str],
        limit: int,
        *,
        rows_table: str | None = None,
    ) -> list[int]:
        # The index rows carry tenant and user themselves: `rows_table` adds nothing here.
        words = [t for t in terms if _WORD.fullmatch(t)]
        if not words:
            return []
        rows = await tx.fetchall(
            f"SELECT seq FROM {{s}}.{index}_index, to_tsquery('english', ?) q WHERE tenant = ? "
            "AND user_id = ? AND tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC, seq LIMIT ?",
            (" | ".join(words), tenant, user, limit),
        )
        return [row[0] for row in rows]

    async def dense(
        self, tx: Tx, index: str, tenant: str, user: str, vector: bytes, limit: int
    ) -> list[tuple[int, float]]:
        rows = await tx.fetchall(
            f"SELECT seq, emb <=> ?::vector AS distance FROM {{s}}.{index}_index "
            "WHERE tenant = ? AND user_id = ? ORDER BY distance, seq LIMIT ?",
            (vector_literal(vector), tenant, user, limit),
        )
        return [(int(row[0]), 1.0 - float(row[1])) for row in rows]

    async def load_vectors(self, tx: Tx, index: str, tenant: str, user: str) -> tuple[list[int], list[bytes]]:
        rows = await tx.fetchall(
            f"SELECT seq, emb FROM {{s}}.{index}_index WHERE tenant = ? AND user_id = ?", (tenant, user)
        )
        return [row[0] for row in rows], [bytes(row[1]) for row in rows]

    async def purge(self, tx: Tx, index: str) -> None:
        """Nothing to merge: deleted tuples go with VACUUM, which cannot run in a transaction."""


POSTGRES_SEARCH = PostgresSearch()
"""The Postgres engine's search hooks (stateless)."""


class _Tx:
    """Statements on one borrowed connection."""

    __slots__ = ("_conn", "_render")

    def __init__(self, conn: psycopg.AsyncConnection[Any], render: Callable[[str], str]) -> None:
        self._conn = conn
        self._render = render

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cursor = await self._conn.execute(self._render(sql), params or None)
        return cursor.rowcount

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        cursor = await self._conn.execute(self._render(sql), params or None)
        return await cursor.fetchone()

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = await self._conn.execute(self._render(sql), params or None)
        return await cursor.fetchall()

    async def lock(self, table: str) -> None:
        await self._conn.execute(self._render(f"LOCK TABLE {{s}}.{table} IN EXCLUSIVE MODE"))


class PostgresEngine:
    """A schema in a Postgres database and a pool of connections to it.

    Args:
        dsn: a libpq connection string or `postgresql://` URL.
        schema: the schema holding maitre's tables (created if missing).
        pool_size: most connections open at once; callers beyond it wait.
        max_lifetime_s: a connection older than this is closed and replaced.
        reconnect_timeout_s: how long the pool keeps trying to reconnect before giving up.
        alive_bypass_s: a connection returned to the pool more recently than this is lent without
            a health check (0: check on every borrow).
    """

    commits_inline = False
    """A transaction awaits the server: concurrent appenders queue behind it on their own."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "maitre",
        pool_size: int = 4,
        max_lifetime_s: float = 1800.0,
        reconnect_timeout_s: float = 60.0,
        alive_bypass_s: float = 0.5,
    ) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise ValueError(f"schema must be a plain identifier (letters, digits, _), not {schema!r}")
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self.dsn = dsn
        self.schema = schema
        self.quoted_schema = f'"{schema}"'
        self.location = f"Postgres schema {schema}"
        self.dialect = postgres_dialect(schema)
        self.search = POSTGRES_SEARCH
        self.pool_size = pool_size
        self.max_lifetime_s = max_lifetime_s
        self.reconnect_timeout_s = reconnect_timeout_s
        self.alive_bypass_s = alive_bypass_s
        self._returned: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self._pool: AsyncConnectionPool[Any] | None = None
        self._pool_lock = anyio.Lock()
        self._sql: dict[str, str] = {}
        self._migrated: set[str] = set()
        self._pending: list[Schema] = []
        self._closed = False

    def q(self, text: str) -> str:
        """`text` with `{s}` replaced by the quoted schema name (for hand-written SQL in tests)."""
        return text.replace("{s}", self.quoted_schema)

    def _render(self, sql: str) -> str:
        rendered = self._sql.get(sql)
        if rendered is None:
            rendered = self._sql[sql] = self.dialect.render(sql)
        return rendered

    def require(self, schema: Schema) -> None:
        """Migrate `schema` on first use (for constructors that cannot await)."""
        if schema.component not in self._migrated:
            self._pending.append(schema)

    async def _open_pool(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise StoreError(f"the Postgres stores for schema {self.schema} are closed")
        if self._pool is not None and not self._pending:
            return self._pool
        async with self._pool_lock:
            if self._pending:
                # A direct connection: a wrong DSN fails at once instead of after the pool's timeout.
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                try:
                    while self._pending:
                        await self._migrate(conn, self._pending[0])
                        self._pending.pop(0)
                finally:
                    await conn.close()
            if self._pool is None:
                pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                    self.dsn,
                    min_size=1,
                    max_size=self.pool_size,
                    kwargs={"autocommit": True},
                    check=self._check,
                    max_lifetime=self.max_lifetime_s,
                    reconnect_timeout=self.reconnect_timeout_s,
                    open=False,
                    name=f"maitre-{self.schema}",
                )
                await pool.open(wait=False)
                self._pool = pool
            return self._pool

    async def _check(self, conn: psycopg.AsyncConnection[Any]) -> None:
        returned = self._returned.pop(conn, None)
        if returned is None or time.monotonic() - returned >= self.alive_bypass_s:
            await AsyncConnectionPool.check_connection(conn)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """Borrow a connection (autocommit; use `transact` for several statements)."""
        pool = self._pool if self._pool is not None and not self._pending else await self._open_pool()
        async with pool.connection() as conn:
            try:
                yield conn
            finally:
                if not conn.broken:
                    self._returned[conn] = time.monotonic()

    async def transact(
        self, op: Callable[[Tx], Awaitable[T]], *, immediate: bool = False, pipeline: bool = False
    ) -> T:
        async with self.connection() as conn:
            tx = _Tx(conn, self._render)
            if pipeline:
                async with conn.pipeline(), conn.transaction():
                    return await op(tx)
            async with conn.transaction():
                return await op(tx)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        async with self.connection() as conn:
            return await _Tx(conn, self._render).execute(sql, params)

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        async with self.connection() as conn:
            return await _Tx(conn, self._render).fetchone(sql, params)

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self.connection() as conn:
            return await _Tx(conn, self._render).fetchall(sql, params)

    async def migrate(self, schema: Schema) -> None:
        self.require(schema)
        await self._open_pool()

    async def _migrate(self, conn: psycopg.AsyncConnection[Any], schema: Schema) -> None:
        if schema.component in self._migrated:
            return
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_ID,))
            await conn.execute(self.q("CREATE SCHEMA IF NOT EXISTS {s}"))
            introspect = Introspection(
                tables=self._tables,
                columns=self._columns,
                legacy_marker=self._legacy_marker,
                set_legacy_marker=self._set_legacy_marker,
            )
            await apply_schema(
                _Tx(conn, self._render),
                schema,
                dialect=self.dialect,
                location=self.location,
                introspect=introspect,
            )
        self._migrated.add(schema.component)

    async def _tables(self, tx: Tx) -> frozenset[str]:
        rows = await tx.fetchall(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (self.schema,)
        )
        return frozenset(name for (name,) in rows)

    async def _columns(self, tx: Tx, table: str) -> frozenset[str]:
        rows = await tx.fetchall(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ?",
            (self.schema, table),
        )
        return frozenset(name for (name,) in rows)

    async def _legacy_marker(self, tx: Tx) -> int:
        row = await tx.fetchone("SELECT to_regclass(?)", (f"{self.quoted_schema}.meta",))
        if row is None or row[0] is None:
            return 0
        row = await tx.fetchone("SELECT value FROM {s}.meta WHERE name = 'schema_version'")
        return 0 if row is None else int(row[0])

    async def _set_legacy_marker(self, tx: Tx, version: int) -> None:
        await tx.execute("CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value text NOT NULL)")
        await tx.execute(
            "INSERT INTO {s}.meta (name, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (str(version),),
        )

    async def close(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
