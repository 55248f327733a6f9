"""Sorted and compact JSON for text a person, a model or a validator reads.

`canonical_json` is sorted-key JSON without whitespace, with Decimals, dates, UUIDs and models
turned into their JSON form: a stable text for values that are not plain JSON (the gate validates
a Python caller's arguments from it; content-derived ids use it). It is **not** what maitre hashes:
every stored or compared hash (fingerprints, approval call hashes, idempotency keys, audit digests,
MCP pins) is taken over RFC 8785 text from `maitre.audit.canonical`, which fixes number formatting
as well as key order. `compact_json` is what a model reads: no whitespace, no ASCII escaping of
non-English text.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

__all__ = ["canonical_json", "compact_json", "dump_jsonable", "json_type", "sha256_hex", "to_jsonable"]


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, tuple):
        return list(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_default)
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_default)


def canonical_json(value: Any) -> str:
    """Deterministic sorted-key JSON (not for hashes: see the module docstring). Raises TypeError
    for values that are not JSON-like."""
    return _CANONICAL.encode(value)


def compact_json(value: Any) -> str:
    """Short JSON for a model's context. Raises TypeError for values that are not JSON-like."""
    return _COMPACT.encode(value)


def to_jsonable(value: Any) -> Any:
    """Turn pydantic models, Decimals, dates, ... into plain JSON data."""
    return dump_jsonable(value)[1]


def dump_jsonable(value: Any) -> tuple[str, Any]:
    """(compact JSON text, plain JSON data) with one serialisation when the value is already plain."""
    converted = False

    def default(item: Any) -> Any:
        nonlocal converted
        converted = True
        return _default(item)

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=default)
    if isinstance(value, tuple) or converted:
        return text, json.loads(text)
    return text, value


def sha256_hex(text: str) -> str:
    """sha256 hex of a text as UTF-8 (for a digest of text; JSON values are hashed as RFC 8785)."""
    return hashlib.sha256(text.encode()).hexdigest()


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded value (`integer` for an int, `number` for a float or
    Decimal, `array` for a list or tuple), else the Python type's name: what an error says it got."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
