"""Column lists, row <-> record conversion and SQL pieces shared by the SQL concerns.

Every engine stores JSON as TEXT, not JSONB: the text that went in is the text that comes out, so a
stored idempotency result replays byte for byte and nothing is renormalised behind our back.
Column names avoid SQL keywords (`user_id`, `at_ts`, `idem_key`) so the same names work everywhere.
The SQL built here is portable (`?` placeholders, `{s}.table`; see `maitre.storage.engine.base`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from maitre.audit.chain import AuditEntry
from maitre.storage.base import (
    ApprovalRequest,
    ApprovalStatus,
    HandleData,
    IdempotencyRecord,
    RunState,
    effective_status,
    not_decidable,
)
from maitre.types import TaintSource

__all__ = [
    "APPROVAL_COLUMNS",
    "AUDIT_COLUMNS",
    "DECISION_COLUMNS",
    "IDEMPOTENCY_COLUMNS",
    "applied_decision",
    "approval_filter",
    "approval_from_row",
    "approval_to_row",
    "assignments",
    "audit_from_row",
    "audit_to_row",
    "bucket_wait",
    "decidable_from_row",
    "decision_row",
    "dump_json",
    "handle_from_row",
    "idempotency_from_row",
    "insert_sql",
    "limit_sql",
    "load_json",
    "run_filter",
    "run_from_row",
    "select_sql",
]

APPROVAL_COLUMNS = (
    "id",
    "tool",
    "arguments",
    "call_hash",
    "user_id",
    "tenant",
    "run_id",
    "reason",
    "created_at",
    "expires_at",
    "status",
    "approver",
    "decided_at",
    "message",
    "edited_arguments",
    "approved_hash",
    "used_at",
    "policy_rule",
    "taint",
    "effect",
    "risk",
)
"""The `approvals` columns in row order; the last four (schema version 4) are NULL in a row written
before them, and read as the record's defaults."""

DECISION_COLUMNS = ("status", "approver", "decided_at", "message", "edited_arguments", "approved_hash")
"""The approval columns a decision sets (the keys of `decision_fields`), in `decision_row` order."""

IDEMPOTENCY_COLUMNS = (
    "idem_key",
    "tenant",
    "tool",
    "fingerprint",
    "state",
    "result",
    "created_at",
    "updated_at",
    "lease_until",
    "owner",
)

AUDIT_COLUMNS = (
    "seq",
    "at_ts",
    "user_id",
    "tenant",
    "tool",
    "decision",
    "run_id",
    "call_id",
    "call_hash",
    "approval_id",
    "arguments",
    "result_digest",
    "error_code",
    "detail",
    "duration_ms",
    "replayed",
    "prev_hash",
    "hash",
)


def dump_json(value: Any) -> str:
    """Compact JSON text for storage."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def load_json(text: str | None) -> Any:
    """The value of stored JSON text (None stays None)."""
    return None if text is None else json.loads(text)


def approval_to_row(r: ApprovalRequest) -> tuple[Any, ...]:
    return (
        r.id,
        r.tool,
        dump_json(r.arguments),
        r.call_hash,
        r.user,
        r.tenant,
        r.run_id,
        r.reason,
        float(r.created_at),
        float(r.expires_at),
        r.status,
        r.approver,
        r.decided_at,
        r.message,
        None if r.edited_arguments is None else dump_json(r.edited_arguments),
        r.approved_hash,
        r.used_at,
        r.rule,
        None if r.taint is None else dump_json(r.taint.to_dict()),
        r.effect,
        r.risk,
    )


def approval_from_row(row: Sequence[Any], now: float) -> ApprovalRequest:
    """A request as readers see it: `status` is the effective one at `now`."""
    (
        id_,
        tool,
        arguments,
        call_hash,
        user,
        tenant,
        run_id,
        reason,
        created_at,
        expires_at,
        status,
        approver,
        decided_at,
        message,
        edited,
        approved_hash,
        used_at,
        rule,
        taint,
        effect,
        risk,
    ) = row
    return ApprovalRequest(
        id=id_,
        tool=tool,
        arguments=load_json(arguments),
        call_hash=call_hash,
        user=user,
        tenant=tenant,
        run_id=run_id,
        reason=reason,
        created_at=created_at,
        expires_at=expires_at,
        status=effective_status(status, expires_at, now),
        approver=approver,
        decided_at=decided_at,
        message=message,
        edited_arguments=load_json(edited),
        approved_hash=approved_hash,
        used_at=used_at,
        rule=rule or "",
        taint=None if taint is None else TaintSource.from_dict(load_json(taint)),
        effect=effect,
        risk=risk,
    )


def decidable_from_row(approval_id: str, row: Sequence[Any] | None, now: float) -> ApprovalRequest:
    """The request in `row` (the row read for `decide()`), if it can take a decision at `now`.

    Raises `ApprovalStateError` when the request is unknown (`row` None), decided or expired.
    """
    if row is None:
        raise not_decidable(approval_id, None)
    current = approval_from_row(row, now)
    if current.status != "pending":
        raise not_decidable(approval_id, current.status)
    return current


def decision_row(fields: dict[str, Any]) -> tuple[Any, ...]:
    """The values of `decision_fields(...)` in `DECISION_COLUMNS` order, ready to store."""
    edited = fields["edited_arguments"]
    return (
        fields["status"],
        fields["approver"],
        fields["decided_at"],
        fields["message"],
        None if edited is None else dump_json(edited),
        fields["approved_hash"],
    )


def applied_decision(request: ApprovalRequest, fields: dict[str, Any], now: float) -> ApprovalRequest:
    """`request` (changed in place) as readers see it once the decision `fields` are stored."""
    for name, value in fields.items():
        setattr(request, name, value)
    request.status = effective_status(request.status, request.expires_at, now)
    return request


def handle_from_row(row: Sequence[Any] | None) -> HandleData | None:
    """A `SELECT pages, meta` row as `HandleStore.get` returns it (None stays None)."""
    return None if row is None else HandleData(load_json(row[0]), load_json(row[1]))


def run_from_row(row: Sequence[Any] | None, tenant: str | None) -> RunState | None:
    """A `SELECT status, state_json, tenant` row as `RunStore.load` returns it: None when there is no
    row, or when `tenant` is given and the run is another tenant's."""
    if row is None or (tenant is not None and row[2] != tenant):
        return None
    return RunState(row[0], row[1])


