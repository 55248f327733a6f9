"""Stage 8, idempotency: a write runs once, whatever the model, the network or a crash does.

For write and destructive tools the runtime mints the key: sha256 over tenant, user, tool and a
basis, the first that applies of

1. the host's own key (`CallOptions.idempotency_key`: one per user click, say; never the model's),
2. the fields the tool declares as its business key (seed 003's refund: order id and amount),
3. the run id plus the call's canonical arguments, for a call that belongs to a run,
4. the canonical arguments alone, for a call made without any run id: an identical call by the
   same principal within `GateLimits.dedupe_window_s` replays (with a note saying so); after the
   window it may run again.

The user is part of every key, so another user of the same tenant who sends the same run id or
host key reaches a key of their own, never the first user's result. A key the model writes is
never trusted (tools receive the minted key through an `IdempotencyKey` parameter).

Keys are hash format version 2 (`idk2_...`, over the RFC 8785 text of the validated arguments,
see `hashing`), minted once per call. A key minted before the version change (`idk_...`) is
still honoured: when the new key is not found and the store may hold old records, the old key is
looked up, and a call that has one continues under it (replay, wait or reconcile).

A personal tool's key is `idkp_` + an HMAC of that key under the stores' master-derived index key,
its fingerprint keyed the same way, and its stored result sealed under the user's subject key
(`maitre.gate.personal`): after a forget the record still replays - nothing runs twice - but as a
result that says the value was forgotten.

The intent is recorded before the side effect (`begin`), with its owner (this process, see
`owners`) and a lease as long as the call can possibly run. Then:

| store says                        | the gate answers                                             |
|-----------------------------------|--------------------------------------------------------------|
| new (we own it)                   | execute; store the result (`complete`)                       |
| completed                         | replay the stored result, `replayed=True`, nothing executes  |
| in flight, owner alive or unknown | CONFLICT, retry later: another process is executing it now   |
| in flight, owner dead             | as uncertain (the process that held it is gone)              |
| uncertain                         | the tool's `reconcile(key)` decides; without one INVALID_STATE: a human checks |

`reconcile(key)` returns the result when the side effect did happen (the key completes with it and
the call replays it) or None when it did not (this call executes, once); one caller at a time
reconciles a key. After executing: success completes the key; a `ToolError` the tool raised
itself (a clean, declared failure) releases it so a corrected call can run; a timeout or an
unexpected exception marks it uncertain, because the side effect may have happened.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from typing import Any, Literal

import anyio

from ..audit.canonical import hash_text
from ..context import IdempotencyKey, NeedsInput
from ..jsonutil import compact_json
from ..storage.owners import current_owner, owner_status
from ..stores.base import IdempotencyRecord
from ..tools import Tool
from ..types import Effect, ErrorCode, ToolError, ToolResult
from . import personal
from .authorize import validated_arguments
from .base import CallContext, Decision, GateLimits
from .hashing import json_string, key_of, legacy_key, may_hold_legacy, sha256_text, validated_text
from .record import completing_recorder

__all__ = [
    "Basis",
    "LEASE_GRACE_S",
    "call_lease_s",
    "idempotency",
    "mint_key",
    "needs_key",
    "settle",
    "will_replay",
]

logger = logging.getLogger("maitre.gate")

Basis = Literal["host", "business_key", "run", "arguments"]

LEASE_GRACE_S = 10.0
"""Added to a call's longest possible duration: time to shape and store the result."""


def _basis(ctx: CallContext) -> tuple[Basis, dict[str, Any]]:
    """Version 1's basis, as data (only for finding a key minted before the version change)."""
    host_key = ctx.options.idempotency_key
    if host_key:
        return "host", {"host_key": host_key}
    tool = ctx.tool
    assert tool is not None
    arguments = validated_arguments(ctx)
    if tool.business_key:
        return "business_key", {"business_key": {field: arguments.get(field) for field in tool.business_key}}
    if not ctx.run.ephemeral:
        return "run", {"run": ctx.run.run_id, "arguments": arguments}
    return "arguments", {"arguments": arguments}


