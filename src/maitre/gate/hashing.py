"""The hashes a governed call is known by, all taken over one RFC 8785 text of its arguments.

Every hash the gate stores or compares - the loop guard's fingerprint, the call hash an approval
is bound to, the idempotency key and the record's fingerprint, the audit digest of the arguments -
is sha256 over RFC 8785 (JCS) text (`maitre.audit.canonical`). The arguments are canonicalised
once per call (`CallContext.canonical_arguments` as decoded, `canonical_validated` once validated;
the second is the first when validation changed nothing); every envelope around them (tool,
principal, run, basis) is written by concatenation in JCS member order, which is exactly the JCS
text of the whole envelope, so no hash canonicalises the arguments again.

**Hash format version 2.** Stored values carry their version: a call hash is `h2:<64 hex>`, an
idempotency key `idk2_<40 hex>`. Version 1 (before issue 11: sorted-key Python JSON, where a
`Decimal` was a string and `1.0` stayed `1.0`) wrote bare hex call hashes and `idk_<40 hex>`
keys. They are still read, so a retry across the upgrade never executes twice: an approval whose
hash is version 1 is checked with `legacy_call_hash`, and an idempotency key not found under
version 2 is looked up under `legacy_key` (only in a store that may hold version 1 records, see
`may_hold_legacy`). The version-1 encoder is frozen here, as data: it must never change again.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from json.encoder import encode_basestring
from typing import Any
from uuid import UUID

from ..audit.canonical import hash_text
from ..types import Principal
from .authorize import validated_arguments
from .base import CallContext

__all__ = [
    "CALL_HASH_PREFIX",
    "HASH_VERSION",
    "KEY_PREFIX",
    "LEGACY_KEY_PREFIX",
    "call_hash_of",
    "hash_text",
    "is_legacy_call_hash",
    "json_string",
    "key_of",
    "legacy_call_hash",
    "legacy_key",
    "may_hold_legacy",
    "sha256_text",
    "validated_text",
]

HASH_VERSION = 2
"""The format of every hash the gate writes (see the module docstring)."""
CALL_HASH_PREFIX = "h2:"
"""A version-2 call hash is this prefix plus 64 hex digits; version 1 was the bare hex."""
KEY_PREFIX = "idk2_"
"""A version-2 idempotency key is this prefix plus 40 hex digits."""
LEGACY_KEY_PREFIX = "idk_"
"""A version-1 idempotency key is this prefix plus 40 hex digits."""


def sha256_text(text: str) -> str:
    """sha256 hex of `text` as UTF-8 (a lone surrogate, which only a door's own text can hold, is
    hashed as its surrogate bytes: deterministic, and distinct from every valid string)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def json_string(value: str) -> str:
    """The RFC 8785 text of a string (the stdlib's C escaper writes JCS's escapes exactly)."""
    return encode_basestring(value)


def _member(name: str, value: str | None) -> str:
    return f',"{name}":' + ("null" if value is None else json_string(value))


def _identity(tool: str, principal: Principal) -> str:
    return _member("tenant", principal.tenant) + _member("tool", tool) + _member("user", principal.user) + "}"


def call_hash_of(tool: str, arguments_text: str, principal: Principal, run_id: str | None) -> str:
    """The hash an approval is bound to: `h2:` + sha256 of the JCS text of
    `{"arguments", "run", "tenant", "tool", "user"}`, with the arguments' own canonical text."""
    envelope = '{"arguments":' + arguments_text + _member("run", run_id) + _identity(tool, principal)
    return CALL_HASH_PREFIX + sha256_text(envelope)


def key_of(tool: str, principal: Principal, basis: str, basis_text: str, run_id: str | None = None) -> str:
    """A version-2 idempotency key: `idk2_` + 40 hex of sha256 over the JCS text of
    `{<basis>, ["run",] "tenant", "tool", "user"}`, where `basis` is `arguments`, `business_key`
    or `host_key` and `basis_text` its canonical text; `run_id` only for the run basis."""
    envelope = "{" + json_string(basis) + ":" + basis_text
    if run_id is not None:
        envelope += _member("run", run_id)
    return KEY_PREFIX + sha256_text(envelope + _identity(tool, principal))[:40]


def validated_text(ctx: CallContext) -> str:
    """The RFC 8785 text of the validated arguments, computed once per call and kept on the context.

    When validation changed nothing (the same JSON values of the same JSON types, the common case),
    it is the text decode already wrote; otherwise the validated data is canonicalised, once.
    """
    text = ctx.canonical_validated
    if text is None:
        data = validated_arguments(ctx)
        decoded = ctx.canonical_arguments
        same = decoded is not None and _same_json(data, ctx.arguments)
        text = decoded if same and decoded is not None else hash_text(data)
        ctx.canonical_validated = text
    return text


def _same_json(a: Any, b: Any) -> bool:
    """True when `a` and `b` are the same JSON value with the same types (`1` is not `1.0` nor
    `True`, a `Decimal` is never a float): then they have the same canonical text."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        if len(a) != len(b):
            return False
        for key, item in a.items():
            other = b.get(key, _MISSING)
            if type(item) is str:
                if type(other) is not str or item != other:
                    return False
            elif not _same_json(item, other):
                return False
        return True
    if kind is list:
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if kind is str or kind is int or kind is bool or kind is float or a is None:
        return bool(a == b)
    return False


_MISSING = object()


def is_legacy_call_hash(value: str | None) -> bool:
    """True for a call hash written in version 1 (bare hex, no version prefix)."""
    return value is not None and not value.startswith(CALL_HASH_PREFIX)


def may_hold_legacy(store: object) -> bool:
    """Whether a store may hold records keyed in version 1, so a miss must look the old key up.

    A store says so with a `legacy_hashes` attribute (False for a database created at or after
    the version change, and for an in-process store); one that does not say is asked every time
    (one more read per new key: measured at 6-10 µs on SQLite, 4-5 µs in memory). A gate that
    made its own stores (`Gate(box)`) never asks.
    """
    return getattr(store, "legacy_hashes", True) is not False


# -- version 1, frozen -------------------------------------------------------------------------------


def _v1_default(value: Any) -> Any:
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


_V1 = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_v1_default).encode


def legacy_call_hash(tool: str, arguments: dict[str, Any], principal: Principal, run_id: str | None) -> str:
    """The version-1 call hash of a call (what an approval created before the upgrade holds)."""
    envelope = {
        "tool": tool,
        "arguments": arguments,
        "user": principal.user,
        "tenant": principal.tenant,
        "run": run_id,
    }
    return hashlib.sha256(_V1(envelope).encode()).hexdigest()


def legacy_key(tool: str, principal: Principal, basis: dict[str, Any]) -> str:
    """The version-1 idempotency key of a call; `basis` is `{"host_key": ...}`,
    `{"business_key": {...}}`, `{"run": ..., "arguments": ...}` or `{"arguments": ...}`."""
    identity = {"tenant": principal.tenant, "user": principal.user, "tool": tool, **basis}
    digest = hashlib.sha256(_V1(identity).encode("utf-8", "surrogatepass")).hexdigest()
    return LEGACY_KEY_PREFIX + digest[:40]
