"""Idempotency records in the `idempotency` table, keyed by (tenant, idem_key), for every SQL engine.

Each transition is one guarded statement, atomic in every engine without a surrounding transaction:

- `begin` claims with `INSERT ... ON CONFLICT (tenant, idem_key) DO NOTHING`; a concurrent insert of
  the same key waits for the first (Postgres) or for the write lock (SQLite) and inserts nothing, so
  exactly one caller sees one row changed. Otherwise it reads the record (a replay is two
  statements), and only when the record must change does it run a guarded statement: a completed
  key past the dedupe window is taken over by `UPDATE ... WHERE state = 'completed' AND
  updated_at < ?` (one caller matches), an `in_flight` record whose lease passed is turned
  `uncertain` by `UPDATE ... WHERE state = 'in_flight' AND lease_until <= ? RETURNING ...`. When a
  guarded statement matches nothing, the record changed under us and is read again.
- `take_over` matches the exact record the caller saw (state, `updated_at`, owner): of several
  callers holding the same view, one at most changes it.
- `complete` never overwrites a stored result (`WHERE state IN ('in_flight', 'uncertain')`).

`complete_in(db, ...)` takes a `Tx` or the engine, so a caller can store a result and the audit entry
that records it in one unit of work.

`legacy_hashes` says whether the database may hold keys of hash version 1 (see
`maitre.storage.schema`): True until `load_hash_generation` has read the schema table, so a store
that has not looked yet is asked for old keys too (safe, one more read per new key).
"""

from __future__ import annotations

from maitre.storage._rows import IDEMPOTENCY_COLUMNS, idempotency_from_row, select_sql
from maitre.storage.base import IdempotencyRecord, completion_refused, now_or
from maitre.storage.engine.base import Engine, Executor
from maitre.storage.schema import HASH_V1_MARK

__all__ = ["HASH_V1_SQL", "SQLIdempotencyStore"]

_COLUMNS = ", ".join(IDEMPOTENCY_COLUMNS)
_SELECT = select_sql("idempotency", IDEMPOTENCY_COLUMNS) + " WHERE tenant = ? AND idem_key = ?"
_CLAIM = (
    "INSERT INTO {s}.idempotency (idem_key, tenant, tool, fingerprint, state, result, created_at, "
    "updated_at, lease_until, owner) VALUES (?, ?, ?, ?, 'in_flight', NULL, ?, ?, ?, ?) "
    "ON CONFLICT (tenant, idem_key) DO NOTHING"
)
_REUSE = (
    "UPDATE {s}.idempotency SET tool = ?, fingerprint = ?, state = 'in_flight', result = NULL, "
    "created_at = ?, updated_at = ?, lease_until = ?, owner = ? WHERE tenant = ? AND idem_key = ? "
    "AND state = 'completed' AND updated_at < ?"
)
_EXPIRE = (
    "UPDATE {s}.idempotency SET state = 'uncertain', updated_at = ? WHERE tenant = ? AND idem_key = ? "
    f"AND state = 'in_flight' AND lease_until <= ? RETURNING {_COLUMNS}"
)
_TAKE_OVER = (
    "UPDATE {s}.idempotency SET state = 'in_flight', result = NULL, updated_at = ?, lease_until = ?, "
    "owner = ? WHERE tenant = ? AND idem_key = ? AND state IN ('in_flight', 'uncertain') AND state = ? "
    "AND updated_at = ? AND owner IS NOT DISTINCT FROM ?"
)
_COMPLETE = (
    "UPDATE {s}.idempotency SET state = 'completed', result = ?, updated_at = ? "
    "WHERE tenant = ? AND idem_key = ? AND state IN ('in_flight', 'uncertain') RETURNING state"
)
"""`RETURNING`, not a row count: inside a pipelined Postgres unit of work the count is not known yet."""
_UNCERTAIN = (
    "UPDATE {s}.idempotency SET state = 'uncertain', updated_at = ? WHERE tenant = ? AND idem_key = ? "
    "AND state = 'in_flight' AND (CAST(? AS TEXT) IS NULL OR owner = ?)"
)
_RELEASE = "DELETE FROM {s}.idempotency WHERE tenant = ? AND idem_key = ?"
HASH_V1_SQL = "SELECT 1 FROM {s}.maitre_schema WHERE component = ?"
"""Whether the database may hold version-1 keys: a row means yes (params: `(HASH_V1_MARK,)`)."""


class SQLIdempotencyStore:
    """`IdempotencyStore` over an engine."""

    legacy_hashes: bool
    """Whether a key may also be stored in its version-1 form (True until known otherwise)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        """The engine (to run `complete_in` in another concern's unit of work)."""
        self.legacy_hashes = True

    async def load_hash_generation(self) -> bool:
        """Read from the schema table whether version-1 keys may be stored; returns `legacy_hashes`."""
        self.legacy_hashes = await self.engine.fetchone(HASH_V1_SQL, (HASH_V1_MARK,)) is not None
        return self.legacy_hashes

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
        db = self.engine
        while True:
            if await db.execute(_CLAIM, (key, tenant, tool, fingerprint, at, at, at + lease_s, owner)) == 1:
                return None
            row = await db.fetchone(_SELECT, (tenant, key))
            if row is None:
                continue  # released between our insert attempt and our read: claim it again
            record = idempotency_from_row(row)
            if (
                reuse_completed_after_s is not None
                and record.state == "completed"
                and record.updated_at < at - reuse_completed_after_s
            ):
                reuse = (
                    tool,
                    fingerprint,
                    at,
                    at,
                    at + lease_s,
                    owner,
                    tenant,
                    key,
                    at - reuse_completed_after_s,
                )
                if await db.execute(_REUSE, reuse) == 1:
                    return None
                continue  # another caller took it over first: look again
            if record.state == "in_flight" and record.lease_until <= at:
                expired = await db.fetchone(_EXPIRE, (at, tenant, key, at))
                if expired is not None:
                    return idempotency_from_row(expired)
                continue  # it changed under us (completed, released, taken over): look again
            return record

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
        params = (at, at + lease_s, owner, tenant, key, seen.state, seen.updated_at, seen.owner)
        return await self.engine.execute(_TAKE_OVER, params) == 1

    async def complete(self, key: str, result_json: str, *, tenant: str, now: float | None = None) -> None:
        await self.complete_in(self.engine, key, result_json, tenant=tenant, now=now)

    async def complete_in(
        self, db: Executor, key: str, result_json: str, *, tenant: str, now: float | None = None
    ) -> None:
        """`complete` through `db` (a `Tx` of a larger unit of work, or the engine)."""
        if await db.fetchone(_COMPLETE, (result_json, now_or(now), tenant, key)) is not None:
            return
        raise completion_refused(key, exists=await db.fetchone(_SELECT, (tenant, key)) is not None)

    async def mark_uncertain(
        self, key: str, *, tenant: str, now: float | None = None, owner: str | None = None
    ) -> bool:
        return await self.engine.execute(_UNCERTAIN, (now_or(now), tenant, key, owner, owner)) == 1

    async def release(self, key: str, *, tenant: str) -> bool:
        return await self.engine.execute(_RELEASE, (tenant, key)) == 1

    async def get(self, key: str, *, tenant: str) -> IdempotencyRecord | None:
        row = await self.engine.fetchone(_SELECT, (tenant, key))
        return None if row is None else idempotency_from_row(row)
