"""SQLite backend: one file, WAL, FTS5 bm25, vectors as BLOBs; the embedded default.

The tables and the migration are `memory.persistence`'s (component `memory` in `maitre_schema`),
the full-text and vector statements the SQLite engine's search hooks (`SQLiteSearch`); this module
keeps what a synchronous store needs of its own: connections, the write lock, and erasure.

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
- *Deletion leaves no bytes behind, and waits for no reader*: `secure_delete=ON` zeroes freed cells
  and pages; FTS5 keeps the tokens of deleted rows in older index segments until they are merged, so
  a deletion runs the FTS5 `optimize` command inside its transaction. After commit the WAL still
  holds the old page images, and the main file the old pages, for as long as a reader's snapshot
  predates the deletion. `wal_checkpoint(TRUNCATE)` copies the new pages over the old and empties
  the WAL, but must wait for such readers, so it runs in a background thread
  (`maitre.memory.erasure`) with its own connection and a 50 ms busy timeout, retried until it
  succeeds: `delete()` returns at once, and the bytes are gone about a second after the last
  pinning reader ends (`MemoryStore.wait_erased` waits for it deliberately).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maitre.storage.engine.sqlite import SQLITE, SQLITE_SEARCH, scope_token

from .backend import Db
from .erasure import BackgroundEraser
from .persistence import MemoryIndex, SyncTx, run_migration, sqlite_introspection

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["SQLiteBackend", "scope_token"]

log = logging.getLogger(__name__)


class _Db:
    __slots__ = ("conn", "tx")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.tx = SyncTx(conn, SQLITE)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)


def _tx(db: Db) -> SyncTx:
    if not isinstance(db, _Db):
        raise TypeError(f"not a SQLite memory connection: {db!r}")
    return db.tx


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
        self._index = MemoryIndex(SQLITE_SEARCH)
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._checkpoint_lock = threading.Lock()
        self._eraser = self._new_eraser()
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
            run_migration(db.conn, dialect=SQLITE, location=self.path, introspect=sqlite_introspection())

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

    def index(self, db: Db, rows: Sequence[tuple[int, str, str, str, NDArray[np.float32]]]) -> None:
        self._index.add(_tx(db), rows)

    def unindex(self, db: Db, rows: Sequence[tuple[int, str, str, str]]) -> None:
        self._index.remove(_tx(db), rows)

    def lexical(self, db: Db, tenant: str, user: str, terms: list[str], limit: int) -> list[int]:
        return self._index.lexical(_tx(db), tenant, user, terms, limit)

    def dense(
        self, db: Db, tenant: str, user: str, query: NDArray[np.float32], limit: int
    ) -> list[tuple[int, float]]:
        raise NotImplementedError("SQLite has no vector search here; the store uses its VectorCache")

    def load_vectors(self, db: Db, tenant: str, user: str, dim: int) -> tuple[list[int], list[bytes]]:
        return self._index.load_vectors(_tx(db), tenant, user)

    def purge(self, db: Db) -> None:
        self._index.purge(_tx(db))

    def after_delete(self) -> None:
        """Schedule the checkpoint that erases the deleted pages from the WAL and the file; never waits."""
        if not self._memory:
            self._eraser.request()

    def wait_erased(self, timeout: float) -> bool:
        """Block until every deletion's pages left the WAL and the main file (True), or `timeout`."""
        return self._memory or self._eraser.wait(timeout)

    def _new_eraser(self) -> BackgroundEraser:
        return BackgroundEraser(
            self._checkpoint,
            name=f"maitre-memory-checkpoint:{Path(self.path).name}",
            release=self._release_checkpoint,
        )

    def _checkpoint(self) -> bool:
        """One `wal_checkpoint(TRUNCATE)` that gives up after 50 ms; True when the WAL was emptied."""
        with self._checkpoint_lock:
            if self._checkpoint_conn is None:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0.05)
                conn.execute("PRAGMA busy_timeout = 50")
                conn.execute("PRAGMA secure_delete = ON")
                self._checkpoint_conn = conn
            try:
                busy, _, _ = self._checkpoint_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError as exc:  # locked by a writer: the next try
                log.debug("memory checkpoint of %s: %s", self.path, exc)
                return False
            return not busy

    def _release_checkpoint(self) -> None:
        with self._checkpoint_lock:
            conn, self._checkpoint_conn = self._checkpoint_conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._eraser.close()
        self._eraser = self._new_eraser()  # a closed backend reopens its connections on next use
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - closing a broken connection
                pass
        self._local = threading.local()
        self._shared = None
