"""Stage 1, resolve: the tool exists and this run may call it; else UNKNOWN_TOOL with the closest names."""

from __future__ import annotations

from ..types import ErrorCode, ToolError
from .base import CallContext
from .teaching import closest

__all__ = ["resolve", "resolve_now"]

_LISTED = 20


async def resolve(ctx: CallContext) -> ToolError | None:
    """The resolve stage (see the module docstring)."""
    return resolve_now(ctx)


def resolve_now(ctx: CallContext) -> ToolError | None:
    """The resolve stage as a plain function (it never waits)."""
    name: object = ctx.call.name  # typed str, but a door may pass anything a model wrote
    tool = ctx.gate.find_tool(name) if isinstance(name, str) else None
    visible = ctx.run.visible_tools
    if tool is not None and (visible is None or tool.name in visible or tool.name in ctx.gate.builtin_names):
        ctx.tool = tool
        return None
    available = ctx.gate.visible_names(ctx.run)
    shown_name = name if isinstance(name, str) else repr(name)
    if len(shown_name) > 80:
        shown_name = shown_name[:79] + "…"
    guesses = closest(shown_name, available)
    text = f"Unknown tool '{shown_name}'."
    if tool is not None and visible is not None:
        text = f"The tool '{tool.name}' is not available in this run yet."
        if "search_tools" in " ".join(available):
            text += " Use search_tools to find and reveal the tool you need first."
    if guesses:
        text += " Did you mean " + " or ".join(f"'{g}'" for g in guesses) + "?"
    listed = sorted(available)[:_LISTED]
    more = f" (and {len(available) - _LISTED} more)" if len(available) > _LISTED else ""
    text += f" Available tools: {', '.join(listed)}{more}."
    return ToolError(ErrorCode.UNKNOWN_TOOL, text, suggestions=guesses, details={"requested": shown_name})
