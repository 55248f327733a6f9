"""Stage 5, authorize: ownership first, then the policy (allow / deny / needs approval).

A cross-tenant or foreign resource is PERMISSION_DENIED, fast, with one fixed message: no hint of
whether the resource exists, who owns it, or which rule fired (those go to the audit log only).
"""

from __future__ import annotations

import inspect
from typing import Any

from ..jsonutil import to_jsonable
from ..policy import Action, PolicyDecision, PolicyRequest, decide
from ..types import ErrorCode, ToolError
from .base import CallContext, Decision

__all__ = ["DENIED_MESSAGE", "authorize", "validated_arguments"]

DENIED_MESSAGE = "Permission denied for this call. Do not retry it; tell the user you cannot do this."


def validated_arguments(ctx: CallContext) -> dict[str, Any]:
    """The validated arguments as JSON-ready data (what policies, hashes and approvers see)."""
    cached = ctx.validated_json
    if cached is None:
        validated = ctx.validated
        if hasattr(validated, "model_dump"):
            cached = validated.model_dump(mode="json")
        else:
            cached = to_jsonable(validated or {})
        ctx.validated_json = cached
    return cached


def _denied(ctx: CallContext, rule: str) -> ToolError:
    ctx.decision = Decision.DENY
    ctx.detail = rule
    return ToolError(ErrorCode.PERMISSION_DENIED, DENIED_MESSAGE)


async def authorize(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    policy = ctx.gate.policy
    if tool.owner is None:
        static = ctx.gate.static_decision(tool)
        if static is not None:
            return _apply(ctx, static)
    needs_arguments = tool.owner is not None or policy.uses_arguments
    arguments = validated_arguments(ctx) if needs_arguments else {}
    if tool.owner is not None:
        try:
            owned = tool.owner(ctx.principal, arguments)
            if inspect.isawaitable(owned):
                owned = await owned
        except Exception:
            owned = False
        if owned is not True:
            return _denied(ctx, "ownership")
    decision = await decide(
        ctx.gate.policy, PolicyRequest(tool=tool, arguments=arguments, principal=ctx.principal, run=ctx.run)
    )
    return _apply(ctx, decision)


def _apply(ctx: CallContext, decision: PolicyDecision) -> ToolError | None:
    ctx.policy = decision
    if decision.action is Action.DENY:
        return _denied(ctx, f"{decision.rule}: {decision.reason}".strip(": "))
    if decision.action is Action.APPROVAL:
        ctx.decision = Decision.APPROVAL_REQUIRED
    return None
