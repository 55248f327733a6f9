"""The default durable backend: every store in ONE SQLite file, safe for several processes.

Why it is built this way:

- **WAL journal.** Readers never block the writer and the writer never blocks readers; several
  processes (a CLI approving a request while a server runs the gate) share the file.
- **`synchronous=NORMAL` by default.** In WAL mode a commit then costs no fsync (checkpoints do):
  a committed transaction survives a crash or SIGKILL of the process, and only an OS crash or power
  loss can roll back the last few commits (never corrupt the file). Pass `synchronous="FULL"` to
  fsync every commit when the machine itself may die.
- **Atomic transitions** are either one statement (`INSERT ... ON CONFLICT DO NOTHING`, a guarded
  `UPDATE ... WHERE status = 'approved' AND approved_hash = ?`) or a `BEGIN IMMEDIATE` transaction,
  which takes the database write lock up front, so a read-check-write cannot interleave with another
  process. The audit chain is appended inside `BEGIN IMMEDIATE`; `seq` is the INTEGER PRIMARY KEY.
- **Plain `sqlite3`, called synchronously inside the async methods.** An uncontended statement takes
  a few microseconds, while a hop to a worker thread (`anyio.to_thread`) costs tens. The connection's
  busy timeout is 0, so a statement never sleeps inside SQLite; when another process holds the write
  lock we get SQLITE_BUSY at once, release our lock, and retry with `await anyio.sleep` (jittered
  backoff, 0.5 ms to 20 ms) until `busy_timeout_s`, so a contended store never blocks the event loop.
  A `threading.Lock` serialises use of the shared connection by threads.
- **Append-only audit table.** Triggers refuse UPDATE and DELETE on `audit`. Someone with the file
  can drop them; `maitre.audit.verify` is what detects that.
"""

from __future__ import annotations

import builtins
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import anyio

from maitre.audit.chain import AuditEntry
from maitre.stores._rows import (
    APPROVAL_COLUMNS,
    AUDIT_COLUMNS,
    DECISION_COLUMNS,
    IDEMPOTENCY_COLUMNS,
    applied_decision,
    approval_filter,
    approval_from_row,
    approval_to_row,
    assignments,
    audit_from_row,
    audit_to_row,
    bucket_params,
    bucket_wait,
    decidable_from_row,
    decision_row,
    dump_json,
    handle_from_row,
    idempotency_from_row,
    insert_sql,
    run_filter,
    run_from_row,
    select_sql,
)
from maitre.stores.base import (
    AlreadyExistsError,
    ApprovalRequest,
    ApprovalStatus,
    HandleData,
    IdempotencyRecord,
    RunState,
    RunSummary,
    StoreBusyError,
    StoreError,
    Stores,
    check_bucket_args,
    check_new_request,
    completion_refused,
    decision_fields,
    now_or,
    seal_next,
)

__all__ = [
    "SCHEMA_VERSION",
    "SQLiteApprovalStore",
    "SQLiteAuditStore",
    "SQLiteDatabase",
    "SQLiteHandleStore",
    "SQLiteIdempotencyStore",
    "SQLiteRateLimiter",
    "SQLiteRunStore",
    "SQLiteStores",
    "Synchronous",
]

SCHEMA_VERSION = 1
"""Stored in `PRAGMA user_version`; a file written by a newer maitre is refused."""

