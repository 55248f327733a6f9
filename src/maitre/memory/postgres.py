"""PostgreSQL backend: one schema per store, full-text search, pgvector when it can be enabled.

The tables and the migration are `memory.persistence`'s (component `memory` in the schema's
`maitre_schema`), the full-text and vector statements the Postgres engine's search hooks
(`PostgresSearch`); this module keeps what a synchronous store needs of its own: connections,
the per-user advisory locks, enabling pgvector, and VACUUM after a deletion.

- *Schema per store*: every table lives in the store's schema (`search_path` is set on each
  connection), so several stores, and each test run, share one database without touching each
  other. Creating the schema takes an advisory lock, so concurrent first use is safe.
- *Write transactions* take a transaction-scoped advisory lock per (tenant, user): conflict
  resolution reads a slot and then writes it, and two processes must not both see "no current fact".
  Different users never wait for each other.
- *Full text*: `memory_index.tsv` (`to_tsvector('english', ...)`, GIN index) for current facts only,
  ranked with `ts_rank_cd`; query words are OR-ed, as with BM25.
- *Vectors*: with pgvector the `emb vector(dim)` column is ranked in SQL by cosine distance, exactly
  (no HNSW index: retrieval is filtered to one user, and pgvector 0.6's HNSW returns its `ef_search`
  nearest rows *before* the user filter, which loses recall; an exact scan of one user's 10^4 rows is
  fast). Without pgvector `emb` is a BYTEA of float32 and the store ranks it with numpy.
- *Deletion*: rows are deleted in the store's transaction; afterwards `VACUUM (ANALYZE)` removes the
  dead tuples and their index entries, and re-samples the planner statistics (`pg_stats` keeps sample
  values of columns, which would otherwise still hold a deleted value). VACUUM cannot remove a tuple
  that a running transaction's snapshot can still see, and a VACUUM in the request path would either
  wait or silently leave it; so it runs in a background thread (`maitre.memory.erasure`) with its own
  connection, which waits until no session of this database holds a snapshot older than the
  deletion (`pg_stat_activity.backend_xmin`), then vacuums. `delete()` returns at once.
  PostgreSQL does not zero the freed bytes inside data pages, and its WAL and backups keep history:
  physical erasure on Postgres needs storage encryption and WAL/backup retention limits (operator
  measures). SQLite, with `secure_delete`, does erase the bytes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from maitre.storage.engine.base import Dialect
from maitre.storage.engine.postgres import POSTGRES_SEARCH, postgres_dialect

from ..exceptions import UserError
from .backend import Db
from .erasure import BackgroundEraser
from .persistence import INDEX, MemoryIndex, SyncTx, drive, postgres_introspection, run_migration

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["PostgresBackend"]

log = logging.getLogger(__name__)

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class _Db:
    __slots__ = ("conn", "tx")

    def __init__(self, conn: psycopg.Connection[Any], dialect: Dialect) -> None:
        self.conn = conn
        self.tx = SyncTx(conn, dialect)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(sql.replace("?", "%s"), tuple(params))
        return cur.fetchall() if cur.description is not None else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(sql.replace("?", "%s"), [tuple(r) for r in rows])


def _tx(db: Db) -> SyncTx:
    if not isinstance(db, _Db):
        raise TypeError(f"not a Postgres memory connection: {db!r}")
    return db.tx


class PostgresBackend:
    """Memory tables in one PostgreSQL schema."""

    kind = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "maitre_memory",
        pgvector: bool | None = None,
        vacuum_after_delete: bool = True,
    ) -> None:
        if not _IDENT.fullmatch(schema):
            raise UserError(
                f"Schema name {schema!r} must be a lower-case SQL identifier, e.g. 'maitre_memory'."
            )
        self.dsn = dsn
        self.schema = schema
        self.location = f"{re.sub(r'://[^@/]*@', '://', dsn)} schema={schema}"
        self._want_pgvector = pgvector
        self._vacuum = vacuum_after_delete
        self.native_vectors = False
        self._dialect = postgres_dialect(schema)
        self._index = MemoryIndex(POSTGRES_SEARCH)
        self._search_path = f'"{schema}", public'
        self._local = threading.local()
        self._conns: list[psycopg.Connection[Any]] = []
        self._conns_lock = threading.Lock()
        self._vacuum_conn: psycopg.Connection[Any] | None = None
        self._vacuum_lock = threading.Lock()
        self._erase_after_xid: int | None = None
        """The first transaction id not yet assigned when the latest deletion committed."""
        self._eraser = self._new_eraser()

    def _open(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.dsn, autocommit=True)
        conn.execute(f"SET search_path TO {self._search_path}")
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _conn(self) -> psycopg.Connection[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._open()
        return conn

    def setup(self, dim: int) -> None:
        conn = psycopg.connect(self.dsn, autocommit=True)
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('maitre-memory-setup', 0))")
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                vector_schema = self._enable_pgvector(conn)
                if vector_schema and vector_schema != "public":
                    self._search_path = f'"{self.schema}", "{vector_schema}", public'
                conn.execute(f"SET LOCAL search_path TO {self._search_path}")
                run_migration(
                    conn,
                    dialect=self._dialect,
                    location=self.location,
                    introspect=postgres_introspection(self.schema),
                )
                existing = conn.execute(
                    "SELECT udt_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = 'memory_index' AND column_name = 'emb'",
                    (self.schema,),
                ).fetchone()
                if existing is not None:
                    self.native_vectors = existing[0] == "vector"
                    if self._want_pgvector and not self.native_vectors:
                        raise UserError(
                            f"Schema {self.schema!r} stores vectors as BYTEA; pgvector=True needs a new schema."
                        )
                else:
                    self.native_vectors = vector_schema is not None
                    tx = SyncTx(conn, self._dialect)
                    for statement in POSTGRES_SEARCH.index_ddl(
                        INDEX, dim=dim, native_vectors=self.native_vectors
                    ):
                        drive(tx.execute(statement))
                self._index.native_vectors = self.native_vectors
        finally:
            conn.close()
        log.debug("memory schema %s ready (pgvector=%s)", self.schema, self.native_vectors)

    def _enable_pgvector(self, conn: psycopg.Connection[Any]) -> str | None:
        """The schema holding the `vector` type if pgvector is (or can be made) available, else None."""
        if self._want_pgvector is False:
            return None
        row = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()
        if row is not None:
            return str(row[0])
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        if available is not None:
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                return "public"
            except psycopg.Error as exc:
                log.info("pgvector is installed but could not be enabled (%s); using numpy", exc)
        if self._want_pgvector:
            raise UserError("pgvector=True but the `vector` extension is not available in this database.")
        return None

    @contextmanager
    def read(self) -> Iterator[_Db]:
        yield _Db(self._conn(), self._dialect)

    @contextmanager
    def write(self, locks: Sequence[str]) -> Iterator[_Db]:
        conn = self._conn()
        with conn.transaction():
            for lock in sorted(set(locks)):
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{self.schema}\x1f{lock}",)
                )
            yield _Db(conn, self._dialect)

    def index(self, db: Db, rows: Sequence[tuple[int, str, str, str, NDArray[np.float32]]]) -> None:
        self._index.add(_tx(db), rows)

    def unindex(self, db: Db, rows: Sequence[tuple[int, str, str, str]]) -> None:
        self._index.remove(_tx(db), rows)

    def lexical(self, db: Db, tenant: str, user: str, terms: list[str], limit: int) -> list[int]:
        return self._index.lexical(_tx(db), tenant, user, terms, limit)

    def dense(
        self, db: Db, tenant: str, user: str, query: NDArray[np.float32], limit: int
    ) -> list[tuple[int, float]]:
        return self._index.dense(_tx(db), tenant, user, query, limit)

    def load_vectors(self, db: Db, tenant: str, user: str, dim: int) -> tuple[list[int], list[bytes]]:
        return self._index.load_vectors(_tx(db), tenant, user)

    def purge(self, db: Db) -> None:
        self._index.purge(_tx(db))

    def after_delete(self) -> None:
        """Schedule the VACUUM that removes the deleted tuples once no snapshot can see them; never waits."""
        if not self._vacuum:
            return
        row = self._conn().execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()
        with self._vacuum_lock:
            xid = int(row[0]) if row is not None else 0
            self._erase_after_xid = max(self._erase_after_xid or 0, xid)
        self._eraser.request()

    def wait_erased(self, timeout: float) -> bool:
        """Block until every deletion's tuples were vacuumed away (True), or `timeout` seconds passed."""
        return not self._vacuum or self._eraser.wait(timeout)

    def _new_eraser(self) -> BackgroundEraser:
        return BackgroundEraser(
            self._vacuum_once, name=f"maitre-memory-vacuum:{self.schema}", release=self._release_vacuum
        )

    def _vacuum_once(self) -> bool:
        """VACUUM (ANALYZE) the memory tables if no snapshot predates the latest deletion; else False."""
        with self._vacuum_lock:
            if self._vacuum_conn is None or self._vacuum_conn.closed:
                self._vacuum_conn = psycopg.connect(self.dsn, autocommit=True)
            conn, threshold = self._vacuum_conn, self._erase_after_xid or 0
            # A session whose snapshot (backend_xmin) or own transaction (backend_xid) is older than
            # `threshold` may still see the deleted tuples; VACUUM would keep them. 64-bit ids compare
            # without wraparound: the session's 32-bit id is placed in the epoch of the current one.
            pinned = conn.execute(
                "WITH now AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS cur) "
                "SELECT count(*) FROM pg_stat_activity, now WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND EXISTS (SELECT 1 FROM (VALUES (backend_xmin), (backend_xid)) v(x) "
                "WHERE v.x IS NOT NULL AND now.cur - mod(now.cur - v.x::text::bigint, 4294967296) < %s)",
                (threshold,),
            ).fetchone()
            if pinned is not None and int(pinned[0]) > 0:
                return False
            for table in (
                "memory_facts",
                "memory_index",
                "memory_summaries",
                "memory_summary_sources",
                "memory_episodes",
                "memory_episode_facts",
            ):
                conn.execute(f'VACUUM (ANALYZE) "{self.schema}".{table}')
            return True

    def _release_vacuum(self) -> None:
        with self._vacuum_lock:
            conn, self._vacuum_conn = self._vacuum_conn, None
        if conn is not None:
            conn.close()

    def drop_schema(self) -> None:
        """Drop the whole schema (tests, teardown)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def close(self) -> None:
        self._eraser.close()
        self._eraser = self._new_eraser()  # a closed backend reopens its connections on next use
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except psycopg.Error:  # pragma: no cover
                pass
        self._local = threading.local()
