"""Canonical and compact JSON, in one place.

`canonical_json` is what maitre hashes (fingerprints, approval hashes, idempotency keys): sorted
keys, no whitespace, Decimals as strings, so the same logical arguments always hash the same.
`compact_json` is what a model reads: no whitespace, no ASCII escaping of non-English text.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

__all__ = ["canonical_json", "compact_json", "dump_jsonable", "sha256_hex", "to_jsonable"]


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
    """Deterministic JSON for hashing. Raises TypeError for values that are not JSON-like."""
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
    return hashlib.sha256(text.encode()).hexdigest()