def _mint(ctx: CallContext) -> tuple[str, Basis]:
    """(key, basis), minted once per call and kept on the context (the approval stage's
    `will_replay` and the idempotency stage share it)."""
    key = ctx.idempotency_key
    if key is not None and ctx.idempotency_basis is not None:
        return key, ctx.idempotency_basis  # type: ignore[return-value]
    tool = ctx.tool
    assert tool is not None
    kind: Basis
    host_key = ctx.options.idempotency_key
    if host_key:
        kind, key = "host", key_of(tool.name, ctx.principal, "host_key", json_string(host_key))
    elif tool.business_key:
        arguments = validated_arguments(ctx)
        chosen = hash_text({field: arguments.get(field) for field in tool.business_key})
        kind, key = "business_key", key_of(tool.name, ctx.principal, "business_key", chosen)
    elif not ctx.run.ephemeral:
        kind = "run"
        key = key_of(tool.name, ctx.principal, "arguments", validated_text(ctx), run_id=ctx.run.run_id)
    else:
        kind, key = "arguments", key_of(tool.name, ctx.principal, "arguments", validated_text(ctx))
    if tool.personal:  # the plain key is a hash of guessable values: only a keyed one is stored
        key = personal.keyed_idempotency_key(ctx, key)
    ctx.idempotency_key, ctx.idempotency_basis = key, kind
    return key, kind


def mint_key(ctx: CallContext) -> str:
    """The idempotency key of this call (see the module docstring for what it is made of)."""
    return _mint(ctx)[0]


def _legacy(ctx: CallContext) -> str | None:
    """The version-1 key of this call, when its store may still hold one (see `hashing`)."""
    assert ctx.tool is not None
    if ctx.gate._own_stores or ctx.tool.personal or not may_hold_legacy(ctx.gate.stores.idempotency):
        return None
    return legacy_key(ctx.tool.name, ctx.principal, _basis(ctx)[1])


def needs_key(tool: Tool | None) -> bool:
    """Write and destructive tools that are not naturally idempotent get a runtime-minted key."""
    return tool is not None and tool.effect is not Effect.READ and not tool.idempotent


def call_lease_s(tool: Tool, limits: GateLimits) -> float:
    """How long a call can hold its key: every attempt to its deadline, every backoff at its cap,
    and a grace. The execute stage stops a tool at its deadline, so an owner still in flight after
    this is gone (or wedged), never legitimately busy."""
    return tool.timeout * (1 + tool.retries) + limits.retry_backoff_cap_s * tool.retries + LEASE_GRACE_S


def _window(ctx: CallContext, kind: Basis) -> float | None:
    return ctx.gate.limits.dedupe_window_s if kind == "arguments" else None


async def will_replay(ctx: CallContext) -> bool:
    """True when the idempotency stage is going to replay a stored result for this call (so the
    approval stage need not ask a human about a call that will not run again)."""
    if not needs_key(ctx.tool):
        return False
    assert ctx.tool is not None
    if ctx.tool.personal and await personal.prepare(ctx) is not None:
        return False  # no keys to be had: the approval stage refuses it below
    key, kind = _mint(ctx)
    store, tenant = ctx.gate.stores.idempotency, ctx.principal.tenant
    record = await store.get(key, tenant=tenant)
    if record is None:
        legacy = _legacy(ctx)
        if legacy is not None:
            record = await store.get(legacy, tenant=tenant)
    if record is None or record.state != "completed":
        return False
    window = _window(ctx, kind)
    return window is None or record.updated_at >= time.time() - window


