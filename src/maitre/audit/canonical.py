"""Canonical JSON, digests and redaction: the byte-exact forms that hashes are taken over.

Every hash maitre stores (a call hash bound to an approval, an argument or result digest, an audit
entry's chain hash) is sha256 over RFC 8785 (JSON Canonicalization Scheme) text, produced by the
`rfc8785` package. JCS fixes key order, string escaping and number formatting, so the same value hashes
the same in every process, on every backend, after a round trip through SQLite `REAL` or Postgres
`double precision` (`1000` and `1000.0` both canonicalise to `1000`).

Values must already be JSON-ready (dict with str keys, list, tuple, str, int, float, bool, None).
Pydantic models should be dumped with `model_dump(mode="json")` first, so a `Decimal` amount is hashed
as the exact text the tool will see, never through a binary float.

`digest` never raises, because the gate digests what a model sent, and a model can send what RFC 8785
refuses (`NaN`, `1e400` and 30-digit integers all parse with `json.loads`; so do lone surrogates).
Such a value is hashed through a fallback text under a separate domain prefix, so it can never collide
with the digest of a canonical value, and an audit record is never lost to a hostile argument.
`canonical_json` stays strict.

`redact` is for the "redacted values" audit mode: it replaces the values of sensitive-looking keys and
keeps the shape, so an auditor can read what was asked without reading secrets. Its result is always
canonicalisable: numbers JSON cannot carry exactly become strings.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

import rfc8785

__all__ = [
    "DEFAULT_REDACT_KEYS",
    "REDACTED",
    "canonical_bytes",
    "canonical_json",
    "digest",
    "fast_canonical",
    "hash_text",
    "redact",
]

DEFAULT_REDACT_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "session",
    "privatekey",
    "ssn",
    "cardnumber",
    "creditcard",
    "cvv",
    "iban",
)
"""Key fragments redacted by default. A key matches when its lowercased form, with `-`, `_`, `.` and
spaces removed, contains one of them (`X-Api-Key`, `access_token` and `clientSecret` all match)."""

REDACTED = "[REDACTED]"
"""What a redacted value is replaced with."""


_INT_MAX = 2**53 - 1
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


_C_ENCODER = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, _refuse, encode_basestring, None, ":", ",", True, False, False)
)
"""The stdlib's C encoder with `_ENCODE`'s settings, made once: `JSONEncoder.encode` builds one on
every call, which is two thirds of its cost for the small values the gate hashes. No circular
check: `_fast_safe` admits only values at most 64 levels deep, so a cycle never gets here."""


def _encode_fast(value: Any) -> str:
    """`_ENCODE(value)` for a value `_fast_safe` admitted."""
    if _C_ENCODER is None:  # pragma: no cover - an interpreter without the C accelerator
        return _ENCODE(value)
    return "".join(_C_ENCODER(value, 0))


def _fast_safe(value: Any, depth: int = 0) -> bool:
    """True when the stdlib C encoder writes exactly RFC 8785's bytes for `value`.

    That holds for JSON whose floats are non-integral and inside [1e-4, 1e16) (JCS formats numbers like
    ECMAScript, and there the two agree; timestamps and durations are), without integers beyond
    ±2**53, without lone surrogates, and with keys inside the Basic Multilingual Plane (JCS sorts keys
    by UTF-16 code units, Python by code points; the orders agree inside the BMP). String escaping is
    the same in both: `\\"`, `\\\\`, `\\b \\f \\n \\r \\t`, other controls as lowercase `\\u00xx`.
    """
    if depth > 64:
        return False
    kind = type(value)
    if kind is str:
        return value.isascii() or _no_surrogates(value)
    if kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_INT_MAX <= value <= _INT_MAX)
    if kind is float:
        # Inside [1e-4, 1e16) both Python's repr and ECMAScript's Number::toString write the shortest
        # round-tripping digits in plain notation; integral floats differ ("1.0" vs "1").
        magnitude = abs(value)
        return 1e-4 <= magnitude < 1e16 and not value.is_integer()
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or (_no_surrogates(key) and max(key) <= "\uffff")):
                return False
            if not _fast_safe(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        return all(_fast_safe(item, depth + 1) for item in value)
    return False


def _no_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fast_canonical(value: Any, *, plain: bool = False) -> str | None:
    """RFC 8785 text of `value` when the stdlib C encoder writes it exactly (see `_fast_safe`), else
    None: the one walk and one C encode that every common call needs. `plain=True` skips the walk
    for a value the caller has checked is a flat dict of ASCII strings."""
    return _encode_fast(value) if plain or _fast_safe(value) else None


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical JSON of a JSON-ready value, as UTF-8 bytes.

    Values the stdlib encoder writes identically (no floats, see `_fast_safe`) take the C encoder; the
    rest go through `rfc8785`. A property test holds the two paths equal.

    Raises:
        TypeError: the value holds something JSON cannot represent exactly (a Decimal, a datetime, a
            NaN, an int beyond ±2**53 ...). Dump models with `mode="json"` first.
    """
    if _fast_safe(value):
        return _encode_fast(value).encode("utf-8")
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise TypeError(
            f"cannot canonicalise {type(value).__name__} value as RFC 8785 JSON: {exc}. "
            "Pass JSON-ready data (for a pydantic model: model_dump(mode='json'))."
        ) from exc


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON of a JSON-ready value, as text (see `canonical_bytes`)."""
    return canonical_bytes(value).decode("utf-8")


_FALLBACK_DOMAIN = b"maitre:non-canonical-json\x00"
_INT_LIMIT = 2**53 - 1


def digest(value: Any) -> str:
    """sha256 hex digest of the canonical JSON of `value` (64 lowercase hex characters).

    Never raises: a value RFC 8785 cannot represent is digested through a deterministic fallback text
    under its own domain prefix (see the module docstring).
    """
    try:
        data = canonical_bytes(value)
    except (rfc8785.CanonicalizationError, UnicodeError, TypeError, ValueError, RecursionError):
        data = _FALLBACK_DOMAIN + _fallback_text(value).encode("ascii")
    return hashlib.sha256(data).hexdigest()


def hash_text(value: Any) -> str:
    """The text `digest` hashes, as str: RFC 8785 JSON, or for a value RFC 8785 cannot represent the
    fallback text under its domain prefix. Never raises; `sha256(hash_text(v)) == digest(v)`.

    Hashes that wrap a value in an envelope (the gate's call hash, its idempotency keys) splice this
    text in, so the value is canonicalised once however many hashes are taken over it.
    """
    text = fast_canonical(value)
    if text is not None:
        return text
    try:
        return canonical_bytes(value).decode("utf-8")
    except (rfc8785.CanonicalizationError, UnicodeError, TypeError, ValueError, RecursionError):
        return _FALLBACK_DOMAIN.decode("ascii") + _fallback_text(value)


def _fallback_text(value: Any) -> str:
    try:
        return json.dumps(
            value,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
            allow_nan=True,
            default=lambda v: {"$type": type(v).__name__, "$str": str(v)},
        )
    except (TypeError, ValueError, RecursionError):
        return ascii(value)


def _normalise_key(key: str) -> str:
    return "".join(ch for ch in key.lower() if ch not in "-_. ")


def redact(value: Any, keys: Iterable[str] = DEFAULT_REDACT_KEYS, *, mask: str = REDACTED) -> Any:
    """A copy of `value` with the values of sensitive keys replaced by `mask`, at any depth.

    The copy is always accepted by `canonical_json`: NaN, infinities, integers beyond ±2**53, Decimals
    and other non-JSON leaves become strings, and lone surrogates are replaced.

    Args:
        value: JSON-ready data; it is not modified.
        keys: key fragments to redact, compared after normalisation (see `DEFAULT_REDACT_KEYS`).
        mask: the replacement value.

    Example:
        >>> redact({"user": "ann", "auth": {"api_key": "sk-1"}, "items": [{"Password": "x"}]})
        {'user': 'ann', 'auth': {'api_key': '[REDACTED]'}, 'items': [{'Password': '[REDACTED]'}]}
    """
    fragments = tuple(_normalise_key(k) for k in keys)
    return _redact(value, fragments, mask)


def _redact(value: Any, fragments: tuple[str, ...], mask: str) -> Any:
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            name = _normalise_key(key) if isinstance(key, str) else ""
            if name and any(fragment in name for fragment in fragments):
                out[key] = mask
            else:
                out[key] = _redact(item, fragments, mask)
        return out
    if isinstance(value, list | tuple):
        return [_redact(item, fragments, mask) for item in value]
    return _representable(value)


def _representable(value: Any) -> Any:
    """A leaf RFC 8785 can carry: odd numbers and non-JSON values become strings."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -_INT_LIMIT <= value <= _INT_LIMIT else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")  # drops lone surrogates
    return str(value)
