"""Approval requests in the `approvals` table, written once for every SQL engine.

- `decide` reads the row locked (`SELECT ... FOR UPDATE` on Postgres; SQLite's immediate
  transaction holds the write lock), checks it is pending and unexpired, and updates it, in one
  unit of work: a request leaves `pending` at most once.
- a personal tool's request (`ApprovalRequest.personal`) keeps its arguments sealed under the
  user's key (`maitre.storage.subject_keys`): `{"$sealed": "pd1..."}` in the row, opened for every
  reader while the key lives, `{"$forgotten": true}` once a forget erased it.
- `consume` is one guarded `UPDATE ... SET status = 'used' WHERE status = 'approved' AND
  approved_hash = ? AND expires_at > ?`: a second updater finds `used` and changes nothing, so an
  approval runs one execution, and only for the exact hash it was granted for.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
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
    dump_json,
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
from maitre.storage.subject_keys import SubjectKey, SubjectKeys, is_sealed

__all__ = ["FORGOTTEN_ARGUMENTS", "SEALED_ARGUMENTS", "SQLApprovalStore"]

_SELECT = select_sql("approvals", APPROVAL_COLUMNS)
_INSERT = insert_sql("approvals", APPROVAL_COLUMNS) + " ON CONFLICT (id) DO NOTHING"
_DECIDE = f"UPDATE {{s}}.approvals SET {assignments(DECISION_COLUMNS)} WHERE id = ?"
_CONSUME = (
    "UPDATE {s}.approvals SET status = 'used', used_at = ? WHERE id = ? AND status = 'approved' "
    "AND approved_hash = ? AND expires_at > ?"
)


class SQLApprovalStore:
    """`ApprovalStore` over an engine (`subject_keys` seal a personal tool's arguments)."""

    def __init__(self, engine: Engine, subject_keys: SubjectKeys | None = None) -> None:
        self._engine = engine
        self._keys = subject_keys
        self._select_locked = f"{_SELECT} WHERE id = ?{engine.dialect.for_update}"

    async def _seal(self, request: ApprovalRequest, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self._keys is not None
        key = await self._keys.key(request.tenant, request.user)
        assert key is not None  # created when missing
        return {SEALED_ARGUMENTS: key.seal(dump_json(arguments), _purpose(request.id))}

    async def _open(self, request: ApprovalRequest) -> ApprovalRequest:
        """`request` with its sealed arguments opened (or marked forgotten)."""
        if not _sealed(request.arguments) or self._keys is None:
            return request
        key = await self._keys.key(request.tenant, request.user, create=False)
        request.personal = True
        request.arguments = _opened(key, request.arguments, request.id)
        if request.edited_arguments is not None:
            request.edited_arguments = _opened(key, request.edited_arguments, request.id)
        return request

    async def create(self, request: ApprovalRequest) -> ApprovalRequest:
        check_new_request(request)
        stored = request
        if request.personal and self._keys is not None:
            stored = dataclasses.replace(request, arguments=await self._seal(request, request.arguments))
        row = approval_to_row(stored)
        if await self._engine.execute(_INSERT, row) != 1:
            raise AlreadyExistsError(f"approval {request.id!r} already exists")
        created = approval_from_row(row, request.created_at)
        created.arguments, created.personal = request.arguments, request.personal
        return created

    async def get(self, approval_id: str, *, now: float | None = None) -> ApprovalRequest | None:
        at = now_or(now)
        row = await self._engine.fetchone(f"{_SELECT} WHERE id = ?", (approval_id,))
        return None if row is None else await self._open(approval_from_row(row, at))

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
        return [
            await self._open(approval_from_row(row, at)) for row in await self._engine.fetchall(sql, params)
        ]

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
        sealed_edit: dict[str, Any] | None = None
        if edited_arguments is not None and self._keys is not None:
            # Sealed before the transaction (the key is read on the engine, outside it).
            found = await self._engine.fetchone(f"{_SELECT} WHERE id = ?", (approval_id,))
            if found is not None:
                seen = approval_from_row(found, at)
                if _sealed(seen.arguments):
                    sealed_edit = await self._seal(seen, edited_arguments)

        async def op(tx: Tx) -> ApprovalRequest:
            current = decidable_from_row(
                approval_id, await tx.fetchone(self._select_locked, (approval_id,)), at
            )
            fields = decision_fields(
                current.call_hash, approve, approver, message, edited_arguments, approved_hash, at
            )
            stored = fields if sealed_edit is None else {**fields, "edited_arguments": sealed_edit}
            await tx.execute(_DECIDE, (*decision_row(stored), approval_id))
            return applied_decision(current, fields, at)

        decided = await self._engine.transact(op, immediate=True)
        if _sealed(decided.arguments) and self._keys is not None:
            key = await self._keys.key(decided.tenant, decided.user, create=False)
            decided.personal = True
            decided.arguments = _opened(key, decided.arguments, decided.id)
        return decided

    async def consume(self, approval_id: str, *, call_hash: str, now: float | None = None) -> bool:
        at = now_or(now)
        return await self._engine.execute(_CONSUME, (at, approval_id, call_hash, at)) == 1


SEALED_ARGUMENTS = "$sealed"
"""The one member of a personal request's stored `arguments`: the sealed JSON text."""
FORGOTTEN_ARGUMENTS: dict[str, Any] = {"$forgotten": True}
"""What a personal request's arguments read as once its user's key is erased."""


def _purpose(approval_id: str) -> str:
    return f"approval.arguments:{approval_id}"


def _sealed(arguments: object) -> bool:
    return isinstance(arguments, dict) and len(arguments) == 1 and is_sealed(arguments.get(SEALED_ARGUMENTS))


def _opened(key: SubjectKey | None, arguments: dict[str, Any], approval_id: str) -> dict[str, Any]:
    if not _sealed(arguments):
        return arguments
    opened = None if key is None else key.open(arguments[SEALED_ARGUMENTS], _purpose(approval_id))
    if opened is None:
        return dict(FORGOTTEN_ARGUMENTS)
    value: dict[str, Any] = json.loads(opened)
    return value