async def idempotency(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    if not needs_key(tool):
        return None
    if tool.personal:  # its keys first: without a master secret nothing is minted, stored or run
        refused = await personal.prepare(ctx)
        if refused is not None:
            return refused
    key, kind = _mint(ctx)
    store = ctx.gate.stores.idempotency
    tenant = ctx.principal.tenant
    lease = call_lease_s(tool, ctx.gate.limits)
    me = current_owner()
    window = _window(ctx, kind)
    if ctx.decision is Decision.APPROVAL_REQUIRED:
        window = None  # the approval stage let this call through only to replay: never to run
    fingerprint = (
        personal.keyed_fingerprint(ctx, validated_text(ctx))
        if tool.personal
        else sha256_text(validated_text(ctx))[:32]
    )
    legacy_checked = False
    for _ in range(5):  # a record that changes between our reads (released, taken over): look again
        now = time.time()
        existing = await store.begin(
            key,
            tenant=tenant,
            tool=tool.name,
            fingerprint=fingerprint,
            now=now,
            lease_s=lease,
            owner=me,
            reuse_completed_after_s=window,
        )
        if existing is None:
            if not legacy_checked:
                legacy_checked = True
                legacy = _legacy(ctx)
                if legacy is not None and await store.get(legacy, tenant=tenant) is not None:
                    # Minted before the hash format changed: the call continues under its old key,
                    # so it replays, waits or is reconciled exactly as that key says - never twice.
                    await store.release(key, tenant=tenant)
                    key = ctx.idempotency_key = legacy
                    continue
            return await _owned(ctx)
        if kind == "host" and existing.fingerprint != fingerprint:
            return _key_reused(ctx)
        if existing.state == "completed" and existing.result is not None:
            opened = await personal.open_stored(ctx, existing.result) if tool.personal else None
            _replay(ctx, existing, kind, now, opened)
            return None
        gone = existing.state == "in_flight" and owner_status(existing.owner) == "dead"
        if existing.state == "in_flight" and not gone:
            return _conflict(ctx, existing, now)
        if tool.reconcile is None or ctx.decision is Decision.APPROVAL_REQUIRED:
            if gone:
                await store.mark_uncertain(key, tenant=tenant, now=now, owner=existing.owner)
            return _uncertain(ctx, gone=gone)
        if await store.take_over(
            key, tenant=tenant, seen=existing, owner=me, now=now, lease_s=lease + tool.timeout
        ):
            return await _reconcile(ctx, key, me)
    ctx.decision = Decision.CONFLICT
    return ToolError(
        ErrorCode.CONFLICT,
        f"The same {tool.name} operation is changing state in another request right now. Try again in a "
        "moment.",
        retry_after_s=1.0,
        details={"idempotency": "contended"},
    )


def _key_reused(ctx: CallContext) -> ToolError:
    """The host's key already names another operation (other arguments): refuse, run nothing.

    Replaying would tell the caller its new call was handled when only the first one was (a
    second `send_email` to bob answered "sent to ann"); Stripe and the IETF Idempotency-Key draft
    answer this with an error too. Only host keys can meet this: a key the runtime mints from the
    arguments differs when they do, and a business key names the operation by design.
    """
    assert ctx.tool is not None
    ctx.decision = Decision.CONFLICT
    return ToolError(
        ErrorCode.CONFLICT,
        f"This idempotency key was already used for a {ctx.tool.name} call with other arguments; "
        "nothing ran. A new operation needs a new key.",
        details={"idempotency": "key_reused"},
    )


async def _owned(ctx: CallContext) -> ToolError | None:
    if ctx.decision is Decision.APPROVAL_REQUIRED:
        # The approval stage saw a completed key and skipped asking; it is gone now. Never run
        # without an approval: give the key back, so the retry asks for one.
        assert ctx.idempotency_key is not None
        await ctx.gate.stores.idempotency.release(ctx.idempotency_key, tenant=ctx.principal.tenant)
        ctx.decision = Decision.CONFLICT
        return ToolError(
            ErrorCode.CONFLICT,
            "The earlier result of this call is no longer stored. Call the tool again to ask for approval.",
            retry_after_s=0.1,
            details={"idempotency": "expired"},
        )
    ctx.owns_key = True
    return None


def _replay(
    ctx: CallContext, record: IdempotencyRecord, kind: Basis, now: float, opened: dict[str, Any] | None = None
) -> None:
    assert record.result is not None
    stored = opened if opened is not None else json.loads(record.result)
    if kind == "arguments":
        ago = max(0, round(now - record.updated_at))
        stored["note"] = (
            f"[replayed: an identical call by you {ago} s ago already did this; nothing ran again. If it "
            "is meant to happen again, the host application must send it with its own idempotency key.]"
        )
    ctx.replay = stored
    ctx.replayed = True
    ctx.decision = Decision.REPLAYED


def _conflict(ctx: CallContext, record: IdempotencyRecord, now: float) -> ToolError:
    assert ctx.tool is not None
    ctx.decision = Decision.CONFLICT
    wait = max(1.0, record.lease_until - now)
    return ToolError(
        ErrorCode.CONFLICT,
        f"The same {ctx.tool.name} operation is being executed right now by another request. Do not send "
        "it again; check its result in a moment.",
        retry_after_s=round(min(wait, 30.0), 1),
        details={"idempotency": "in_flight"},
    )


def _uncertain(ctx: CallContext, *, gone: bool, why: str | None = None) -> ToolError:
    assert ctx.tool is not None
    ctx.decision = Decision.UNCERTAIN
    cause = why or (
        "the process running it stopped before it finished" if gone else "it crashed or timed out"
    )
    return ToolError(
        ErrorCode.INVALID_STATE,
        f"An earlier attempt of this {ctx.tool.name} operation did not finish cleanly ({cause}), so it may "
        "or may not have taken effect. It will not be executed again automatically: a person (or the "
        "tool's reconcile hook) must check whether it happened. Tell the user it needs to be checked.",
        details={"idempotency": "uncertain", "cause": "owner_gone" if gone else "uncertain"},
    )


async def _reconcile(ctx: CallContext, key: str, me: str) -> ToolError | None:
    """We hold the in-doubt key: ask the tool whether its effect happened, then replay or run."""
    tool = ctx.tool
    assert tool is not None and tool.reconcile is not None
    store, tenant = ctx.gate.stores.idempotency, ctx.principal.tenant
    try:
        with anyio.fail_after(tool.timeout):
            found = await _call_hook(tool.reconcile, IdempotencyKey(key))
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await store.mark_uncertain(key, tenant=tenant, owner=me)
        raise
    except BaseException as exc:  # a hostile or broken hook must not decide, nor kill the process
        logger.warning("reconcile of %s raised %s (call %s)", tool.name, type(exc).__name__, ctx.call.id)
        await store.mark_uncertain(key, tenant=tenant, owner=me)
        return _uncertain(ctx, gone=False, why=f"and its reconcile check failed with {type(exc).__name__}")
    if found is None:
        ctx.owns_key = True  # the effect did not happen: this call executes it, once
        ctx.detail = "reconciled: not done"
        return None
    from .shape import shape_output

    ctx.output = found
    shaped = await shape_output(ctx)
    if isinstance(shaped, ToolError):
        await store.mark_uncertain(key, tenant=tenant, owner=me)
        return _uncertain(ctx, gone=False, why="and its reconcile check returned a result that is not valid")
    stored = {"content": shaped.content, "structured": shaped.structured, "handle": shaped.handle}
    text = await personal.seal_stored(ctx, stored) if tool.personal else compact_json(stored)
    await store.complete(key, text, tenant=tenant, now=time.time())
    ctx.output = None
    ctx.replay = stored
    ctx.replayed = True
    ctx.decision = Decision.REPLAYED
    ctx.detail = "reconciled: done"
    return None


async def _call_hook(hook: Any, key: IdempotencyKey) -> Any:
    if inspect.iscoroutinefunction(hook):
        return await hook(key)
    value = await anyio.to_thread.run_sync(hook, key, abandon_on_cancel=True)
    return await value if inspect.isawaitable(value) else value


async def settle(ctx: CallContext, result: ToolResult) -> None:
    """Complete, release or mark uncertain the key this call owns."""
    if not ctx.owns_key or ctx.idempotency_key is None:
        return
    store = ctx.gate.stores.idempotency
    key, tenant = ctx.idempotency_key, ctx.principal.tenant
    if isinstance(ctx.output, NeedsInput):
        await store.release(key, tenant=tenant)  # a question back to the caller: nothing happened yet
        return
    if not result.is_error:
        stored = {"content": result.content, "structured": result.structured, "handle": result.handle}
        tool = ctx.tool
        text = await personal.seal_stored(ctx, stored) if tool is not None and tool.personal else None
        if text is None:
            text = compact_json(stored)
        if completing_recorder(ctx.gate, store) is not None:
            ctx.completion = text  # committed with the call's audit entry
            return
        await store.complete(key, text, tenant=tenant, now=time.time())
        return
    code = result.error.code if result.error else ErrorCode.INTERNAL
    if not ctx.executed or code not in (ErrorCode.TIMEOUT, ErrorCode.INTERNAL):
        await store.release(key, tenant=tenant)  # not run, or the tool said no cleanly: nothing happened
    else:
        await store.mark_uncertain(key, tenant=tenant, now=time.time(), owner=current_owner())


idempotency.settle = settle  # type: ignore[attr-defined]
