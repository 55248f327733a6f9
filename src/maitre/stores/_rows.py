"""Column lists and row <-> record conversion shared by the SQL backends (SQLite and Postgres).

Both backends store JSON as TEXT, not JSONB: the text that went in is the text that comes out, so a
stored idempotency result replays byte for byte and nothing is renormalised behind our back.
Column names avoid SQL keywords (`user_id`, `at_ts`, `idem_key`) so the same names work everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from maitre.audit.chain import AuditEntry
from maitre.stores.base import ApprovalRequest, IdempotencyRecord, effective_status

__all__ = [
    "APPROVAL_COLUMNS",
    "AUDIT_COLUMNS",
    "IDEMPOTENCY_COLUMNS",
    "approval_from_row",
    "approval_to_row",
    "audit_from_row",
    "audit_to_row",
    "dump_json",
    "idempotency_from_row",
    "load_json",
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
)

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
    )


def approval_from_row(row: Sequence[Any], now: float) -> ApprovalRequest:
    """A request as readers see it: `status` is the effective one at `now`."""
    (id_, tool, arguments, call_hash, user, tenant, run_id, reason, created_at, expires_at, status,
     approver, decided_at, message, edited, approved_hash, used_at) = row
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
    )


def idempotency_from_row(row: Sequence[Any]) -> IdempotencyRecord:
    key, tenant, tool, fingerprint, state, result, created_at, updated_at, lease_until = row
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
    (seq, at, user, tenant, tool, decision, run_id, call_id, call_hash, approval_id, arguments,
     result_digest, error_code, detail, duration_ms, replayed, prev_hash, hash_) = row
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
