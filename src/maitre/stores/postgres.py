"""PostgreSQL stores (psycopg 3, async): for many maitre processes on many hosts sharing one database.

All tables live in one schema (`schema=`, default `maitre`), created on first use under a
transaction-level advisory lock so processes starting together do not race on DDL. How each guarantee
is kept, under the default READ COMMITTED isolation:

- **Idempotency `begin`**: `INSERT ... ON CONFLICT (tenant, idem_key) DO NOTHING`. A concurrent insert
  of the same key waits for the first to commit and then does nothing; exactly one caller sees
  rowcount 1.
- **Approval `consume`**: one guarded `UPDATE ... SET status = 'used' WHERE status = 'approved' AND
  approved_hash = %s AND expires_at > %s`. A second updater blocks on the row lock, re-reads the row
  after the first commits, finds `used`, and updates nothing.
- **Approval `decide`**: `SELECT ... FOR UPDATE`, check, `UPDATE`, in one transaction.
- **Audit `append`**: `LOCK TABLE audit IN EXCLUSIVE MODE` (blocks other appenders, never readers),
  read the head, seal, insert, commit. The lock is scoped to this schema's table, unlike an advisory
  lock id, which would be shared by every schema of the database. `seq` is the primary key, so even a
  caller bypassing the lock could not create a duplicate.
- **Rate limits**: one `INSERT ... ON CONFLICT DO UPDATE` computing the refill in SQL under the row lock.

Connections come from a small built-in pool (`pool_size`, autocommit connections opened on demand),
to avoid a dependency on psycopg_pool. A connection is bound to the event loop that uses it: open
and use a `PostgresStores` inside one `anyio.run`.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

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
    StoreError,
    Stores,
    check_bucket_args,
    check_new_request,
    completion_refused,
    decision_fields,
    now_or,
    seal_next,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.pq import TransactionStatus
except ImportError as _import_error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'The Postgres stores need psycopg 3: install "maitre[postgres]" (psycopg[binary]>=3.2).'
    ) from _import_error

__all__ = [
    "PostgresApprovalStore",
    "PostgresAuditStore",
    "PostgresDatabase",
    "PostgresHandleStore",
    "PostgresIdempotencyStore",
    "PostgresRateLimiter",
    "PostgresRunStore",
    "PostgresStores",
    "SCHEMA_VERSION",
]

SCHEMA_VERSION = 1
"""Stored in `<schema>.meta`; a schema written by a newer maitre is refused."""

_DDL_LOCK_ID = 0x6D61697472650001  # "maitre" + 1: serialises schema creation across processes.
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.approvals (
        id text PRIMARY KEY, tool text NOT NULL, arguments text NOT NULL, call_hash text NOT NULL,
        user_id text NOT NULL, tenant text NOT NULL, run_id text, reason text NOT NULL,
        created_at double precision NOT NULL, expires_at double precision NOT NULL, status text NOT NULL,
        approver text, decided_at double precision, message text, edited_arguments text,
        approved_hash text, used_at double precision)""",
    "CREATE INDEX IF NOT EXISTS approvals_by_status ON {s}.approvals (status, created_at)",
    """CREATE TABLE IF NOT EXISTS {s}.idempotency (
        idem_key text NOT NULL, tenant text NOT NULL, tool text NOT NULL, fingerprint text NOT NULL,
        state text NOT NULL, result text, created_at double precision NOT NULL,
        updated_at double precision NOT NULL, lease_until double precision NOT NULL, owner text,
        PRIMARY KEY (tenant, idem_key))""",
    """CREATE TABLE IF NOT EXISTS {s}.audit (
        seq bigint PRIMARY KEY, at_ts double precision NOT NULL, user_id text NOT NULL,
        tenant text NOT NULL, tool text NOT NULL, decision text NOT NULL, run_id text, call_id text,
        call_hash text, approval_id text, arguments text, result_digest text, error_code text,
        detail text, duration_ms double precision NOT NULL, replayed boolean NOT NULL,
        prev_hash text NOT NULL, hash text NOT NULL)""",
    """CREATE OR REPLACE FUNCTION {s}.audit_append_only() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$""",
    """CREATE OR REPLACE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON {s}.audit
        FOR EACH ROW EXECUTE FUNCTION {s}.audit_append_only()""",
    """CREATE OR REPLACE TRIGGER audit_no_truncate BEFORE TRUNCATE ON {s}.audit
        FOR EACH STATEMENT EXECUTE FUNCTION {s}.audit_append_only()""",
    """CREATE TABLE IF NOT EXISTS {s}.handles (
        handle text PRIMARY KEY, tenant text NOT NULL, user_id text NOT NULL, pages text NOT NULL,
        meta text NOT NULL, created_at double precision NOT NULL, expires_at double precision NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS handles_by_expiry ON {s}.handles (expires_at)",
    """CREATE TABLE IF NOT EXISTS {s}.runs (
        run_id text PRIMARY KEY, tenant text NOT NULL, status text NOT NULL, state_json text NOT NULL,
        created_at double precision NOT NULL, updated_at double precision NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_by_update ON {s}.runs (updated_at)",
    """CREATE TABLE IF NOT EXISTS {s}.rate_limits (
        bucket_key text PRIMARY KEY, tokens double precision NOT NULL,
        updated_at double precision NOT NULL, allowed boolean NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value text NOT NULL)",
)

_ADDED_COLUMNS = (("idempotency", "owner", "text"),)
"""Nullable columns added after a table was first created: a schema written by an earlier maitre
gets them on open (and an earlier maitre still works with them there)."""


class PostgresDatabase:
    """A schema in a Postgres database, and a small pool of autocommit connections to it.

    Args:
        dsn: a libpq connection string or `postgresql://` URL.
        schema: the schema holding maitre's tables (created if missing).
        pool_size: most connections open at once; callers beyond it wait.
    """

    def __init__(self, dsn: str, *, schema: str = "maitre", pool_size: int = 4) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise ValueError(f"schema must be a plain identifier (letters, digits, _), not {schema!r}")
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self.dsn = dsn
        self.schema = schema
        self.quoted_schema = f'"{schema}"'
        self._slots = anyio.Semaphore(pool_size)
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._ready = False
        self._ready_lock = anyio.Lock()
        self._closed = False

    def q(self, text: str) -> str:
        """`text` with `{s}` replaced by the quoted schema name."""
        return text.replace("{s}", self.quoted_schema)

    async def open(self) -> None:
        """Create the schema and tables if needed. Called by the first operation if not before."""
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            try:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_ID,))
                    version = await self._stored_version(conn)
                    if version is not None and version > SCHEMA_VERSION:
                        raise StoreError(
                            f"schema {self.schema} has version {version}; this maitre knows {SCHEMA_VERSION}"
                        )
                    if version != SCHEMA_VERSION:
                        for statement in _SCHEMA:
                            await conn.execute(self.q(statement))
                        await conn.execute(
                            self.q(
                                "INSERT INTO {s}.meta (name, value) VALUES ('schema_version', %s) "
                                "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
                            ),
                            (str(SCHEMA_VERSION),),
                        )
                    await self._add_missing_columns(conn)
            except BaseException:
                await conn.close()
                raise
            self._idle.append(conn)
            self._ready = True

    async def _add_missing_columns(self, conn: psycopg.AsyncConnection[Any]) -> None:
        for table, column, kind in _ADDED_COLUMNS:
            cursor = await conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                "AND column_name = %s",
                (self.schema, table, column),
            )
            if await cursor.fetchone() is None:  # checked first: ALTER locks the table even when a no-op
                await conn.execute(
                    self.q(f"ALTER TABLE {{s}}.{table} ADD COLUMN IF NOT EXISTS {column} {kind}")
                )

    async def _stored_version(self, conn: psycopg.AsyncConnection[Any]) -> int | None:
        cursor = await conn.execute("SELECT to_regclass(%s)", (f"{self.quoted_schema}.meta",))
        row = await cursor.fetchone()
        if row is None or row[0] is None:
            return None
        cursor = await conn.execute(self.q("SELECT value FROM {s}.meta WHERE name = 'schema_version'"))
        row = await cursor.fetchone()
        return None if row is None else int(row[0])

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """Borrow a connection (autocommit; use `conn.transaction()` for several statements)."""
        if self._closed:
            raise StoreError(f"the Postgres stores for schema {self.schema} are closed")
        await self.open()
        async with self._slots:
            conn = self._idle.pop() if self._idle else await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True
            )
            try:
                yield conn
            finally:
                # Keep the connection only if it is healthy and outside any transaction.
                if (
                    not self._closed
                    and not conn.closed
                    and conn.info.transaction_status == TransactionStatus.IDLE
                ):
                    self._idle.append(conn)
                else:
                    with anyio.CancelScope(shield=True):
                        await conn.close()

    async def execute(self, query: str, params: Any = None) -> int:
        """Run one statement on a borrowed connection; the number of rows it changed."""
        async with self.connection() as conn:
            cursor = await conn.execute(query, params)
            return cursor.rowcount

    async def fetchone(self, query: str, params: Any = None) -> tuple[Any, ...] | None:
        """The first row of one query on a borrowed connection, or None."""
        async with self.connection() as conn:
            return await _fetchone(conn, query, params)

    async def fetchall(self, query: str, params: Any = None) -> builtins.list[tuple[Any, ...]]:
        """Every row of one query on a borrowed connection."""
        async with self.connection() as conn:
            cursor = await conn.execute(query, params)
            return await cursor.fetchall()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


async def _fetchone(
    conn: psycopg.AsyncConnection[Any], query: str, params: Any = None
) -> tuple[Any, ...] | None:
    cursor = await conn.execute(query, params)
    return await cursor.fetchone()


class PostgresApprovalStore:
    """Approval requests in `<schema>.approvals`."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        self._select = db.q(select_sql("{s}.approvals", APPROVAL_COLUMNS))
        self._insert = db.q(insert_sql("{s}.approvals", APPROVAL_COLUMNS, "%s"))
        self._decide = db.q(f"UPDATE {{s}}.approvals SET {assignments(DECISION_COLUMNS, '%s')} WHERE id = %s")

    async def create(self, request: ApprovalRequest) -> ApprovalRequest:
        check_new_request(request)
        row = approval_to_row(request)
        try:
            await self._db.execute(self._insert, row)
        except pg_errors.UniqueViolation as exc:
            raise AlreadyExistsError(f"approval {request.id!r} already exists") from exc
        return approval_from_row(row, request.created_at)

    async def get(self, approval_id: str, *, now: float | None = None) -> ApprovalRequest | None:
        at = now_or(now)
        row = await self._db.fetchone(f"{self._select} WHERE id = %s", (approval_id,))
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
        where, params = approval_filter(status=status, tenant=tenant, now=at, mark="%s")
        query = f"{self._select}{where} ORDER BY created_at, id LIMIT %s"
        params.append(limit)
        return [approval_from_row(row, at) for row in await self._db.fetchall(query, params)]

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
        async with self._db.connection() as conn, conn.transaction():
            row = await _fetchone(conn, f"{self._select} WHERE id = %s FOR UPDATE", (approval_id,))
            current = decidable_from_row(approval_id, row, at)
            fields = decision_fields(
                current.call_hash, approve, approver, message, edited_arguments, approved_hash, at
            )
            await conn.execute(self._decide, (*decision_row(fields), approval_id))
        return applied_decision(current, fields, at)

    async def consume(self, approval_id: str, *, call_hash: str, now: float | None = None) -> bool:
        at = now_or(now)
        changed = await self._db.execute(
            self._db.q(
                "UPDATE {s}.approvals SET status = 'used', used_at = %s WHERE id = %s "
                "AND status = 'approved' AND approved_hash = %s AND expires_at > %s"
            ),
            (at, approval_id, call_hash, at),
        )
        return changed == 1


class PostgresIdempotencyStore:
    """Idempotency records in `<schema>.idempotency`, keyed by (tenant, idem_key)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        cols = ", ".join(IDEMPOTENCY_COLUMNS)
        self._select = db.q(
            select_sql("{s}.idempotency", IDEMPOTENCY_COLUMNS) + " WHERE tenant = %s AND idem_key = %s"
        )
        self._claim = db.q(
            "INSERT INTO {s}.idempotency (idem_key, tenant, tool, fingerprint, state, result, created_at, "
            "updated_at, lease_until, owner) VALUES (%s, %s, %s, %s, 'in_flight', NULL, %s, %s, %s, %s) "
            "ON CONFLICT (tenant, idem_key) DO NOTHING"
        )
        # A completed key past the dedupe window, taken over in one guarded statement: a concurrent
        # caller blocks on the row lock, re-reads it as in_flight and updates nothing.
        self._reuse = db.q(
            "UPDATE {s}.idempotency SET tool = %s, fingerprint = %s, state = 'in_flight', result = NULL, "
            "created_at = %s, updated_at = %s, lease_until = %s, owner = %s WHERE tenant = %s "
            "AND idem_key = %s AND state = 'completed' AND updated_at < %s RETURNING idem_key"
        )
        self._take_over = db.q(
            "UPDATE {s}.idempotency SET state = 'in_flight', result = NULL, updated_at = %s, "
            "lease_until = %s, owner = %s WHERE tenant = %s AND idem_key = %s "
            "AND state IN ('in_flight', 'uncertain') AND state = %s AND updated_at = %s "
            "AND owner IS NOT DISTINCT FROM %s"
        )
        self._expire = db.q(
            "UPDATE {s}.idempotency SET state = 'uncertain', updated_at = %s WHERE tenant = %s "
            f"AND idem_key = %s AND state = 'in_flight' AND lease_until <= %s RETURNING {cols}"
        )

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
        async with self._db.connection() as conn:
            while True:
                cursor = await conn.execute(
                    self._claim, (key, tenant, tool, fingerprint, at, at, at + lease_s, owner)
                )
                if cursor.rowcount == 1:
                    return None
                if reuse_completed_after_s is not None:
                    params = (tool, fingerprint, at, at, at + lease_s, owner, tenant, key)
                    if await _fetchone(conn, self._reuse, (*params, at - reuse_completed_after_s)):
                        return None
                row = await _fetchone(conn, self._expire, (at, tenant, key, at))
                if row is None:
                    row = await _fetchone(conn, self._select, (tenant, key))
                if row is not None:
                    return idempotency_from_row(row)
                # Released between our insert attempt and our read: try to claim it again.

    async def complete(self, key: str, result_json: str, *, tenant: str, now: float | None = None) -> None:
        at = now_or(now)
        async with self._db.connection() as conn:
            cursor = await conn.execute(
                self._db.q(
                    "UPDATE {s}.idempotency SET state = 'completed', result = %s, updated_at = %s "
                    "WHERE tenant = %s AND idem_key = %s AND state IN ('in_flight', 'uncertain')"
                ),
                (result_json, at, tenant, key),
            )
            if cursor.rowcount == 1:
                return
            row = await _fetchone(conn, self._select, (tenant, key))
        raise completion_refused(key, exists=row is not None)

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
            self._take_over, (at, at + lease_s, owner, tenant, key, seen.state, seen.updated_at, seen.owner)
        )
        return changed == 1

    async def mark_uncertain(
        self, key: str, *, tenant: str, now: float | None = None, owner: str | None = None
    ) -> bool:
        at = now_or(now)
        changed = await self._db.execute(
            self._db.q(
                "UPDATE {s}.idempotency SET state = 'uncertain', updated_at = %s "
                "WHERE tenant = %s AND idem_key = %s AND state = 'in_flight' "
                "AND (%s::text IS NULL OR owner = %s)"
            ),
            (at, tenant, key, owner, owner),
        )
        return changed == 1

    async def release(self, key: str, *, tenant: str) -> bool:
        deleted = await self._db.execute(
            self._db.q("DELETE FROM {s}.idempotency WHERE tenant = %s AND idem_key = %s"), (tenant, key)
        )
        return deleted == 1

    async def get(self, key: str, *, tenant: str) -> IdempotencyRecord | None:
        row = await self._db.fetchone(self._select, (tenant, key))
        return None if row is None else idempotency_from_row(row)


class PostgresAuditStore:
    """The audit chain in `<schema>.audit`."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        self._select = db.q(select_sql("{s}.audit", AUDIT_COLUMNS))
        self._insert = db.q(insert_sql("{s}.audit", AUDIT_COLUMNS, "%s"))
        self._lock = db.q("LOCK TABLE {s}.audit IN EXCLUSIVE MODE")
        self._head = db.q("SELECT seq, hash FROM {s}.audit ORDER BY seq DESC LIMIT 1")

    async def append(self, entry: AuditEntry) -> AuditEntry:
        # Pipeline mode: BEGIN, LOCK and the head read travel together, then INSERT and COMMIT do:
        # two round trips instead of five.
        async with self._db.connection() as conn, conn.pipeline(), conn.transaction():
            await conn.execute(self._lock)
            head = await _fetchone(conn, self._head)
            sealed = seal_next(entry, head)
            await conn.execute(self._insert, audit_to_row(sealed))
        return sealed

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        rows = await self._db.fetchall(
            f"{self._select} WHERE seq > %s ORDER BY seq LIMIT %s", (since_seq, limit)
        )
        return [audit_from_row(row) for row in rows]

    async def last(self) -> AuditEntry | None:
        row = await self._db.fetchone(f"{self._select} ORDER BY seq DESC LIMIT 1")
        return None if row is None else audit_from_row(row)


class PostgresHandleStore:
    """Result pages in `<schema>.handles`."""

    def __init__(self, db: PostgresDatabase) -> None:
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
            self._db.q(
                "INSERT INTO {s}.handles AS h (handle, tenant, user_id, pages, meta, created_at, "
                "expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (handle) DO UPDATE SET "
                "tenant = excluded.tenant, user_id = excluded.user_id, pages = excluded.pages, "
                "meta = excluded.meta, created_at = excluded.created_at, expires_at = excluded.expires_at "
                "WHERE h.expires_at <= excluded.created_at"
            ),
            (handle, tenant, user, dump_json(list(pages)), dump_json(meta), at, at + ttl_s),
        )
        if changed != 1:
            raise AlreadyExistsError(f"handle {handle!r} already exists")

    async def get(
        self, handle: str, *, tenant: str, user: str | None = None, now: float | None = None
    ) -> HandleData | None:
        at = now_or(now)
        row = await self._db.fetchone(
            self._db.q(
                "SELECT pages, meta FROM {s}.handles WHERE handle = %s AND tenant = %s AND expires_at > %s"
                " AND (%s::text IS NULL OR user_id = %s)"
            ),
            (handle, tenant, at, user, user),
        )
        return handle_from_row(row)

    async def purge(self, *, now: float | None = None) -> int:
        at = now_or(now)
        return await self._db.execute(self._db.q("DELETE FROM {s}.handles WHERE expires_at <= %s"), (at,))