T = TypeVar("T")
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS approvals (
        id TEXT PRIMARY KEY, tool TEXT NOT NULL, arguments TEXT NOT NULL, call_hash TEXT NOT NULL,
        user_id TEXT NOT NULL, tenant TEXT NOT NULL, run_id TEXT, reason TEXT NOT NULL,
        created_at REAL NOT NULL, expires_at REAL NOT NULL, status TEXT NOT NULL, approver TEXT,
        decided_at REAL, message TEXT, edited_arguments TEXT, approved_hash TEXT, used_at REAL)""",
    "CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals (status, created_at)",
    """CREATE TABLE IF NOT EXISTS idempotency (
        idem_key TEXT NOT NULL, tenant TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
        state TEXT NOT NULL, result TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        lease_until REAL NOT NULL, owner TEXT, PRIMARY KEY (tenant, idem_key)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS audit (
        seq INTEGER PRIMARY KEY, at_ts REAL NOT NULL, user_id TEXT NOT NULL, tenant TEXT NOT NULL,
        tool TEXT NOT NULL, decision TEXT NOT NULL, run_id TEXT, call_id TEXT, call_hash TEXT,
        approval_id TEXT, arguments TEXT, result_digest TEXT, error_code TEXT, detail TEXT,
        duration_ms REAL NOT NULL, replayed INTEGER NOT NULL, prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL)""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TABLE IF NOT EXISTS handles (
        handle TEXT PRIMARY KEY, tenant TEXT NOT NULL, user_id TEXT NOT NULL, pages TEXT NOT NULL,
        meta TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS handles_by_expiry ON handles (expires_at)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, status TEXT NOT NULL, state_json TEXT NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_by_update ON runs (updated_at)",
    """CREATE TABLE IF NOT EXISTS rate_limits (
        bucket_key TEXT PRIMARY KEY, tokens REAL NOT NULL, updated_at REAL NOT NULL,
        allowed INTEGER NOT NULL) WITHOUT ROWID""",
)


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Columns added since a table was first created (a file written by an earlier maitre); nullable,
    so an earlier maitre still reads and writes the file."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(idempotency)")}
    if "owner" not in columns:
        conn.execute("ALTER TABLE idempotency ADD COLUMN owner TEXT")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class SQLiteDatabase:
    """One connection to one file, shared by all the SQLite stores of a `SQLiteStores`.

    Args:
        path: the database file; missing parent directories are created.
        synchronous: `NORMAL` (default; durable across process crashes) or `FULL` (also across
            power loss, at the cost of an fsync per commit).
        busy_timeout_s: how long an operation waits for other writers before `StoreBusyError`.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: Synchronous = "NORMAL", busy_timeout_s: float = 10.0
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = os.fspath(path)
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            # Opening may race other processes creating the same file: let SQLite wait here, once.
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: could not switch to WAL journal mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path} has schema version {version}; this maitre knows {SCHEMA_VERSION}"
                    )
                for statement in _SCHEMA:
                    conn.execute(statement)
                _add_missing_columns(conn)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            # From now on SQLITE_BUSY comes back at once and is retried without blocking the loop.
            conn.execute("PRAGMA busy_timeout = 0")
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    async def run(self, op: Callable[[sqlite3.Connection], T], *, immediate: bool = False) -> T:
        """Run `op` (synchronously, holding the connection), inside `BEGIN IMMEDIATE` if asked.

        On SQLITE_BUSY the whole `op` is retried after an async backoff, so `op` must only touch the
        database through the connection it is given.
        """
        delay = 0.0005
        deadline: float | None = None
        while True:
            with self._lock:
                conn = self.conn
                try:
                    if not immediate:
                        return op(conn)
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = op(conn)
                        conn.execute("COMMIT")
                        return result
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
            clock = time.monotonic()
            if deadline is None:
                deadline = clock + self.busy_timeout_s
            elif clock >= deadline:
                raise StoreBusyError(f"{self.path}: still locked by another writer after {self.busy_timeout_s}s")
            await anyio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 0.02)

    async def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        """Run one statement (through `run`); the number of rows it changed."""
        return await self.run(lambda conn: conn.execute(sql, params).rowcount)

    async def fetchone(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        """The first row of one query (through `run`), or None."""
        return await self.run(lambda conn: conn.execute(sql, params).fetchone())

    async def fetchall(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> builtins.list[Any]:
        """Every row of one query (through `run`)."""
        return await self.run(lambda conn: conn.execute(sql, params).fetchall())

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_APPROVAL_SELECT = select_sql("approvals", APPROVAL_COLUMNS)
_APPROVAL_INSERT = insert_sql("approvals", APPROVAL_COLUMNS, "?")
_APPROVAL_DECIDE = (
    f"UPDATE approvals SET {assignments(DECISION_COLUMNS, '?')} WHERE id = ? AND status = 'pending'"
)


class SQLiteApprovalStore:
    """Approval requests in the `approvals` table."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def create(self, request: ApprovalRequest) -> ApprovalRequest:
        check_new_request(request)
        row = approval_to_row(request)
        try:
            await self._db.execute(_APPROVAL_INSERT, row)
        except sqlite3.IntegrityError as exc:
            raise AlreadyExistsError(f"approval {request.id!r} already exists") from exc
        return approval_from_row(row, request.created_at)

    async def get(self, approval_id: str, *, now: float | None = None) -> ApprovalRequest | None:
        at = now_or(now)
        row = await self._db.fetchone(f"{_APPROVAL_SELECT} WHERE id = ?", (approval_id,))
        return None if row is None else approval_from_row(row, at)

    async def list(
        self,
        *,
        status: ApprovalStatus | None = None,
        tenant: str | None = None,
        now: float | None = None,
        limit: int | None = None,
    ) -> builtins.list[ApprovalRequest]:
        at = now_or(now)
        where, params = approval_filter(status=status, tenant=tenant, now=at, mark="?")
        sql = f"{_APPROVAL_SELECT}{where} ORDER BY created_at, id LIMIT ?"
        params.append(-1 if limit is None else limit)
        return [approval_from_row(row, at) for row in await self._db.fetchall(sql, params)]

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        approver: str,
        message: str | None = None,
        edited_arguments: dict[str, Any] | None = None,
        approved_hash: str | None = None,
        now: float | None = None,
    ) -> ApprovalRequest:
        at = now_or(now)

        def op(conn: sqlite3.Connection) -> ApprovalRequest:
            row = conn.execute(f"{_APPROVAL_SELECT} WHERE id = ?", (approval_id,)).fetchone()
            current = decidable_from_row(approval_id, row, at)
            fields = decision_fields(
                current.call_hash, approve, approver, message, edited_arguments, approved_hash, at
            )
            conn.execute(_APPROVAL_DECIDE, (*decision_row(fields), approval_id))
            return applied_decision(current, fields, at)

        return await self._db.run(op, immediate=True)

    async def consume(self, approval_id: str, *, call_hash: str, now: float | None = None) -> bool:
        at = now_or(now)
        changed = await self._db.execute(
            "UPDATE approvals SET status = 'used', used_at = ? WHERE id = ? AND status = 'approved' "
            "AND approved_hash = ? AND expires_at > ?",
            (at, approval_id, call_hash, at),
        )
        return changed == 1


