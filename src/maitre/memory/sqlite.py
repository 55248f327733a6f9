"""SQLite backend: one file, WAL, FTS5 bm25, vectors as BLOBs; the embedded default.

- *Connections*: one per thread (sqlite3 releases the GIL while it works, so reader threads run in
  parallel); `:memory:` uses a single shared connection behind a lock, since every connection to
  `:memory:` would be a different database.
- *Write transactions* use `BEGIN IMMEDIATE`: the database write lock is taken up front, so two
  processes resolving conflicts on the same slot serialise instead of failing with SQLITE_BUSY at
  commit. `busy_timeout` waits for the lock.
- *Full text*: an FTS5 table keyed by the fact's rowid. The `scope` column holds a token derived from
  (tenant, user) so a query only walks that user's postings; the result is still joined with
  `memory_facts` on tenant and user, so a token collision could never leak another user's fact.
  (It keeps its own copy of the indexed text rather than being contentless: a contentless table can
  only be cleaned with the exact original text, and a later change of `fact_text` would then leave
  stale tokens behind.)
- *Deletion leaves no bytes behind*: `secure_delete=ON` zeroes freed cells and pages; FTS5 keeps the
  tokens of deleted rows in older index segments until they are merged, so a deletion runs the FTS5
  `optimize` command inside its transaction; afterwards a `wal_checkpoint(TRUNCATE)` moves the pages
  into the main file and empties the WAL, which still held the old page images.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .backend import COMMON_SCHEMA
from .vectors import encode_vector

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SQLiteBackend", "scope_token"]

log = logging.getLogger(__name__)


def scope_token(tenant: str, user: str) -> str:
    """The FTS token that stands for (tenant, user): `s` + 16 hex digits."""
    return "s" + hashlib.blake2b(f"{tenant}\x1f{user}".encode(), digest_size=8).hexdigest()


class _Db:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)


class SQLiteBackend:
    """Memory tables in one SQLite file (or `:memory:`)."""

    kind = "sqlite"
    native_vectors = False

    def __init__(self, path: str | Path = "maitre-memory.db", *, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        self.location = self.path
        self._busy_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._memory = self.path == ":memory:"
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        if not self._memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_ms / 1000
        )
        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        if not self._memory:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA secure_delete = ON")
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._memory:
            if self._shared is None:
                with self._shared_lock:
                    if self._shared is None:
                        self._shared = self._open()
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        return conn

    def setup(self, dim: int) -> None:
        with self.write(()) as db:
            for stmt in COMMON_SCHEMA:
                db.execute(stmt.replace("{SERIAL_PK}", "INTEGER PRIMARY KEY AUTOINCREMENT"))
            db.execute(
                "CREATE TABLE IF NOT EXISTS memory_vectors (seq INTEGER PRIMARY KEY, tenant TEXT NOT NULL, "
                "user_id TEXT NOT NULL, vec BLOB NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS memory_vectors_user ON memory_vectors (tenant, user_id)")
            db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5("
                "scope, body, tokenize='porter unicode61')"
            )

    @contextmanager
    def read(self) -> Iterator[_Db]:
        if self._memory:
            with self._shared_lock:
                yield _Db(self._conn())
        else:
            yield _Db(self._conn())

    @contextmanager
    def write(self, locks: Sequence[str]) -> Iterator[_Db]:
        # One database-wide write lock (BEGIN IMMEDIATE) covers every slot; `locks` need no more.
        with self._shared_lock if self._memory else nullcontext():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield _Db(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def index(self, db: _Db, rows: Sequence[tuple[int, str, str, str, NDArray[np.float32]]]) -> None:
        db.executemany(
            "INSERT INTO memory_fts (rowid, scope, body) VALUES (?, ?, ?)",
            [(seq, scope_token(t, u), text) for seq, t, u, text, _ in rows],
        )
        db.executemany(
            "INSERT OR REPLACE INTO memory_vectors (seq, tenant, user_id, vec) VALUES (?, ?, ?, ?)",
            [(seq, t, u, encode_vector(vec)) for seq, t, u, _, vec in rows],
        )

    def unindex(self, db: _Db, rows: Sequence[tuple[int, str, str, str]]) -> None:
        db.executemany("DELETE FROM memory_fts WHERE rowid = ?", [(seq,) for seq, *_ in rows])
        db.executemany("DELETE FROM memory_vectors WHERE seq = ?", [(seq,) for seq, *_ in rows])

    def lexical(self, db: _Db, tenant: str, user: str, terms: list[str], limit: int) -> list[int]:
        if not terms:
            return []
        words = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
        match = f'scope:"{scope_token(tenant, user)}" AND ({words})'
        rows = db.execute(
            "SELECT m.seq FROM memory_fts JOIN memory_facts m ON m.seq = memory_fts.rowid "
            "WHERE memory_fts MATCH ? AND m.tenant = ? AND m.user_id = ? AND m.status = 'current' "
            "ORDER BY bm25(memory_fts, 0.0, 1.0) LIMIT ?",
            (match, tenant, user, limit),
        )
        return [r[0] for r in rows]

    def dense(
        self, db: _Db, tenant: str, user: str, query: NDArray[np.float32], limit: int
    ) -> list[tuple[int, float]]:
        raise NotImplementedError("SQLite has no vector search here; the store uses its VectorCache")

    def load_vectors(self, db: _Db, tenant: str, user: str, dim: int) -> tuple[list[int], list[bytes]]:
        rows = db.execute(
            "SELECT seq, vec FROM memory_vectors WHERE tenant = ? AND user_id = ?", (tenant, user)
        )
        return [r[0] for r in rows], [r[1] for r in rows]

    def purge(self, db: _Db) -> None:
        db.execute("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')")

    def after_delete(self) -> None:
        if self._memory:
            return
        busy, _, _ = self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.warning(
                "WAL checkpoint after a deletion was blocked by a reader; old pages stay in %s-wal "
                "until the next checkpoint",
                self.path,
            )

    def close(self) -> None:
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - closing a broken connection
                pass
        self._local = threading.local()
        self._shared = None
