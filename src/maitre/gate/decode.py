"""Stage 2, decode: arguments arrive as a dict or as JSON text that may be broken or huge.

The size cap is checked before parsing, so a 10 MB payload costs one length check. JSON numbers
are parsed as Decimal when they come as text, so money keeps its exact digits.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from ..jsonutil import canonical_json, sha256_hex
from ..types import ErrorCode, ToolError
from .base import CallContext
from .teaching import example_call

__all__ = ["decode"]


async def decode(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    raw = ctx.call.arguments
    limit = ctx.gate.limits.max_argument_bytes
    if raw is None or raw == "":
        raw = {}
    if isinstance(raw, str | bytes | bytearray):
        size = len(raw)
        if size > limit:
            return _too_large(ctx, size, limit)
        try:
            parsed: Any = json.loads(raw, parse_float=Decimal)
        except (ValueError, RecursionError) as exc:
            example = example_call(tool)
            where = f", character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nesting is too deep"
            text = (
                f"The arguments for {tool.name} are not valid JSON ({reason}{where}). Send one JSON object"
                " with the argument names as keys."
            )
            if example:
                text += f" For example: {example}."
            return ToolError(ErrorCode.INVALID_ARGUMENTS, text, details={"json_error": reason})
        raw = parsed
    if not isinstance(raw, dict):
        example = example_call(tool)
        text = (
            f"The arguments for {tool.name} must be a JSON object with named arguments; received a "
            f"{type(raw).__name__}."
        )
        if example:
            text += f" For example: {example}."
        return ToolError(ErrorCode.INVALID_ARGUMENTS, text)
    try:
        canonical = canonical_json(raw)
    except (TypeError, ValueError, RecursionError):
        return ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"The arguments for {tool.name} contain values that are not JSON (or nest too deeply).",
        )
    if len(canonical) > limit:
        return _too_large(ctx, len(canonical), limit)
    ctx.arguments = raw
    ctx.canonical_arguments = canonical
    ctx.fingerprint = sha256_hex(f"{tool.name}\x00{canonical}")[:32]
    return None


def _too_large(ctx: CallContext, size: int, limit: int) -> ToolError:
    name = ctx.tool.name if ctx.tool else ctx.call.name
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        f"The arguments for {name} are {size:,} bytes; the limit is {limit:,}. Send only the fields the "
        "tool needs, with short values; large content belongs in a file or a handle, not in arguments.",
        details={"size": size, "limit": limit},
    )
