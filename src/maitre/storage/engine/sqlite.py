"""The SQLite engine: one file, one connection, WAL, and busy handling that never blocks the loop.

Why it is built this way:

- **WAL journal.** Readers never block the writer and the writer never blocks readers; several
  processes (a CLI approving a request while a server runs the gate) share the file.
- **`synchronous=NORMAL` by default.** In WAL mode a commit then costs no fsync (checkpoints do):
  a committed transaction survives a crash or SIGKILL of the process, and only an OS crash or power
  loss can roll back the last few commits (never corrupt the file). Pass `synchronous="FULL"` to
  fsync every commit when the machine itself may die.
- **Plain `sqlite3`, called synchronously inside the async methods.** An uncontended statement takes
  a few microseconds, while a hop to a worker thread (`anyio.to_thread`) costs tens. A unit of work
  is an `async` function, but its `Tx` never suspends, so the engine steps the coroutine to its end
  while holding the connection (one that awaits anything else is a bug and is refused). The
  connection's busy timeout is 0, so a statement never sleeps inside SQLite; when another process
  holds the write lock we get SQLITE_BUSY at once, roll back, and run the whole unit of work again
  after `await anyio.sleep` (jittered backoff, 0.5 ms to 20 ms) until `busy_timeout_s`: a contended
  store never blocks the event loop. A `threading.Lock` serialises threads on the connection.
- **`BEGIN IMMEDIATE`** for `transact(immediate=True)`: the write lock is taken up front, so a
  read-check-write cannot interleave with another process and never fails half-way on an upgrade.
- **Search** (`SQLiteSearch`, the engine's `SearchHooks`): FTS5 with bm25 for text, float32
  BLOBs for vectors ranked by the caller with numpy, because this Python's `sqlite3` cannot load
  extensions (no sqlite-vec). The FTS5 table keeps its own copy of the text rather than being
  contentless: a contentless table can only be cleaned with the exact original text.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal, TypeVar

import anyio

from maitre.exceptions import StoreError
from maitre.storage.base import StoreBusyError
from maitre.storage.engine.base import Dialect, Schema, Tx
from maitre.storage.engine.migrations import Introspection, apply_schema

__all__ = ["SQLITE", "SQLITE_SEARCH", "SQLiteEngine", "SQLiteSearch", "Synchronous", "scope_token"]

T = TypeVar("T")
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

SQLITE = Dialect(
    name="sqlite",
    mark="?",
    schema_prefix="",
    least="min",
    greatest="max",
    for_update="",
    types={"REAL": "REAL", "BOOL": "INTEGER", "BIGINT": "INTEGER", "WITHOUT_ROWID": "WITHOUT ROWID"},
)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _drive(work: Awaitable[T]) -> T:
    """Run an awaitable that must finish without suspending (it only awaits a SQLite `Tx`)."""
    steps = work.__await__()
    try:
        steps.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    if isinstance(work, Coroutine):
        work.close()
    raise RuntimeError("a SQLite unit of work awaited something other than its Tx (it must not suspend)")


class _Tx:
    """Statements on the engine's connection (inside `transact`, or autocommit)."""

    __slots__ = ("_conn", "_render")

    def __init__(self, conn: sqlite3.Connection, render: Callable[[str], str]) -> None:
        self._conn = conn
        self._render = render

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(self._render(sql), params).rowcount

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._conn.execute(self._render(sql), params).fetchone()
        return row

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(self._render(sql), params).fetchall()

    async def lock(self, table: str) -> None:
        """Nothing to do: an immediate transaction already holds the file's only write lock."""


async def _tables(tx: Tx) -> frozenset[str]:
    rows = await tx.fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")
    return frozenset(name for (name,) in rows if not name.startswith("sqlite_"))


async def _columns(tx: Tx, table: str) -> frozenset[str]:
    return frozenset(row[1] for row in await tx.fetchall(f"PRAGMA table_info({table})"))


async def _user_version(tx: Tx) -> int:
    row = await tx.fetchone("PRAGMA user_version")
    return 0 if row is None else int(row[0])


async def _set_user_version(tx: Tx, version: int) -> None:
    await tx.execute(f"PRAGMA user_version = {int(version)}")


_INTROSPECTION = Introspection(
    tables=_tables, columns=_columns, legacy_marker=_user_version, set_legacy_marker=_set_user_version
)