def idempotency_from_row(row: Sequence[Any]) -> IdempotencyRecord:
    key, tenant, tool, fingerprint, state, result, created_at, updated_at, lease_until, owner = row
    return IdempotencyRecord(
        key=key,
        tenant=tenant,
        tool=tool,
        fingerprint=fingerprint,
        state=state,
        result=result,
        created_at=created_at,
        updated_at=updated_at,
        lease_until=lease_until,
        owner=owner,
    )


def audit_to_row(e: AuditEntry) -> tuple[Any, ...]:
    return (
        e.seq,
        e.at,
        e.user,
        e.tenant,
        e.tool,
        e.decision,
        e.run_id,
        e.call_id,
        e.call_hash,
        e.approval_id,
        e.arguments,
        e.result_digest,
        e.error_code,
        e.detail,
        e.duration_ms,
        bool(e.replayed),
        e.prev_hash,
        e.hash,
    )


def audit_from_row(row: Sequence[Any]) -> AuditEntry:
    (
        seq,
        at,
        user,
        tenant,
        tool,
        decision,
        run_id,
        call_id,
        call_hash,
        approval_id,
        arguments,
        result_digest,
        error_code,
        detail,
        duration_ms,
        replayed,
        prev_hash,
        hash_,
    ) = row
    return AuditEntry(
        seq=seq,
        at=at,
        user=user,
        tenant=tenant,
        tool=tool,
        decision=decision,
        run_id=run_id,
        call_id=call_id,
        call_hash=call_hash,
        approval_id=approval_id,
        arguments=arguments,
        result_digest=result_digest,
        error_code=error_code,
        detail=detail,
        duration_ms=duration_ms,
        replayed=bool(replayed),
        prev_hash=prev_hash,
        hash=hash_,
    )


# ---------------------------------------------------------------------------------------------- SQL text


def select_sql(table: str, columns: Sequence[str]) -> str:
    """`SELECT <columns> FROM {s}.<table>`."""
    return f"SELECT {', '.join(columns)} FROM {{s}}.{table}"


def insert_sql(table: str, columns: Sequence[str]) -> str:
    """`INSERT INTO {s}.<table> (<columns>) VALUES (?, ...)`."""
    return f"INSERT INTO {{s}}.{table} ({', '.join(columns)}) VALUES ({', '.join(['?'] * len(columns))})"


def assignments(columns: Sequence[str]) -> str:
    """`a = ?, b = ?`: the SET list of an UPDATE of `columns`."""
    return ", ".join(f"{column} = ?" for column in columns)


def limit_sql(limit: int | None, params: list[Any]) -> str:
    """` LIMIT ?` with its parameter appended, or "" for no limit (SQLite has no `LIMIT NULL`)."""
    if limit is None:
        return ""
    params.append(limit)
    return " LIMIT ?"


def _where(conditions: list[str], params: list[Any], **equal: Any) -> tuple[str, list[Any]]:
    """` WHERE <conditions> AND <column> = ? ...` for each `equal` value that is not None, and
    its parameters ("" when there is no condition)."""
    for column, value in equal.items():
        if value is not None:
            conditions.append(f"{column} = ?")
            params.append(value)
    return (f" WHERE {' AND '.join(conditions)}" if conditions else ""), params


def approval_filter(
    *, status: ApprovalStatus | None, tenant: str | None, now: float
) -> tuple[str, list[Any]]:
    """The ` WHERE ...` clause (or "") and its parameters for `ApprovalStore.list`.

    `status` filters by the effective status at `now`: `pending` and `approved` exclude the expired
    ones, and `expired` (never stored) matches a pending or approved request past its expiry.
    """
    if status in ("pending", "approved"):
        return _where(["status = ? AND expires_at > ?"], [status, now], tenant=tenant)
    if status == "expired":
        return _where(["status IN ('pending', 'approved') AND expires_at <= ?"], [now], tenant=tenant)
    return _where([], [], status=status, tenant=tenant)


def run_filter(*, status: str | None, tenant: str | None) -> tuple[str, list[Any]]:
    """The ` WHERE ...` clause (or "") and its parameters for `RunStore.list`."""
    return _where([], [], status=status, tenant=tenant)


# ------------------------------------------------------------------------------------------- rate limits


def bucket_wait(tokens: float, allowed: Any, *, rate_per_s: float, cost: float) -> float:
    """What `acquire` returns from the upsert's `RETURNING tokens, allowed`: 0.0, or the seconds to wait."""
    return 0.0 if allowed else (cost - tokens) / rate_per_s
