"""Make a valid example value for a JSON Schema, so a teaching error can show a correct call.

Patterns get a matching string built from the regex's own parse tree (digits read 1, 0, 4, 2, ...),
and every generated string is checked against the pattern; when a value cannot be built with
confidence, the caller gets `MISSING` and shows no example rather than a wrong one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typeshed describes the parser under its old public names
    import sre_constants as _c
    import sre_parse as _p
else:
    try:  # Python 3.11+ keeps the parser here; it is stable across 3.11-3.13.
        import re._constants as _c
        import re._parser as _p
    except ImportError:  # pragma: no cover
        import sre_constants as _c
        import sre_parse as _p

__all__ = ["MISSING", "example_for_pattern", "example_value"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_DIGITS = "1042357869"


def example_for_pattern(pattern: str) -> str | None:
    """A short string that `re.search(pattern, s)` accepts, or None."""
    try:
        tree = _p.parse(pattern)
    except re.error:
        return None
    digits = itertools.cycle(_DIGITS)
    try:
        text = _render(tree, digits)
    except (_Unsupported, RecursionError):
        return None
    return text if re.search(pattern, text) else None


class _Unsupported(Exception):
    pass


def _render(items: Any, digits: Iterator[str]) -> str:
    out: list[str] = []
    for op, av in items:
        out.append(_render_one(op, av, digits))
    return "".join(out)


def _render_one(op: Any, av: Any, digits: Iterator[str]) -> str:
    if op is _c.LITERAL:
        return chr(av)
    if op is _c.NOT_LITERAL:
        return "a" if chr(av) != "a" else "b"
    if op is _c.ANY:
        return "a"
    if op is _c.AT:
        return ""
    if op is _c.IN:
        return _render_in(av, digits)
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        low, high, sub = av
        count = low if low > 0 else 0
        if high is not _c.MAXREPEAT and count > high:
            count = high
        return "".join(_render(sub, digits) for _ in range(count))
    if op is _c.SUBPATTERN:
        return _render(av[-1], digits)
    if op is _c.BRANCH:
        return _render(av[1][0], digits)
    if op is _c.CATEGORY:
        return _category(av, digits)
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _render(av, digits)
    raise _Unsupported(op)


def _category(cat: Any, digits: Iterator[str]) -> str:
    if cat is _c.CATEGORY_DIGIT:
        return next(digits)
    if cat is _c.CATEGORY_WORD:
        return "a"
    if cat is _c.CATEGORY_SPACE:
        return " "
    if cat is _c.CATEGORY_NOT_DIGIT:
        return "a"
    raise _Unsupported(cat)


def _render_in(av: list[Any], digits: Iterator[str]) -> str:
    if av and av[0][0] is _c.NEGATE:
        for candidate in "aZ0_-":
            if not any(_in_item_matches(item, candidate) for item in av[1:]):
                return candidate
        raise _Unsupported("negated class")
    for op, value in av:
        if op is _c.LITERAL:
            return chr(value)
        if op is _c.RANGE:
            low, high = value
            if low <= ord("0") <= high and ord("9") <= high:
                return next(digits)
            if low <= ord("a") <= high:
                return "a"
            if low <= ord("A") <= high:
                return "A"
            return chr(low)
        if op is _c.CATEGORY:
            return _category(value, digits)
    raise _Unsupported("class")


def _in_item_matches(item: Any, ch: str) -> bool:
    op, value = item
    if op is _c.LITERAL:
        return chr(value) == ch
    if op is _c.RANGE:
        bounds: tuple[int, int] = value  # (low, high) code points
        return bounds[0] <= ord(ch) <= bounds[1]
    if op is _c.CATEGORY:
        return bool(re.match(r"[\d\w\s]", ch))
    return False


def example_value(schema: dict[str, Any], defs: dict[str, Any] | None = None, _depth: int = 0) -> Any:
    """A value valid for `schema` (best effort), or MISSING."""
    if _depth > 6:
        return MISSING
    defs = defs or {}
    if "$ref" in schema:
        target = defs.get(schema["$ref"].rsplit("/", 1)[-1])
        return MISSING if target is None else example_value(target, defs, _depth + 1)
    if schema.get("examples"):
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for option in schema[key]:
                if option.get("type") != "null":
                    return example_value(option, defs, _depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string":
        return _example_string(schema)
    if kind == "integer":
        return _example_number(schema, integer=True)
    if kind == "number":
        return _example_number(schema, integer=False)
    if kind == "boolean":
        return True
    if kind == "array":
        count = schema.get("minItems", 1)
        item = example_value(schema.get("items", {}), defs, _depth + 1)
        return MISSING if item is MISSING else [item] * max(count, 1)
    if kind == "object" or "properties" in schema:
        out = {}
        for name in schema.get("required", []):
            value = example_value(schema.get("properties", {}).get(name, {}), defs, _depth + 1)
            if value is MISSING:
                return MISSING
            out[name] = value
        return out
    return MISSING


def _example_string(schema: dict[str, Any]) -> Any:
    if "pattern" in schema:
        text = example_for_pattern(schema["pattern"])
        return MISSING if text is None else text
    fmt = schema.get("format")
    by_format = {
        "date": "2026-01-05",
        "date-time": "2026-01-05T10:00:00Z",
        "time": "10:00:00",
        "email": "user@example.com",
        "uri": "https://example.com",
        "uuid": "123e4567-e89b-12d3-a456-426614174000",
    }
    if fmt in by_format:
        return by_format[fmt]
    low = schema.get("minLength", 0)
    text = "example"
    if len(text) < low:
        text = text + "x" * (low - len(text))
    if "maxLength" in schema:
        text = text[: schema["maxLength"]]
    return text


def _example_number(schema: dict[str, Any], *, integer: bool) -> Any:
    low = schema.get("minimum")
    if low is None and "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"] + 1
    high = schema.get("maximum")
    if high is None and "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"] - 1
    value = low if low is not None else 1
    if high is not None and value > high:
        value = high
    return int(value) if integer else value
