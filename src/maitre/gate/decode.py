"""Stage 2, decode: arguments arrive as a dict or as JSON text that may be broken, huge or hostile.

The size cap is checked before parsing, so a 10 MB payload costs one length check. JSON numbers
are parsed as Decimal when they come as text, so money keeps its exact digits.

Before anything is hashed, decode refuses what no JSON value can be, each as INVALID_ARGUMENTS
naming the argument path (a hash of such text would raise deep in the pipeline instead):

- text that is not valid Unicode: a lone surrogate such as `"\\ud800"` in a key or a value (raw in
  a dict, or escaped in JSON text), or bytes that are not UTF-8;
- NaN, Infinity and numbers beyond the range of a double (`1e400` would become `inf` in a float
  field): JSON has none of them, and a tool would compute with them.

Decode also writes what the call is hashed by: `ctx.canonical_arguments`, the RFC 8785 text of the
arguments (a fraction parsed from text is the JSON number it was; a Python caller's `Decimal` is its
exact string, as validation reads it), and the loop guard's fingerprint over it (see `hashing`).

Duplicate keys (`{"amount": "1", "amount": "9000"}`, where parsers disagree on which wins) are
refused where the gate sees the raw JSON text: `ToolCall.arguments` as str or bytes, as OpenAI-
style adapters pass it. They are out of reach when the arguments arrive as a dict, because a JSON
parser already kept one value and dropped the other: the MCP SDK's parsed `params.arguments`,
Anthropic's `tool_use.input`, a Python caller's dict. Refusing them there needs the raw HTTP body,
before the SDK parses it.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from typing import Any

from ..audit.canonical import fast_canonical, hash_text
from ..jsonutil import canonical_json
from ..types import ErrorCode, ToolError
from .base import CallContext
from .hashing import sha256_text
from .teaching import example_call, json_path

__all__ = ["decode", "decode_now", "json_text"]

_MAX_FLOAT = sys.float_info.max
_MAX_DECIMAL = Decimal(_MAX_FLOAT)


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _Constant(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return obj


def _constant(name: str) -> Any:
    raise _Constant(name)


def json_text(raw: str | bytes | bytearray) -> str:
    """Arguments text as str (bytes decoded as JSON allows: UTF-8, or UTF-16/32 by their pattern).

    Raises UnicodeDecodeError for bytes that are not text in that encoding.
    """
    if isinstance(raw, str):
        return raw
    data = bytes(raw)
    return data.decode(json.detect_encoding(data))


async def decode(ctx: CallContext) -> ToolError | None:
    """The decode stage (see the module docstring)."""
    return decode_now(ctx)


def decode_now(ctx: CallContext) -> ToolError | None:
    """The decode stage as a plain function: it never waits, so a tool's plan calls it directly."""
    tool = ctx.tool
    assert tool is not None
    raw: Any = ctx.call.arguments
    limit = ctx.gate.limits.max_argument_bytes
    if raw is None or raw == "":
        raw = {}
    from_text = isinstance(raw, str | bytes | bytearray)
    if from_text:
        size = len(raw)
        if size > limit:
            return _too_large(ctx, size, limit)
        try:
            parsed: Any = json.loads(
                json_text(raw), parse_float=Decimal, parse_constant=_constant, object_pairs_hook=_object
            )
        except UnicodeDecodeError as exc:
            return _not_unicode(tool.name, f"byte {exc.start} of the arguments text")
        except _Duplicate as dup:
            return _duplicate(tool.name, dup.key)
        except _Constant as const:
            return _not_a_number(tool.name, const.name, "")
        except (ValueError, RecursionError) as exc:
            example = example_call(tool)
            where = f", character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
            reason = (
                exc.msg
                if isinstance(exc, json.JSONDecodeError)
                else "nesting is too deep"
                if isinstance(exc, RecursionError)
                else str(exc)[:120]
            )
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
    if not from_text and _flat_ascii(raw):  # the common call: nothing to refuse, one C encode
        canonical = fast_canonical(raw, plain=True)
        assert canonical is not None
        if len(canonical) > limit:
            return _too_large(ctx, len(canonical), limit)
        ctx.arguments = raw
        ctx.arguments_json = ctx.canonical_arguments = canonical
        ctx.fingerprint = sha256_text(f"{tool.name}\x00{canonical}")[:32]
        return None
    try:
        bad = _first_bad(raw)
    except RecursionError:
        bad = None  # the encoders below refuse the same nesting with their own message
    if bad is not None:
        kind, path, value = bad
        if kind == "number":
            return _not_a_number(tool.name, _number_text(value), json_path(path))
        # A bad key is shown escaped: the message itself must stay valid Unicode.
        shown = f"the key {json.dumps(value)} in {json_path(path[:-1])}" if kind == "key" else None
        return _not_unicode(tool.name, shown or json_path(path))
    try:
        if from_text:
            canonical = fast_canonical(raw)
            if canonical is None:  # a fraction, a long integer, a key beyond the BMP: JCS's own writer
                canonical = hash_text(_numbers(raw))
            as_json = None
            size = len(canonical)
        else:
            as_json = fast_canonical(raw)  # JSON-only data: its sorted-key text already is RFC 8785's
            if as_json is None:
                as_json = canonical_json(raw)  # what validation reads: a caller's Decimal is its exact string
                if not _is_unicode(as_json):  # text in a non-JSON value (a model instance) a caller passed
                    return _not_unicode(tool.name, "$")
                canonical = hash_text(json.loads(as_json))
            else:
                canonical = as_json
            size = len(as_json)
    except (TypeError, ValueError, RecursionError):
        return ToolError(
            ErrorCode.INVALID_ARGUMENTS,
            f"The arguments for {tool.name} contain values that are not JSON (or nest too deeply).",
        )
    if size > limit:
        return _too_large(ctx, size, limit)
    ctx.arguments = raw
    ctx.arguments_json = as_json
    ctx.canonical_arguments = canonical
    ctx.fingerprint = sha256_text(f"{tool.name}\x00{canonical}")[:32]
    return None