def scope_token(tenant: str, user: str) -> str:
    """The FTS token that stands for (tenant, user): `s` + 16 hex digits."""
    return "s" + hashlib.blake2b(f"{tenant}\x1f{user}".encode(), digest_size=8).hexdigest()


class SQLiteSearch:
    """`SearchHooks` on SQLite: FTS5 `<index>_fts (scope, body)` and BLOBs in `<index>_vectors`.

    The `scope` column holds `scope_token(tenant, user)`, so a query walks only that scope's
    postings; with `rows_table` the hits are joined with it on tenant and user, so a token
    collision could never leak another scope's row."""

    native_vectors = False
    """Vectors are BLOBs: the caller ranks them (`load_vectors`)."""

    def index_ddl(self, index: str, *, dim: int, native_vectors: bool) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {index}_vectors (seq INTEGER PRIMARY KEY, tenant TEXT NOT NULL, "
            "user_id TEXT NOT NULL, vec BLOB NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {index}_vectors_user ON {index}_vectors (tenant, user_id)",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {index}_fts USING fts5(scope, body, tokenize='porter unicode61')",
        ]

    async def add(
        self, tx: Tx, index: str, rows: Sequence[tuple[int, str, str, str, bytes]], *, native_vectors: bool
    ) -> None:
        for key, tenant, user, text, _ in rows:
            await tx.execute(
                f"INSERT INTO {index}_fts (rowid, scope, body) VALUES (?, ?, ?)",
                (key, scope_token(tenant, user), text),
            )
        for key, tenant, user, _, vector in rows:
            await tx.execute(
                f"INSERT OR REPLACE INTO {index}_vectors (seq, tenant, user_id, vec) VALUES (?, ?, ?, ?)",
                (key, tenant, user, vector),
            )

    async def remove(self, tx: Tx, index: str, keys: Sequence[int]) -> None:
        for key in keys:
            await tx.execute(f"DELETE FROM {index}_fts WHERE rowid = ?", (key,))
        for key in keys:
            await tx.execute(f"DELETE FROM {index}_vectors WHERE seq = ?", (key,))

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
        if not terms:
            return []
        words = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
        match = f'scope:"{scope_token(tenant, user)}" AND ({words})'
        fts = f"{index}_fts"
        if rows_table is None:
            rows = await tx.fetchall(
                f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY bm25({fts}, 0.0, 1.0) LIMIT ?",
                (match, limit),
            )
        else:
            rows = await tx.fetchall(
                f"SELECT m.seq FROM {fts} JOIN {rows_table} m ON m.seq = {fts}.rowid "
                f"WHERE {fts} MATCH ? AND m.tenant = ? AND m.user_id = ? AND m.status = 'current' "
                f"ORDER BY bm25({fts}, 0.0, 1.0) LIMIT ?",
                (match, tenant, user, limit),
            )
        return [row[0] for row in rows]

    async def dense(
        self, tx: Tx, index: str, tenant: str, user: str, vector: bytes, limit: int
    ) -> list[tuple[int, float]]:
        raise NotImplementedError("SQLite has no vector search here; rank load_vectors() with numpy")

    async def load_vectors(self, tx: Tx, index: str, tenant: str, user: str) -> tuple[list[int], list[bytes]]:
        rows = await tx.fetchall(
            f"SELECT seq, vec FROM {index}_vectors WHERE tenant = ? AND user_id = ?", (tenant, user)
        )
        return [row[0] for row in rows], [row[1] for row in rows]

    async def purge(self, tx: Tx, index: str) -> None:
        # FTS5 keeps deleted rows' tokens in older segments until they are merged.
        await tx.execute(f"INSERT INTO {index}_fts ({index}_fts) VALUES ('optimize')")


SQLITE_SEARCH = SQLiteSearch()
"""The SQLite engine's search hooks (stateless)."""