_IDEM_SELECT = f"{select_sql('idempotency', IDEMPOTENCY_COLUMNS)} WHERE tenant = ? AND idem_key = ?"


class SQLiteIdempotencyStore:
    """Idempotency records in the `idempotency` table, keyed by (tenant, key)."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def begin(
        self,
        key: str,
        *,
        tenant: str,
        tool: str,
        fingerprint: str,
        now: float | None = None,
        lease_s: float = 300.0,
        owner: str | None = None,
        reuse_completed_after_s: float | None = None,
    ) -> IdempotencyRecord | None:
        at = now_or(now)
        claim = (
            "INSERT INTO idempotency (idem_key, tenant, tool, fingerprint, state, result, created_at, "
            "updated_at, lease_until, owner) VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, idem_key) DO NOTHING"
        )
        claim_params = (key, tenant, tool, fingerprint, at, at, at + lease_s, owner)

        def existing(conn: sqlite3.Connection) -> IdempotencyRecord | bool:
            # Inside BEGIN IMMEDIATE: no other process writes between this read and our update.
            row = conn.execute(_IDEM_SELECT, (tenant, key)).fetchone()
            if row is None:
                return False
            record = idempotency_from_row(row)
            if (
                reuse_completed_after_s is not None
                and record.state == "completed"
                and record.updated_at < at - reuse_completed_after_s
            ):
                conn.execute(
                    "UPDATE idempotency SET tool = ?, fingerprint = ?, state = 'in_flight', result = NULL, "
                    "created_at = ?, updated_at = ?, lease_until = ?, owner = ? WHERE tenant = ? AND idem_key = ?",
                    (tool, fingerprint, at, at, at + lease_s, owner, tenant, key),
                )
                return True
            if record.state == "in_flight" and record.lease_until <= at:
                conn.execute(
                    "UPDATE idempotency SET state = 'uncertain', updated_at = ? "
                    "WHERE tenant = ? AND idem_key = ?",
                    (at, tenant, key),
                )
                record.state, record.updated_at = "uncertain", at
            return record

        while True:
            if await self._db.execute(claim, claim_params) == 1:
                return None
            found = await self._db.run(existing, immediate=True)
            if found is True:
                return None
            if found is not False:
                return found
            # Released between our insert attempt and our read: try to claim it again.

    async def take_over(
        self,
        key: str,
        *,
        tenant: str,
        seen: IdempotencyRecord,
        owner: str | None,
        now: float | None = None,
        lease_s: float = 300.0,
    ) -> bool:
        at = now_or(now)
        changed = await self._db.execute(
            "UPDATE idempotency SET state = 'in_flight', result = NULL, updated_at = ?, lease_until = ?, "
            "owner = ? WHERE tenant = ? AND idem_key = ? AND state IN ('in_flight', 'uncertain') "
            "AND state = ? AND updated_at = ? AND owner IS ?",
            (at, at + lease_s, owner, tenant, key, seen.state, seen.updated_at, seen.owner),
        )
        return changed == 1

    async def complete(self, key: str, result_json: str, *, tenant: str, now: float | None = None) -> None:
        at = now_or(now)

        def op(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE idempotency SET state = 'completed', result = ?, updated_at = ? "
                "WHERE tenant = ? AND idem_key = ? AND state IN ('in_flight', 'uncertain')",
                (result_json, at, tenant, key),
            )
            if cursor.rowcount == 1:
                return
            row = conn.execute(_IDEM_SELECT, (tenant, key)).fetchone()
            raise completion_refused(key, exists=row is not None)

        await self._db.run(op)

    async def mark_uncertain(
        self, key: str, *, tenant: str, now: float | None = None, owner: str | None = None
    ) -> bool:
        at = now_or(now)
        changed = await self._db.execute(
            "UPDATE idempotency SET state = 'uncertain', updated_at = ? "
            "WHERE tenant = ? AND idem_key = ? AND state = 'in_flight' AND (? IS NULL OR owner = ?)",
            (at, tenant, key, owner, owner),
        )
        return changed == 1

    async def release(self, key: str, *, tenant: str) -> bool:
        deleted = await self._db.execute(
            "DELETE FROM idempotency WHERE tenant = ? AND idem_key = ?", (tenant, key)
        )
        return deleted == 1

    async def get(self, key: str, *, tenant: str) -> IdempotencyRecord | None:
        row = await self._db.fetchone(_IDEM_SELECT, (tenant, key))
        return None if row is None else idempotency_from_row(row)


_AUDIT_SELECT = select_sql("audit", AUDIT_COLUMNS)
_AUDIT_INSERT = insert_sql("audit", AUDIT_COLUMNS, "?")


class SQLiteAuditStore:
    """The audit chain in the `audit` table (seq is the INTEGER PRIMARY KEY)."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def append(self, entry: AuditEntry) -> AuditEntry:
        def op(conn: sqlite3.Connection) -> AuditEntry:
            head = conn.execute("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            sealed = seal_next(entry, head)
            conn.execute(_AUDIT_INSERT, audit_to_row(sealed))
            return sealed

        return await self._db.run(op, immediate=True)

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        rows = await self._db.fetchall(
            f"{_AUDIT_SELECT} WHERE seq > ? ORDER BY seq LIMIT ?", (since_seq, -1 if limit is None else limit)
        )
        return [audit_from_row(row) for row in rows]

    async def last(self) -> AuditEntry | None:
        row = await self._db.fetchone(f"{_AUDIT_SELECT} ORDER BY seq DESC LIMIT 1")
        return None if row is None else audit_from_row(row)


class SQLiteHandleStore:
    """Result pages in the `handles` table."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def put(
        self,
        handle: str,
        *,
        tenant: str,
        user: str,
        pages: list[str],
        meta: dict[str, Any],
        now: float | None = None,
        ttl_s: float = 3600.0,
    ) -> None:
        at = now_or(now)
        # Only a dead (expired) handle may be reused.
        changed = await self._db.execute(
            "INSERT INTO handles (handle, tenant, user_id, pages, meta, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (handle) DO UPDATE SET tenant = excluded.tenant, "
            "user_id = excluded.user_id, pages = excluded.pages, meta = excluded.meta, "
            "created_at = excluded.created_at, expires_at = excluded.expires_at "
            "WHERE handles.expires_at <= excluded.created_at",
            (handle, tenant, user, dump_json(list(pages)), dump_json(meta), at, at + ttl_s),
        )
        if changed != 1:
            raise AlreadyExistsError(f"handle {handle!r} already exists")

    async def get(
        self, handle: str, *, tenant: str, user: str | None = None, now: float | None = None
    ) -> HandleData | None:
        at = now_or(now)
        row = await self._db.fetchone(
            "SELECT pages, meta FROM handles WHERE handle = ? AND tenant = ? AND expires_at > ?"
            " AND (? IS NULL OR user_id = ?)",
            (handle, tenant, at, user, user),
        )
        return handle_from_row(row)

    async def purge(self, *, now: float | None = None) -> int:
        at = now_or(now)
        return await self._db.execute("DELETE FROM handles WHERE expires_at <= ?", (at,))


class SQLiteRunStore:
    """Serialised runs in the `runs` table."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def save(
        self, run_id: str, *, tenant: str, status: str, state_json: str, now: float | None = None
    ) -> None:
        at = now_or(now)
        changed = await self._db.execute(
            "INSERT INTO runs (run_id, tenant, status, state_json, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
            "state_json = excluded.state_json, updated_at = excluded.updated_at "
            "WHERE runs.tenant = excluded.tenant",
            (run_id, tenant, status, state_json, at, at),
        )
        if changed != 1:
            raise StoreError(f"run {run_id!r} belongs to another tenant")

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        row = await self._db.fetchone(
            "SELECT status, state_json, tenant FROM runs WHERE run_id = ?", (run_id,)
        )
        return run_from_row(row, tenant)

    async def list(
        self, *, status: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> builtins.list[RunSummary]:
        where, params = run_filter(status=status, tenant=tenant, mark="?")
        sql = f"SELECT run_id, status, updated_at FROM runs{where} ORDER BY updated_at DESC, run_id LIMIT ?"
        params.append(limit)
        return [RunSummary(*row) for row in await self._db.fetchall(sql, params)]


# One statement: SQLite evaluates every SET expression against the old row, under the write lock.
_BUCKET_SQL = """
INSERT INTO rate_limits (bucket_key, tokens, updated_at, allowed)
VALUES (:key, :burst - :cost, :now, 1)
ON CONFLICT (bucket_key) DO UPDATE SET
  tokens = CASE WHEN min(:burst, tokens + max(0.0, :now - updated_at) * :rate) >= :cost
           THEN min(:burst, tokens + max(0.0, :now - updated_at) * :rate) - :cost
           ELSE min(:burst, tokens + max(0.0, :now - updated_at) * :rate) END,
  allowed = min(:burst, tokens + max(0.0, :now - updated_at) * :rate) >= :cost,
  updated_at = max(updated_at, :now)
RETURNING tokens, allowed
"""


class SQLiteRateLimiter:
    """Token buckets in the `rate_limits` table, one atomic upsert per acquire."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def acquire(
        self, key: str, *, rate_per_s: float, burst: int, cost: float = 1, now: float | None = None
    ) -> float:
        check_bucket_args(rate_per_s, burst, cost)
        params = bucket_params(key, rate_per_s=rate_per_s, burst=burst, cost=cost, now=now_or(now))
        # fetchall: the statement (and its implicit transaction) ends only once fully stepped.
        tokens, allowed = (await self._db.fetchall(_BUCKET_SQL, params))[0]
        return bucket_wait(tokens, allowed, rate_per_s=rate_per_s, cost=cost)


class SQLiteStores(Stores):
    """Every store in one SQLite file (WAL; safe for several processes on one machine).

    Example:
        >>> stores = SQLiteStores("maitre.db")
        >>> await stores.audit.append(AuditEntry(at=time.time(), user="ann", tenant="t", tool="x",
        ...                                      decision="allow"))
        >>> await stores.close()
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: Synchronous = "NORMAL", busy_timeout_s: float = 10.0
    ) -> None:
        db = SQLiteDatabase(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
        self.db = db

        async def close() -> None:
            db.close()

        super().__init__(
            approvals=SQLiteApprovalStore(db),
            idempotency=SQLiteIdempotencyStore(db),
            audit=SQLiteAuditStore(db),
            handles=SQLiteHandleStore(db),
            runs=SQLiteRunStore(db),
            rate_limits=SQLiteRateLimiter(db),
            backend="sqlite",
            closers=[close],
        )

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, synchronous: Synchronous = "NORMAL", busy_timeout_s: float = 10.0
    ) -> SQLiteStores:
        """Same as the constructor (opening a file is quick); here for symmetry with Postgres."""
        return cls(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