def _flat_ascii(arguments: dict[str, Any]) -> bool:
    """True for arguments that are only ASCII strings under ASCII keys (most calls)."""
    for key, value in arguments.items():
        if type(value) is not str or type(key) is not str or not value.isascii() or not key.isascii():
            return False
    return True


def _numbers(value: Any) -> Any:
    """Parsed JSON with its numbers as JSON numbers again (decode parses fractions as Decimal)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    return value


def _first_bad(value: Any) -> tuple[str, tuple[Any, ...], Any] | None:
    """(kind, path, value) of the first text that is not Unicode or number that is not finite."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not (key.isascii() or _is_unicode(key)):
                return ("key", (key,), key)
            if type(item) is str and item.isascii():  # the common argument, without a call
                continue
            found = _first_bad(item)
            if found is not None:
                return (found[0], (key, *found[1]), found[2])
        return None
    if isinstance(value, str):
        return None if value.isascii() or _is_unicode(value) else ("text", (), value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return ("number", (), value) if abs(value) > _MAX_FLOAT else None
    if isinstance(value, float):
        return None if math.isfinite(value) else ("number", (), value)
    if isinstance(value, Decimal):  # copy_abs: exact, where abs() would overflow on 1e99999999999
        return None if value.is_finite() and value.copy_abs() <= _MAX_DECIMAL else ("number", (), value)
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _first_bad(item)
            if found is not None:
                return (found[0], (index, *found[1]), found[2])
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number_text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text):,} digits)"


def _not_unicode(name: str, where: str) -> ToolError:
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        f"The arguments for {name} contain text that is not valid Unicode at {where} (a lone surrogate "
        "such as \\ud800, or bytes that are not UTF-8). Send plain UTF-8 text: remove or replace that "
        "character, and call again.",
        details={"path": where, "problem": "not_unicode"},
    )


def _not_a_number(name: str, shown: str, where: str) -> ToolError:
    at = f" at {where}" if where else ""
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        f"The arguments for {name} contain the number {shown}{at}, which JSON cannot carry: NaN, "
        "Infinity and numbers beyond ±1.8e308 are not allowed. Send a finite number (an exact amount "
        'goes in a string, like "10.50"), and call again.',
        details={"path": where or "$", "problem": "not_finite", "received": shown},
    )


def _duplicate(name: str, key: str) -> ToolError:
    shown = json.dumps(key[:80])  # ASCII-escaped: the key may hold a lone surrogate
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        f"The arguments for {name} name the key {shown} twice in one object; which value counts would "
        "depend on the parser. Send each key once, and call again.",
        details={"problem": "duplicate_key", "key": shown},
    )


def _too_large(ctx: CallContext, size: int, limit: int) -> ToolError:
    name = ctx.tool.name if ctx.tool else ctx.call.name
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        f"The arguments for {name} are {size:,} bytes; the limit is {limit:,}. Send only the fields the "
        "tool needs, with short values; large content belongs in a file or a handle, not in arguments.",
        details={"size": size, "limit": limit},
    )
