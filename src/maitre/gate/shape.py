"""Stage 10, shape: turn whatever the tool returned into a concise, bounded, labelled result.

- Output is validated against the tool's output model when it declares one (a mismatch is the
  tool's bug: INTERNAL).
- Data becomes compact JSON (pydantic models without None noise); text stays text.
- A per-tool token cap (seed 002's oversized log): what does not fit is cut at a token boundary and
  kept behind a handle; the model sees the first page and how to read the rest with
  `read_result(handle, page)`. Untrusted output is labelled, never promoted to instructions.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError

from ..jsonutil import compact_json
from ..tokens import count_tokens, truncate_to_tokens
from ..types import ErrorCode, Provenance, ToolError, ToolResult, Trust
from .base import CallContext

__all__ = ["shape_error", "shape_output", "split_pages"]


def _provenance(ctx: CallContext, source: str | None = None) -> Provenance:
    tool = ctx.tool
    return Provenance(
        tool=tool.name if tool else str(ctx.call.name)[:200],
        call_id=ctx.call.id,
        source=source or (tool.source if tool else "gate"),
        run_id=ctx.run.run_id,
        at=time.time(),
    )


def shape_error(ctx: CallContext, error: ToolError) -> ToolResult:
    from_tool = ctx.executed and error.code not in (ErrorCode.TIMEOUT, ErrorCode.INTERNAL)
    return ToolResult(
        call_id=ctx.call.id,
        name=str(ctx.call.name)[:200],
        is_error=True,
        content=error.message,
        error=error,
        trust=ctx.tool.trust if (ctx.tool and from_tool) else Trust.TRUSTED,
        provenance=_provenance(ctx, None if from_tool else "gate"),
        replayed=ctx.replayed,
        usage={"duration_ms": _elapsed_ms(ctx), "attempts": ctx.attempts},
    )


async def shape_output(ctx: CallContext) -> ToolResult | ToolError:
    """Build the successful result, or return the ToolError that shaping ran into."""
    tool = ctx.tool
    assert tool is not None
    if ctx.replayed:
        stored = ctx.extra["replay"]
        return ToolResult(
            call_id=ctx.call.id,
            name=str(ctx.call.name),
            is_error=False,
            content=stored["content"],
            structured=stored.get("structured"),
            trust=tool.trust,
            provenance=_provenance(ctx),
            replayed=True,
            handle=stored.get("handle"),
            usage={"duration_ms": _elapsed_ms(ctx), "attempts": 0},
        )
    value = ctx.output
    if tool._output_adapter is not None:
        try:
            value = tool._output_adapter.validate_python(
                value.model_dump() if isinstance(value, BaseModel) else value
            )
        except ValidationError as exc:
            return ToolError(
                ErrorCode.INTERNAL,
                f"{tool.name} returned a result that does not match its declared output schema "
                f"({exc.error_count()} problems). This is a bug in the tool, not in your call.",
                details={"stage": "output_validation"},
            )
    try:
        if isinstance(value, BaseModel):
            structured: Any = value.model_dump(mode="json", exclude_none=True)
            content = compact_json(structured)
        elif isinstance(value, str):
            structured = content = value
        else:
            structured = pydantic_core.to_jsonable_python(value)
            content = pydantic_core.to_json(structured).decode()
    except (TypeError, ValueError, RecursionError, pydantic_core.PydanticSerializationError) as exc:
        return ToolError(
            ErrorCode.INTERNAL,
            f"{tool.name} returned a value that cannot be serialised ({type(value).__name__}). This is a "
            "bug in the tool, not in your call.",
            details={"stage": "serialise", "reason": str(exc)[:200]},
        )
    usage: dict[str, Any] = {"duration_ms": _elapsed_ms(ctx), "attempts": ctx.attempts}
    handle = None
    cap = tool.max_result_tokens
    if len(content.encode()) > cap:  # a token is at least one byte: cheap exact pre-check
        tokens = count_tokens(content)
        usage["tokens"] = tokens
        if tokens > cap:
            page_tokens = ctx.gate.limits.page_tokens or cap
            pages = split_pages(content, page_tokens)
            handle = "res_" + secrets.token_urlsafe(12)
            await ctx.gate.handles.put(
                handle,
                tenant=ctx.principal.tenant,
                user=ctx.principal.user,
                pages=pages,
                meta={"tool": tool.name, "tokens": tokens, "call_id": ctx.call.id},
                now=time.time(),
                ttl_s=ctx.gate.limits.handle_ttl_s,
            )
            shown = pages[0]
            usage["tokens_dropped"] = tokens - count_tokens(shown)
            content = (
                f"{shown}\n[cut: this result is {tokens:,} tokens; showing page 1 of {len(pages)}. "
                f'Read more with read_result(handle="{handle}", page=2), or narrow your request.]'
            )
            structured = None
    return ToolResult(
        call_id=ctx.call.id,
        name=str(ctx.call.name),
        is_error=False,
        content=content,
        structured=structured,
        trust=tool.trust,
        provenance=_provenance(ctx),
        replayed=ctx.replayed,
        handle=handle,
        usage=usage,
    )


def split_pages(text: str, page_tokens: int) -> list[str]:
    pages = []
    rest = text
    while rest:
        page, rest = truncate_to_tokens(rest, page_tokens)
        pages.append(page)
    return pages or [""]


def _elapsed_ms(ctx: CallContext) -> float:
    return round((time.perf_counter() - ctx.started) * 1000, 3)