class PostgresRunStore:
    """Serialised runs in `<schema>.runs`."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    async def save(
        self, run_id: str, *, tenant: str, status: str, state_json: str, now: float | None = None
    ) -> None:
        at = now_or(now)
        changed = await self._db.execute(
            self._db.q(
                "INSERT INTO {s}.runs AS r (run_id, tenant, status, state_json, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET "
                "status = excluded.status, state_json = excluded.state_json, "
                "updated_at = excluded.updated_at WHERE r.tenant = excluded.tenant"
            ),
            (run_id, tenant, status, state_json, at, at),
        )
        if changed != 1:
            raise StoreError(f"run {run_id!r} belongs to another tenant")

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        row = await self._db.fetchone(
            self._db.q("SELECT status, state_json, tenant FROM {s}.runs WHERE run_id = %s"), (run_id,)
        )
        return run_from_row(row, tenant)

    async def list(
        self, *, status: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> builtins.list[RunSummary]:
        where, params = run_filter(status=status, tenant=tenant, mark="%s")
        query = self._db.q("SELECT run_id, status, updated_at FROM {s}.runs")
        query += f"{where} ORDER BY updated_at DESC, run_id LIMIT %s"
        params.append(limit)
        return [RunSummary(*row) for row in await self._db.fetchall(query, params)]


# One statement: every SET expression reads the old row, which ON CONFLICT holds locked.
_REFILL = "LEAST(%(burst)s, b.tokens + GREATEST(0.0, %(now)s - b.updated_at) * %(rate)s)"
_BUCKET_SQL = f"""
INSERT INTO {{s}}.rate_limits AS b (bucket_key, tokens, updated_at, allowed)
VALUES (%(key)s, %(burst)s - %(cost)s, %(now)s, true)
ON CONFLICT (bucket_key) DO UPDATE SET
  tokens = CASE WHEN {_REFILL} >= %(cost)s THEN {_REFILL} - %(cost)s ELSE {_REFILL} END,
  allowed = {_REFILL} >= %(cost)s,
  updated_at = GREATEST(b.updated_at, %(now)s)
