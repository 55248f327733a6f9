"""Approval requests in the `approvals` table, written once for every SQL engine.

- `decide` reads the row locked (`SELECT ... FOR UPDATE` on Postgres; SQLite's immediate
  transaction holds the write lock), checks it is pending and unexpired, and updates it, in one
  unit of work: a request leaves `pending` at most once.
- `consume` is one guarded `UPDATE ... SET status = 'used' WHERE status = 'approved' AND
  approved_hash = ? AND expires_at > ?`: a second updater finds `used` and changes nothing, so an
  approval runs one execution, and only for the exact hash it was granted for.
"""

from __future__ import annotations

import builtins
from typing import Any

from maitre.storage._rows import (
    APPROVAL_COLUMNS,
    DECISION_COLUMNS,
    applied_decision,
    approval_filter,
    approval_from_row,
    approval_to_row,
    assignments,
    decidable_from_row,
    decision_row,
    insert_sql,
    limit_sql,
    select_sql,
)
from maitre.storage.base import (
    AlreadyExistsError,
    ApprovalRequest,
    ApprovalStatus,
    check_new_request,
    decision_fields,
    now_or,
)
from maitre.storage.engine.base import Engine, Tx

__all__ = ["SQLApprovalStore"]

_SELECT = select_sql("approvals", APPROVAL_COLUMNS)
_INSERT = insert_sql("approvals", APPROVAL_COLUMNS) + " ON CONFLICT (id) DO NOTHING"
_DECIDE = f"UPDATE {{s}}.approvals SET {assignments(DECISION_COLUMNS)} WHERE id = ?"
_CONSUME = (
    "UPDATE {s}.approvals SET status = 'used', used_at = ? WHERE id = ? AND status = 'approved' "
    "AND approved_hash = ? AND expires_at > ?"
)


class SQLApprovalStore:
    """`ApprovalStore` over an engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._select_locked = f"{_SELECT} WHERE id = ?{engine.dialect.for_update}"

    async def create(self, request: ApprovalRequest) -> ApprovalRequest:
        check_new_request(request)
        row = approval_to_row(request)
        if await self._engine.execute(_INSERT, row) != 1:
            raise AlreadyExistsError(f"approval {request.id!r} already exists")
        return approval_from_row(row, request.created_at)

    async def get(self, approval_id: str, *, now: float | None = None) -> ApprovalRequest | None:
        at = now_or(now)
        row = await self._engine.fetchone(f"{_SELECT} WHERE id = ?", (approval_id,))
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
        where, params = approval_filter(status=status, tenant=tenant, now=at)
        sql = f"{_SELECT}{where} ORDER BY created_at, id{limit_sql(limit, params)}"
        return [approval_from_row(row, at) for row in await self._engine.fetchall(sql, params)]

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

        async def op(tx: Tx) -> ApprovalRequest:
            current = decidable_from_row(
                approval_id, await tx.fetchone(self._select_locked, (approval_id,)), at
            )
            fields = decision_fields(
                current.call_hash, approve, approver, message, edited_arguments, approved_hash, at
            )
            await tx.execute(_DECIDE, (*decision_row(fields), approval_id))
            return applied_decision(current, fields, at)

        return await self._engine.transact(op, immediate=True)

    async def consume(self, approval_id: str, *, call_hash: str, now: float | None = None) -> bool:
        at = now_or(now)
        return await self._engine.execute(_CONSUME, (at, approval_id, call_hash, at)) == 1
