"""Stage 6, budget: per-run, per-tool and per-class counters, and rate limits per principal and tool.

Budgets are counted in the run (so they survive a pause) and charged only when a call really
executes; a replayed result costs nothing. Rate limits are token buckets in the shared store (or
Redis), keyed by tenant, user and tool, so several processes share one limit.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..jsonutil import canonical_json
from ..tools import Tool
from ..types import ErrorCode, ToolError, ToolResult
from .base import CallContext, Decision

__all__ = [
    "Budgets",
    "RateLimit",
    "bucket_for",
    "budget",
    "budget_counts",
    "can_limit",
    "charge",
    "charge_now",
]


@dataclass(kw_only=True, frozen=True)
class RateLimit:
    """A token bucket: `burst` calls at once, refilled at `per_second`."""

    per_second: float
    burst: int


@dataclass(kw_only=True)
class Budgets:
    """Limits on what a run may execute, and how fast a principal may call."""

    max_calls_per_run: int | None = 200
    """Executed calls in one run (every default is finite)."""
    per_tool: Mapping[str, int] = field(default_factory=dict)
    """Executed calls per tool per run, by canonical name."""
    per_class: Mapping[str, int] = field(default_factory=dict)
    """Executed calls per effect class per run, e.g. {"write": 3}."""
    rate_limit: RateLimit | None = None
    """Default bucket per (tenant, user, tool)."""
    rate_limits: Mapping[str, RateLimit] = field(default_factory=dict)
    """Buckets for specific tools, by canonical name."""


def bucket_for(budgets: Budgets, tool: Tool) -> RateLimit | None:
    """The rate limit that applies to `tool`, if any."""
    return budgets.rate_limits.get(tool.name, budgets.rate_limit)


def can_limit(budgets: Budgets, tool: Tool) -> bool:
    """Whether any budget or rate limit can ever refuse a call of `tool` (else the stage is not in
    the tool's plan, and its calls are not counted)."""
    return (
        budgets.max_calls_per_run is not None
        or tool.name in budgets.per_tool
        or tool.effect.value in budgets.per_class
        or bucket_for(budgets, tool) is not None
    )


def budget_counts(ctx: CallContext) -> ToolError | None:
    """The per-run, per-tool and per-class counters: the whole budget stage for a tool without a
    rate limit, as a plain function (it never waits)."""
    tool = ctx.tool
    assert tool is not None
    budgets: Budgets = ctx.gate.budgets
    run = ctx.run
    if budgets.max_calls_per_run is not None and sum(run.tool_calls.values()) >= budgets.max_calls_per_run:
        return _exceeded(ctx, "run", budgets.max_calls_per_run, "calls in this run")
    limit = budgets.per_tool.get(tool.name)
    if limit is not None and run.tool_calls[tool.name] >= limit:
        return _exceeded(ctx, "tool", limit, f"calls of {tool.name} in this run")
    limit = budgets.per_class.get(tool.effect.value)
    if limit is not None and run.class_calls[tool.effect.value] >= limit:
        return _exceeded(ctx, "class", limit, f"{tool.effect.value} calls in this run")
    return None


async def budget(ctx: CallContext) -> ToolError | None:
    """The budget stage: the counters, then the tool's rate limit (in the shared store)."""
    refused = budget_counts(ctx)
    if refused is not None:
        return refused
    tool = ctx.tool
    assert tool is not None
    budgets: Budgets = ctx.gate.budgets
    bucket = bucket_for(budgets, tool)
    if bucket is not None:
        key = canonical_json(["rate", ctx.principal.tenant, ctx.principal.user, tool.name])
        wait = await ctx.gate.stores.rate_limits.acquire(
            key, rate_per_s=bucket.per_second, burst=bucket.burst, now=time.time()
        )
        if wait > 0:
            ctx.decision = Decision.RATE_LIMITED
            return ToolError(
                ErrorCode.RATE_LIMITED,
                f"Too many calls to {tool.name}; try again in {wait:.1f} s, or do something else first.",
                retry_after_s=round(wait, 3),
                details={"retry_after_s": round(wait, 3)},
            )
    return None


async def charge(ctx: CallContext, result: ToolResult) -> None:
    """Count an executed call against the run's budgets (replays and refusals are free)."""
    charge_now(ctx, result)


def charge_now(ctx: CallContext, result: ToolResult) -> None:
    """`charge` as a plain function (a tool's plan calls it without a coroutine)."""
    if ctx.executed and ctx.tool is not None:
        ctx.run.tool_calls[ctx.tool.name] += 1
        ctx.run.class_calls[ctx.tool.effect.value] += 1


budget.settle = charge  # type: ignore[attr-defined]


def _exceeded(ctx: CallContext, scope: str, limit: int, what: str) -> ToolError:
    ctx.decision = Decision.BUDGET_EXCEEDED
    return ToolError(
        ErrorCode.BUDGET_EXCEEDED,
        f"Budget exhausted: at most {limit} {what}. Do not call it again in this run; finish with what you "
        "have or tell the user.",
        details={"budget": scope, "limit": limit},
    )
