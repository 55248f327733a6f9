"""Stage 11, record: one hash-chained audit entry per call, refused or executed.

Arguments and results are stored as digests by default, so the audit log proves what happened
without becoming a second copy of customer data (the argument digest is sha256 of the call's RFC
8785 text, the one its call hash and idempotency key are taken over); `audit_arguments="redacted"`
stores the arguments, as RFC 8785 text, with secret-looking fields masked instead. A personal
tool's call (`Tool.personal`, and a `read_result` of its `res_p_` handle) is recorded with its
arguments and result digest keyed under the user's subject key, or in redacted mode its arguments
sealed under it (`maitre.gate.personal`), so a forget leaves nothing readable and the chain still
verifies.

When the idempotency and audit stores live in one database (`SQLiteStores`, `PostgresStores`), a
write's result is stored by the same transaction that appends its audit entry
(`append_after` + `complete_in`): one commit instead of two, shielded from the host's cancellation
where the database can make it wait (the tool has run: what it did must be written). Should that transaction fail, the result is still
stored on its own so a retry replays it, and the error goes on as before. `idempotency.settle`
leaves the result on the context (`ctx.completion`) when `completing_recorder` says a recorder
will store it.

A write whose caller was cancelled while it ran never reaches the pipeline's last steps; the
execute stage calls `record_interrupted` for it instead (see `maitre.gate.execute`), shielded, so
what the write did is still stored and audited once before the cancellation goes on.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Literal

from ..audit import AuditEntry, digest, redact
from ..audit.canonical import canonical_json
from ..exceptions import StoreError
from ..types import ToolError, ToolResult
from . import personal
from .base import CallContext, Decision
from .hashing import sha256_text, validated_text

if TYPE_CHECKING:
    from .pipeline import Gate

__all__ = ["AuditRecorder", "RECORD_GRACE_S", "completing_recorder", "record_interrupted"]

logger = logging.getLogger("maitre.gate")

RECORD_GRACE_S = 10.0
"""The longest `record_interrupted` may hold a cancelled caller (shaping, settling, auditing)."""


class AuditRecorder:
    """A gate recorder that appends to `stores.audit`."""

    def __init__(self, store: object, *, arguments: Literal["digest", "redacted"] = "digest") -> None:
        self.store = store
        self.arguments = arguments
        self._joins: tuple[object, bool] = (None, False)

    def completes(self, idempotency: object) -> bool:
        """True when keys of `idempotency` can be completed inside this recorder's appends (both
        stores on one engine, with `complete_in` and `append_after`)."""
        seen, answer = self._joins
        if idempotency is not seen:
            engine = getattr(self.store, "engine", None)
            answer = (
                engine is not None
                and hasattr(self.store, "append_after")
                and getattr(idempotency, "engine", None) is engine
                and hasattr(idempotency, "complete_in")
            )
            self._joins = (idempotency, answer)
        return answer

    async def __call__(self, ctx: CallContext, result: ToolResult) -> None:
        shown: str | None
        result_digest: str | None
        tool = ctx.tool
        if tool is not None and (
            tool.personal or (tool.name == "read_result" and personal.reads_personal_page(ctx))
        ):
            shown, result_digest = await _personal_fields(ctx, result, self.arguments)
        else:
            if self.arguments == "redacted":
                arguments = ctx.validated_json if ctx.validated_json is not None else ctx.arguments
                shown = None if arguments is None else canonical_json(redact(arguments))
            else:  # the digest of the text the call's other hashes were taken over (no new encoding)
                text = validated_text(ctx) if ctx.validated_json is not None else ctx.canonical_arguments
                shown = None if text is None else sha256_text(text)
            result_digest = None if result.is_error else digest(result.content)
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
        entry = AuditEntry(
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
            result_digest=result_digest,
            error_code=str(result.error.code) if result.error else None,
            detail=detail,
            duration_ms=round((time.perf_counter() - ctx.started) * 1000, 3),
            replayed=result.replayed,
        )
        completion = ctx.completion
        if completion is None or ctx.idempotency_key is None:
            await self.store.append(entry)  # type: ignore[attr-defined]
            return
        ctx.completion = None  # taken: a second pass (after an internal error) appends alone
        await _complete_and_append(self.store, ctx.gate.stores.idempotency, ctx, completion, entry)


async def _personal_fields(
    ctx: CallContext, result: ToolResult, mode: Literal["digest", "redacted"]
) -> tuple[str | None, str | None]:
    """(arguments, result digest) of a personal call's audit entry: digests under the subject's
    key, or in redacted mode the redacted arguments sealed under it (`maitre.gate.personal`). With
    no key to be had (a server store without a secret) both are left out, never written plain."""
    try:
        key = await personal.subject_key(ctx)
    except StoreError:
        return None, None
    shown: str | None
    if mode == "redacted":
        arguments = ctx.validated_json if ctx.validated_json is not None else ctx.arguments
        shown = None if arguments is None else key.seal(canonical_json(redact(arguments)), "audit.arguments")
    else:
        text = validated_text(ctx) if ctx.validated_json is not None else ctx.canonical_arguments
        shown = None if text is None else key.digest(text, "audit.arguments")
    return shown, None if result.is_error else key.digest(result.content, "audit.result")


async def _complete_and_append(
    audit: Any, idempotency: Any, ctx: CallContext, completion: str, entry: AuditEntry
) -> None:
    key, tenant, now = ctx.idempotency_key, ctx.principal.tenant, time.time()

    async def complete(tx: Any) -> None:
        await idempotency.complete_in(tx, key, completion, tenant=tenant, now=now)

    try:
        await audit.append_after(entry, complete)  # shielded from cancellation where it can wait
    except Exception:
        # The audit line could not be written: still keep the result, so a retry replays it.
        with contextlib.suppress(Exception):
            await idempotency.complete(key, completion, tenant=tenant, now=now)
        raise


async def record_interrupted(ctx: CallContext, error: ToolError | None) -> None:
    """Shape, settle and record a call whose caller was cancelled after its write started.

    The same steps as the end of `Gate.call` (shape the output or the error, the plan's settle
    steps - the idempotency key completed, released or marked uncertain -, taint, every recorder),
    which the cancelled caller would never reach. Nobody reads the result: what matters is that the
    key replays it and the audit log has it, once. Call it inside a shield."""
    tool = ctx.tool
    assert tool is not None
    gate = ctx.gate
    settlers = gate.plan(tool).settlers if gate._planned is not None else gate._settlers
    result = await gate._finish(ctx, error, settlers, contained=True)
    for recorder in gate.recorders:
        try:
            await recorder(ctx, result)
        except Exception:
            logger.exception("recording call %s after its caller was cancelled failed", ctx.call.id)


def completing_recorder(gate: Gate, idempotency: object) -> AuditRecorder | None:
    """The gate's audit recorder that will complete keys of `idempotency` in its append, if any."""
    for recorder in gate.recorders:
        if isinstance(recorder, AuditRecorder) and recorder.completes(idempotency):
            return recorder
    return None


def _reveal_detail(ctx: CallContext, result: ToolResult) -> str:
    """A tool-search reveal is audited with its query and what it showed, with scores (seed 000)."""
    shown = [[t.get("name"), t.get("score")] for t in (result.structured or {}).get("tools", [])]
    query = (ctx.arguments or {}).get("query", "")
    return canonical_json({"reveal": {"query": str(query)[:500], "shown": shown}})[:4000]