def _switch_to_wal(conn: sqlite3.Connection, busy_timeout_s: float, path: str) -> str:
    """The file's journal mode after asking for WAL, waiting out processes that open it at once.

    A file already in WAL (every open but the first) is only read, which takes no lock. Switching
    takes an exclusive lock, and SQLite answers "database is locked" at once - without its busy
    handler - while another process holds the file; so the switch is retried until the busy
    timeout (seen with eight workers opening one new file together).
    """
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    if mode.lower() == "wal":
        return mode
    deadline = time.monotonic() + busy_timeout_s
    delay = 0.005
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise StoreError(f"{path}: could not switch to WAL journal mode ({exc})") from exc
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class SQLiteEngine:
    """One connection to one file, shared by every concern stored in it.

    Args:
        path: the database file; missing parent directories are created. `":memory:"` is a private
            in-memory database of this connection (no WAL, nothing shared; for measurements).
        synchronous: `NORMAL` (default; durable across process crashes) or `FULL` (also across
            power loss, at the cost of an fsync per commit).
        busy_timeout_s: how long an operation waits for other writers before `StoreBusyError`.
    """

    dialect = SQLITE
    search = SQLITE_SEARCH
    """Full-text and vector search on this engine (`SearchHooks`)."""
    commits_inline = True
    """`transact` never suspends: a concern that batches concurrent callers must yield first."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_s: float = 10.0,
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = os.fspath(path)
        self.location = self.path
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._sql: dict[str, str] = {}
        in_memory = self.path == ":memory:"
        if not in_memory:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            # Opening may race other processes creating the same file: let SQLite wait here, once.
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            try:
                if in_memory:  # one connection's private database (benchmarks); nothing to share
                    conn.execute("SELECT 1 FROM sqlite_master").fetchall()
                    mode = "wal"
                else:
                    mode = _switch_to_wal(conn, busy_timeout_s, self.path)
            except sqlite3.DatabaseError as exc:
                raise StoreError(
                    f"{self.path} is not a SQLite database ({exc}): point maitre at a new file"
                ) from exc
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: could not switch to WAL journal mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn
        self._tx = _Tx(conn, self._render)

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection (for tests and tools that inspect the file)."""
        if self._conn is None:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    def _render(self, sql: str) -> str:
        rendered = self._sql.get(sql)
        if rendered is None:
            rendered = self._sql[sql] = SQLITE.render(sql)
        return rendered

    def migrate_now(self, schema: Schema) -> None:
        """`migrate`, synchronously (SQLite needs no await; constructors use this). It waits for
        the write lock with the connection's busy timeout, which it then sets to 0 for good."""
        with self._lock:
            try:
                self._apply(self.conn, schema)
            finally:
                # From now on SQLITE_BUSY comes back at once and is retried without blocking the loop.
                self.conn.execute("PRAGMA busy_timeout = 0")

    def _apply(self, conn: sqlite3.Connection, schema: Schema) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            _drive(
                apply_schema(self._tx, schema, dialect=SQLITE, location=self.path, introspect=_INTROSPECTION)
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def migrate(self, schema: Schema) -> None:
        """Apply `schema`; a table first used after open (accounts, claims) may meet another
        process's write, so SQLITE_BUSY is retried with backoff, like every other write."""
        await self._run(lambda conn: self._apply(conn, schema))

    def fetchone_now(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """`fetchone`, synchronously (for constructors, right after `migrate_now`)."""
        with self._lock:
            row: tuple[Any, ...] | None = self.conn.execute(self._render(sql), params).fetchone()
            return row

    async def _run(self, step: Callable[[sqlite3.Connection], T]) -> T:
        """Run `step` holding the connection; on SQLITE_BUSY, back off (async) and run it again."""
        delay = 0.0005
        deadline: float | None = None
        while True:
            with self._lock:
                try:
                    return step(self.conn)
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
            clock = time.monotonic()
            if deadline is None:
                deadline = clock + self.busy_timeout_s
            elif clock >= deadline:
                raise StoreBusyError(
                    f"{self.path}: still locked by another writer after {self.busy_timeout_s}s"
                )
            await anyio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 0.02)

    async def transact(
        self, op: Callable[[Tx], Awaitable[T]], *, immediate: bool = False, pipeline: bool = False
    ) -> T:
        begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"

        def step(conn: sqlite3.Connection) -> T:
            conn.execute(begin)
            try:
                result = _drive(op(self._tx))
                conn.execute("COMMIT")
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        return await self._run(step)

    # One statement, autocommitted: the common case, without a coroutine per statement.

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        text = self._render(sql)
        return await self._run(lambda conn: conn.execute(text, params).rowcount)

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        text = self._render(sql)
        row: tuple[Any, ...] | None = await self._run(lambda conn: conn.execute(text, params).fetchone())
        return row

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        text = self._render(sql)
        return await self._run(lambda conn: conn.execute(text, params).fetchall())

    async def close(self) -> None:
        self.close_now()

    def close_now(self) -> None:
        """`close`, synchronously."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
