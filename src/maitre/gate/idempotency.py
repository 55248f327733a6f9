"""Stage 8, idempotency: a write runs once, whatever the model, the network or a crash does.

For write and destructive tools the runtime mints the key - sha256 over tenant, tool and either the
fields the tool declares as its business key (seed 003's refund: order id and amount) or the run id
plus the call's canonical arguments. A key the model writes is never trusted (tools receive the
minted key through an `IdempotencyKey` parameter).

The intent is recorded before the side effect (`begin`). Then:

| store says        | the gate answers                                                         |
|-------------------|--------------------------------------------------------------------------|
| new (we own it)   | execute; store the result (`complete`)                                   |
| completed         | replay the stored result, `replayed=True`, nothing executes              |
| in flight         | CONFLICT, retry later: another process is executing it right now         |
| uncertain         | INVALID_STATE: an earlier attempt crashed or timed out; a human checks   |

After executing: success completes the key; a `ToolError` the tool raised itself (a clean, declared
failure) releases it so a corrected call can run; a timeout or an unexpected exception marks it
uncertain, because the side effect may have happened. Never a second execution.
"""

from __future__ import annotations

import json
import time

from ..jsonutil import canonical_json, compact_json, sha256_hex
from ..tools import Tool
from ..types import Effect, ErrorCode, ToolError, ToolResult
from .authorize import validated_arguments
from .base import CallContext

__all__ = ["idempotency", "mint_key", "needs_key"]

_LEASE_S = 300.0


def mint_key(ctx: CallContext) -> str:
    tool = ctx.tool
    assert tool is not None
    arguments = validated_arguments(ctx)
    if tool.business_key:
        basis = {"business_key": {field: arguments.get(field) for field in tool.business_key}}
    else:
        basis = {"run": ctx.run.run_id, "arguments": arguments}
    return (
        "idk_" + sha256_hex(canonical_json({"tenant": ctx.principal.tenant, "tool": tool.name, **basis}))[:40]
    )


def needs_key(tool: Tool | None) -> bool:
    """Write and destructive tools that are not naturally idempotent get a runtime-minted key."""
    return tool is not None and tool.effect is not Effect.READ and not tool.idempotent


async def idempotency(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    if not needs_key(tool):
        return None
    key = mint_key(ctx)
    ctx.idempotency_key = key
    store = ctx.gate.stores.idempotency
    fingerprint = sha256_hex(canonical_json(validated_arguments(ctx)))[:32]
    existing = await store.begin(
        key,
        tenant=ctx.principal.tenant,
        tool=tool.name,
        fingerprint=fingerprint,
        now=time.time(),
        lease_s=_LEASE_S,
    )
    if existing is None:
        ctx.extra["owns_key"] = True
        return None
    if existing.state == "completed" and existing.result is not None:
        ctx.replayed = True
        ctx.decision = "replayed"
        ctx.extra["replay"] = json.loads(existing.result)
        return None
    if existing.state == "in_flight":
        ctx.decision = "conflict"
        wait = max(1.0, existing.lease_until - time.time())
        return ToolError(
            ErrorCode.CONFLICT,
            f"The same {tool.name} operation is being executed right now by another request. Do not send it "
            "again; check its result in a moment.",
            retry_after_s=round(min(wait, 30.0), 1),
            details={"idempotency": "in_flight"},
        )
    ctx.decision = "uncertain"
    return ToolError(
        ErrorCode.INVALID_STATE,
        f"An earlier attempt of this {tool.name} operation did not finish cleanly, so it may or may not have "
        "taken effect. It will not be executed again automatically; tell the user it needs to be checked.",
        details={"idempotency": existing.state},
    )


async def settle(ctx: CallContext, result: ToolResult) -> None:
    """Complete, release or mark uncertain the key this call owns."""
    if not ctx.extra.get("owns_key") or ctx.idempotency_key is None:
        return
    store = ctx.gate.stores.idempotency
    key, tenant = ctx.idempotency_key, ctx.principal.tenant
    if not result.is_error:
        stored = {"content": result.content, "structured": result.structured, "handle": result.handle}
        await store.complete(key, compact_json(stored), tenant=tenant, now=time.time())
        return
    code = result.error.code if result.error else ErrorCode.INTERNAL
    if ctx.executed and code not in (ErrorCode.TIMEOUT, ErrorCode.INTERNAL):
        await store.release(key, tenant=tenant)  # the tool said no cleanly: nothing happened
    elif not ctx.executed:
        await store.release(key, tenant=tenant)
    else:
        await store.mark_uncertain(key, tenant=tenant, now=time.time())


idempotency.settle = settle  # type: ignore[attr-defined]