RETURNING tokens, allowed
"""


class PostgresRateLimiter:
    """Token buckets in `<schema>.rate_limits`, one atomic upsert per acquire."""

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        self._sql = db.q(_BUCKET_SQL)

    async def acquire(
        self, key: str, *, rate_per_s: float, burst: int, cost: float = 1, now: float | None = None
    ) -> float:
        check_bucket_args(rate_per_s, burst, cost)
        params = bucket_params(key, rate_per_s=rate_per_s, burst=burst, cost=cost, now=now_or(now))
        row = await self._db.fetchone(self._sql, params)
        if row is None:  # RETURNING always yields the upserted row
            raise StoreError(f"rate limit upsert for {key!r} returned nothing")
        tokens, allowed = row
        return bucket_wait(tokens, allowed, rate_per_s=rate_per_s, cost=cost)


class PostgresStores(Stores):
    """Every store in one Postgres schema, shared by any number of processes and hosts.

    The constructor does no I/O (the schema is created by the first operation); prefer
    `await PostgresStores.open(dsn)`, which connects and creates the schema up front so a wrong DSN
    fails at start-up.

    Example:
        >>> stores = await PostgresStores.open("postgresql://postgres@127.0.0.1:5432/test", schema="maitre")
        >>> await stores.runs.save("r1", tenant="t", status="paused", state_json="{}")
        >>> await stores.close()
    """

    def __init__(self, dsn: str, *, schema: str = "maitre", pool_size: int = 4) -> None:
        db = PostgresDatabase(dsn, schema=schema, pool_size=pool_size)
        self.db = db
        closer: Callable[[], Any] = db.close
        super().__init__(
            approvals=PostgresApprovalStore(db),
            idempotency=PostgresIdempotencyStore(db),
            audit=PostgresAuditStore(db),
            handles=PostgresHandleStore(db),
            runs=PostgresRunStore(db),
            rate_limits=PostgresRateLimiter(db),
            backend="postgres",
            closers=[closer],
        )

    @classmethod
    async def open(cls, dsn: str, *, schema: str = "maitre", pool_size: int = 4) -> PostgresStores:
        """Connect, create the schema and tables if needed, and return the stores."""
        stores = cls(dsn, schema=schema, pool_size=pool_size)
        try:
            await stores.db.open()
        except BaseException:
            await stores.close()
            raise
        return stores
