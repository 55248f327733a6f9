"""Stage 11, record: one hash-chained audit entry per call, refused or executed.

Arguments and results are stored as digests by default, so the audit log proves what happened
without becoming a second copy of customer data (the argument digest is sha256 of the call's RFC
8785 text, the one its call hash and idempotency key are taken over); `audit_arguments="redacted"`
stores the arguments, as RFC 8785 text, with secret-looking fields masked instead.
"""

from __future__ import annotations

import time
from typing import Literal

from ..audit import AuditEntry, digest, redact
from ..audit.canonical import canonical_json
from ..types import ToolResult
from .base import CallContext, Decision
from .hashing import sha256_text, validated_text

__all__ = ["AuditRecorder"]


class AuditRecorder:
    """A gate recorder that appends to `stores.audit`."""

    def __init__(self, store: object, *, arguments: Literal["digest", "redacted"] = "digest") -> None:
        self.store = store
        self.arguments = arguments

    async def __call__(self, ctx: CallContext, result: ToolResult) -> None:
        shown: str | None
        if self.arguments == "redacted":
            arguments = ctx.validated_json if ctx.validated_json is not None else ctx.arguments
            shown = None if arguments is None else canonical_json(redact(arguments))
        else:  # the digest of the text the call's other hashes were taken over (no new encoding)
            text = validated_text(ctx) if ctx.validated_json is not None else ctx.canonical_arguments
            shown = None if text is None else sha256_text(text)
        detail = ctx.detail
        if (
            detail is None
            and ctx.tool is not None
            and {"search", "meta"} <= set(ctx.tool.tags)
            and not result.is_error
        ):
            detail = _reveal_detail(ctx, result)
        decision = ctx.decision
        if result.is_error and decision in (Decision.ALLOW, Decision.APPROVED):
            decision = Decision.ERROR if ctx.executed else Decision.REFUSED
        await self.store.append(  # type: ignore[attr-defined]
            AuditEntry(
                at=time.time(),
                user=ctx.principal.user,
                tenant=ctx.principal.tenant,
                tool=ctx.tool.name if ctx.tool else str(ctx.call.name)[:200],
                decision=str(decision),
                run_id=ctx.run.run_id,
                call_id=str(ctx.call.id)[:200],
                call_hash=ctx.call_hash,
                approval_id=ctx.approval_id,
                arguments=shown,
                result_digest=None if result.is_error else digest(result.content),
                error_code=str(result.error.code) if result.error else None,
                detail=detail,
                duration_ms=round((time.perf_counter() - ctx.started) * 1000, 3),
                replayed=result.replayed,
            )
        )


def _reveal_detail(ctx: CallContext, result: ToolResult) -> str:
    """A tool-search reveal is audited with its query and what it showed, with scores (seed 000)."""
    shown = [[t.get("name"), t.get("score")] for t in (result.structured or {}).get("tools", [])]
    query = (ctx.arguments or {}).get("query", "")
    return canonical_json({"reveal": {"query": str(query)[:500], "shown": shown}})[:4000]
