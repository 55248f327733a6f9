"""The hash-chained audit log in the `audit` table, for every SQL engine.

`append` reads the chain's head and inserts the next entry in one unit of work that excludes every
other appender, in any process: an immediate transaction on SQLite (the file's write lock), plus
`LOCK TABLE audit IN EXCLUSIVE MODE` on Postgres (blocks appenders, never readers; scoped to this
schema's table, unlike an advisory lock id shared by every schema of a database). `seq` is the
primary key, so even a writer bypassing the lock could not create a duplicate. Triggers refuse
UPDATE and DELETE on the table (see `maitre.storage.schema`).

`append_in(tx, entry)` is the same step inside a caller's immediate unit of work (for instance the
one that also completes the idempotency key the entry records).
"""

from __future__ import annotations

from maitre.audit.chain import AuditEntry
from maitre.storage._rows import (
    AUDIT_COLUMNS,
    audit_from_row,
    audit_to_row,
    insert_sql,
    limit_sql,
    select_sql,
)
from maitre.storage.base import seal_next
from maitre.storage.engine.base import Engine, Tx

__all__ = ["SQLAuditStore"]

_SELECT = select_sql("audit", AUDIT_COLUMNS)
_INSERT = insert_sql("audit", AUDIT_COLUMNS)
_HEAD = "SELECT seq, hash FROM {s}.audit ORDER BY seq DESC LIMIT 1"


class SQLAuditStore:
    """`AuditStore` over an engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def append(self, entry: AuditEntry) -> AuditEntry:
        async def op(tx: Tx) -> AuditEntry:
            return await self.append_in(tx, entry)

        # Pipelined on Postgres: BEGIN, LOCK and the head read travel together, then INSERT and COMMIT.
        return await self._engine.transact(op, immediate=True, pipeline=True)

    async def append_in(self, tx: Tx, entry: AuditEntry) -> AuditEntry:
        """`append` inside `tx`, which must be an immediate unit of work."""
        await tx.lock("audit")
        sealed = seal_next(entry, await tx.fetchone(_HEAD))
        await tx.execute(_INSERT, audit_to_row(sealed))
        return sealed

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        params: list[object] = [since_seq]
        sql = f"{_SELECT} WHERE seq > ? ORDER BY seq{limit_sql(limit, params)}"
        return [audit_from_row(row) for row in await self._engine.fetchall(sql, params)]

    async def last(self) -> AuditEntry | None:
        row = await self._engine.fetchone(f"{_SELECT} ORDER BY seq DESC LIMIT 1")
        return None if row is None else audit_from_row(row)
