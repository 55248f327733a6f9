"""Stage 3, loop guard: the same call proposed again and again is a stuck agent (seed 002).

fingerprint = hash(tool, canonical arguments); the N-th sighting in one run (default 3) is refused
with LOOP_DETECTED and an instruction to change approach. A repeated error streak is caught after
the call, in `note_outcome`. Counters live in the run, so they survive a pause and resume.

The caller cannot switch the guard off. A call that *claims* an approval (`CallOptions.approval_id`)
is counted like any other; when it is over the limit its refusal is held in `ctx.loop_refusal`
and the approval stage lets it go only if the approval is verified and consumed for this exact
call - an approved call coming back is the same call by design, a made-up id is not.
"""

from __future__ import annotations

from ..types import ErrorCode, ToolError
from .base import CallContext

__all__ = ["confirm_loop_guard", "confirm_now", "loop_guard", "loop_guard_now", "note_outcome"]


async def loop_guard(ctx: CallContext) -> ToolError | None:
    """The loop guard stage (see the module docstring)."""
    return loop_guard_now(ctx)


def loop_guard_now(ctx: CallContext) -> ToolError | None:
    """The loop guard as a plain function (it never waits)."""
    assert ctx.tool is not None and ctx.fingerprint is not None
    counts = ctx.run.fingerprints
    counts[ctx.fingerprint] += 1
    seen = counts[ctx.fingerprint]
    limit = ctx.gate.limits.repeat_limit
    if seen >= limit:
        refusal = ToolError(
            ErrorCode.LOOP_DETECTED,
            f"You have called {ctx.tool.name} with exactly these arguments {seen} times in this run; the "
            "result will not change. Do not call it again with the same arguments. Change approach: use "
            "what you already have, try different arguments or another tool, or tell the user what is "
            "blocking you.",
            details={"fingerprint": ctx.fingerprint, "seen": seen, "limit": limit},
        )
        if ctx.options.approval_id:
            ctx.loop_refusal = refusal  # settled by the approval stage, see the module docstring
            return None
        return refusal
    return None


async def confirm_loop_guard(ctx: CallContext) -> ToolError | None:
    """Refuse a repeated call that claimed an approval the approval stage did not verify and consume."""
    return ctx.loop_refusal


def confirm_now(ctx: CallContext) -> ToolError | None:
    """`confirm_loop_guard` as a plain function."""
    return ctx.loop_refusal


def note_outcome(ctx: CallContext, error: ToolError | None) -> ToolError | None:
    """Track the error streak; the N-th identical error in a row becomes LOOP_DETECTED."""
    run = ctx.run
    if error is None or error.code is ErrorCode.LOOP_DETECTED:
        run.error_streak = ("", 0)
        return error
    name = ctx.tool.name if ctx.tool else str(ctx.call.name)
    signature = f"{name}|{error.code}|{error.message}"
    last, count = run.error_streak
    count = count + 1 if last == signature else 1
    run.error_streak = (signature, count)
    limit = ctx.gate.limits.error_repeat_limit
    if count >= limit:
        return ToolError(
            ErrorCode.LOOP_DETECTED,
            f"The same error came back {count} times in a row: {error.message} Repeating the call will not "
            "fix it. Change approach: read the error, change the arguments or use another tool, or tell "
            "the user what is wrong.",
            details={"repeated_code": str(error.code), "count": count},
        )
    return error
