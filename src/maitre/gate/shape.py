"""Stage 10, shape: turn whatever the tool returned into a concise, bounded, labelled result.

- Output is validated against the tool's output model when it declares one (a mismatch is the
  tool's bug: INTERNAL).
- Data becomes compact JSON (pydantic models without None noise); text stays text.
- A per-tool token cap (seed 002's oversized log): what does not fit is cut at a token boundary and
  kept behind a handle; the model sees the first page and how to read the rest with
  `read_result(handle, page)`. Untrusted output is labelled, never promoted to instructions.
- A per-tool byte cap (`max_result_bytes`, 4 MiB by default) comes first: a longer text is cut on
  a character boundary before validation or token work, other values right after they are
  serialised (a linear step), and the result says how many bytes were dropped. So a tool that
  returns 50 MB costs what 4 MiB costs, and the handle keeps at most that much. Tokenising is one
  encode, sliced into pages (linear), in a worker thread for long results.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import anyio
import pydantic_core
from pydantic import BaseModel, ValidationError

from ..jsonutil import compact_json
from ..tokens import split_by_tokens, token_ids
from ..types import ErrorCode, Provenance, ToolError, ToolResult, Trust
from . import personal
from .base import CallContext

__all__ = ["cap_bytes", "shape_error", "shape_output", "split_pages", "utf8_len"]

_now = time.time
_clock = time.perf_counter


def _provenance(ctx: CallContext, source: str | None = None) -> Provenance:
    tool = ctx.tool
    return Provenance(
        tool=tool.name if tool else str(ctx.call.name)[:200],
        call_id=ctx.call.id,
        source=source or (tool.source if tool else "gate"),
        run_id=ctx.run.run_id,
        at=_now(),
    )


def shape_error(ctx: CallContext, error: ToolError) -> ToolResult:
    # Whose text is it? A ToolError the tool raised (whatever code it picked, and the gate's errors
    # that quote it) carries the tool's trust; the gate's own errors are trusted teaching text.
    from_tool = ctx.tool_raised
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
    if ctx.replayed and ctx.replay is not None:
        stored = ctx.replay
        note = stored.get("note")  # a runless duplicate: say so, so the model does not think it ran
        return ToolResult(
            call_id=ctx.call.id,
            name=str(ctx.call.name),
            is_error=False,
            content=f"{stored['content']}\n{note}" if note else stored["content"],
            structured=stored.get("structured"),
            trust=tool.trust,
            provenance=_provenance(ctx),
            replayed=True,
            handle=stored.get("handle"),
            usage={"duration_ms": _elapsed_ms(ctx), "attempts": 0},
        )
    value = ctx.output
    limit = tool.max_result_bytes
    dropped = 0  # bytes past the byte cap: dropped before any parsing, serialising or token work
    if isinstance(value, str):
        value, dropped = cap_bytes(value, limit)
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
    content, more = cap_bytes(content, limit)  # data is capped as its JSON text (linear to make)
    dropped += more
    usage: dict[str, Any] = {"duration_ms": _elapsed_ms(ctx), "attempts": ctx.attempts}
    handle = None
    cap = tool.max_result_tokens
    note = ""
    if dropped:
        structured = None
        usage["bytes_dropped"] = dropped
        note = (
            f"this result is {utf8_len(content) + dropped:,} bytes, more than the {limit:,} this tool "
            f"keeps; the last {dropped:,} bytes were dropped"
        )
    if dropped or utf8_len(content) > cap:  # a token is at least one byte: cheap exact pre-check
        page_tokens = ctx.gate.limits.page_tokens or cap
        if len(content) > _OFFLOAD_CHARS:  # keep the event loop serving other calls meanwhile
            tokens, pages = await anyio.to_thread.run_sync(_paginate, content, cap, page_tokens)
        else:
            tokens, pages = _paginate(content, cap, page_tokens)
        usage["tokens"] = tokens
        if pages is not None:
            handle = ("res_p_" if tool.personal else "res_") + secrets.token_urlsafe(12)
            await ctx.gate.handles.put(
                handle,
                tenant=ctx.principal.tenant,
                user=ctx.principal.user,
                pages=await personal.seal_pages(ctx, pages) if tool.personal else pages,
                meta={"tool": tool.name, "tokens": tokens, "call_id": ctx.call.id, "bytes_dropped": dropped},
                now=time.time(),
                ttl_s=ctx.gate.limits.handle_ttl_s,
            )
            usage["tokens_dropped"] = tokens - min(tokens, page_tokens)
            kept = f"{note}. Of the {tokens:,} tokens kept" if note else f"this result is {tokens:,} tokens"
            content = (
                f"{pages[0]}\n[cut: {kept}; showing page 1 of {len(pages)}. "
                f'Read more with read_result(handle="{handle}", page=2), or narrow your request.]'
            )
            structured = None
        elif note:
            content = f"{content}\n[cut: {note}. Narrow your request to see the rest.]"
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


_OFFLOAD_CHARS = 256 * 1024
"""Results longer than this are tokenised in a worker thread (tiktoken releases the GIL)."""


def _paginate(content: str, cap: int, page_tokens: int) -> tuple[int, list[str] | None]:
    """(token count, pages when over `cap`): the content is encoded once, and the pages reuse it."""
    ids = token_ids(content)
    return len(ids), split_by_tokens(content, page_tokens, ids) if len(ids) > cap else None


def split_pages(text: str, page_tokens: int) -> list[str]:
    """Pages of about `page_tokens` tokens that concatenate back to `text` exactly, in one pass."""
    return split_by_tokens(text, page_tokens)


def cap_bytes(text: str, limit: int) -> tuple[str, int]:
    """(`text` cut to at most `limit` UTF-8 bytes on a character boundary, bytes dropped)."""
    if len(text) <= limit // 4:  # fits even at four bytes a character
        return text, 0
    if text.isascii():
        return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, 0
    cut = limit
    while cut and data[cut] & 0xC0 == 0x80:  # inside a character: back up to its start
        cut -= 1
    return data[:cut].decode("utf-8", "surrogatepass"), len(data) - cut


def utf8_len(text: str) -> int:
    """Bytes of `text` as UTF-8 (lone surrogates count as the three bytes they would take)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _elapsed_ms(ctx: CallContext) -> float:
    """Milliseconds since the call entered the gate, to the microsecond (a third of `round`'s cost)."""
    return int((_clock() - ctx.started) * 1_000_000 + 0.5) / 1000
