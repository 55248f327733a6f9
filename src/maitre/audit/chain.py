"""The hash-chained audit log: what an entry is, how it is sealed, and how a chain is verified.

Each entry carries `seq` (1, 2, 3, ... with no gaps), `prev_hash` (the previous entry's `hash`, or 64
zeros for the first) and `hash` = sha256 over the RFC 8785 canonical JSON of every field except `hash`
itself. Changing any byte of an entry changes its hash; removing, inserting or reordering entries
breaks a `seq` step or a `prev_hash` link. `verify` walks a chain and names the first entry where it
breaks.

What a bare hash chain cannot prove: someone with write access to the store can rewrite the whole log
after the point they change, recomputing every hash, or cut entries off its end. Both are caught only
against an *anchor* kept elsewhere: the (seq, hash) of an entry recorded out of band (a ticket, a
log shipper, another database). `verify(..., anchor=(seq, hash))` checks it; `VerifyReport.last_seq`
and `last_hash` are what to publish as the next anchor.

Stores seal entries through `seal` inside their append transaction; nothing else computes hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import asdict, dataclass, fields
from json.encoder import encode_basestring
from typing import Any, Protocol

from maitre.audit.canonical import canonical_bytes

__all__ = [
    "AuditEntry",
    "AuditSource",
    "ChainVerifier",
    "GENESIS_HASH",
    "VerifyReport",
    "entry_hash",
    "iter_store",
    "seal",
    "verify",
    "verify_store",
]

GENESIS_HASH = "0" * 64
"""The `prev_hash` of the first entry of a chain."""


@dataclass(kw_only=True, frozen=True)
class AuditEntry:
    """One line of the audit book: one decision the gate took about one call.

    Build one without `seq`, `prev_hash` and `hash` and pass it to `AuditStore.append`, which returns
    the sealed copy.
    """

    at: float
    """Unix time of the decision."""
    user: str
    """The principal's user."""
    tenant: str
    """The principal's tenant."""
    tool: str
    """Canonical tool name (or the name as written, for an unknown tool)."""
    decision: str
    """What the gate decided: `allow`, `deny`, `approval_required`, `approved`, `replayed`, `error` ..."""
    run_id: str | None = None
    """The run the call belongs to."""
    call_id: str | None = None
    """The call id the model gave."""
    call_hash: str | None = None
    """sha256 binding tool, canonical arguments, principal and run (the hash approvals are bound to)."""
    approval_id: str | None = None
    """The approval request involved, if any."""
    arguments: str | None = None
    """Arguments as a digest (default) or as redacted canonical JSON (by option)."""
    result_digest: str | None = None
    """Digest of the result content; None when nothing was produced."""
    error_code: str | None = None
    """The `ToolError` code returned, if any."""
    detail: str | None = None
    """A short machine-written note (policy rule that fired, budget that ran out ...); never a secret."""
    duration_ms: float = 0.0
    """Time spent in the gate for this call."""
    replayed: bool = False
    """True when an idempotency key replayed a stored result instead of executing."""
    seq: int = 0
    """Position in the chain, from 1; assigned by the store."""
    prev_hash: str = ""
    """Hash of the previous entry (64 zeros for the first); assigned by the store."""
    hash: str = ""
    """sha256 over the canonical JSON of every other field; assigned by the store."""

    def to_dict(self) -> dict[str, Any]:
        """All fields as JSON-ready data."""
        return asdict(self)


_HASHED_FIELDS = tuple(f.name for f in fields(AuditEntry) if f.name != "hash")


def _payload(entry: AuditEntry, **overrides: Any) -> dict[str, Any]:
    payload = {name: getattr(entry, name) for name in _HASHED_FIELDS}
    payload.update(overrides)
    return payload


_SORTED = tuple(sorted(_HASHED_FIELDS))
"""The hashed fields in RFC 8785 order (plain ASCII names: code point order is UTF-16 order)."""
_PREFIXES = tuple((f'"{name}":', name) for name in _SORTED)
_INT_MAX = 2**53 - 1


def _payload_bytes(payload: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of an entry's payload, written field by field (a third of `canonical_bytes`'
    cost: the keys and their order are known). Anything outside the common shapes - a float JCS
    writes in exponent form, an int beyond 2**53, a lone surrogate - goes through `canonical_bytes`.
    A property test holds the two equal."""
    parts: list[str] = []
    for prefix, name in _PREFIXES:
        value = payload[name]
        kind = type(value)
        if kind is str:
            parts.append(prefix + encode_basestring(value))
        elif value is None:
            parts.append(prefix + "null")
        elif kind is bool:
            parts.append(prefix + ("true" if value else "false"))
        elif kind is int and -_INT_MAX <= value <= _INT_MAX:
            parts.append(prefix + str(value))
        elif kind is float and abs(value) < 1e16 and value.is_integer():
            parts.append(prefix + str(int(value)))  # ECMAScript writes 2.0 as 2
        elif kind is float and 1e-4 <= abs(value) < 1e16:
            parts.append(prefix + repr(value))  # shortest round trip, as ECMAScript's
        else:
            return canonical_bytes(payload)
    try:
        return ("{" + ",".join(parts) + "}").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: RFC 8785 refuses it, with its own message
        return canonical_bytes(payload)


def entry_hash(entry: AuditEntry) -> str:
    """The hash an entry must carry: sha256 over the canonical JSON of all its fields but `hash`."""
    return hashlib.sha256(_payload_bytes(_payload(entry))).hexdigest()


def seal(entry: AuditEntry, *, seq: int, prev_hash: str) -> AuditEntry:
    """A copy of `entry` placed at `seq` after `prev_hash`, with its hash computed.

    Numbers are normalised first (`at` and `duration_ms` to float, `replayed` to bool) so the entry
    hashes the same before and after a round trip through any backend.
    """
    payload = _payload(
        entry,
        seq=seq,
        prev_hash=prev_hash,
        at=float(entry.at),
        duration_ms=float(entry.duration_ms),
        replayed=bool(entry.replayed),
    )
    return AuditEntry(**payload, hash=hashlib.sha256(_payload_bytes(payload)).hexdigest())


@dataclass(kw_only=True, frozen=True)
class VerifyReport:
    """The outcome of checking a chain."""

    ok: bool
    """True when every entry checked is intact and linked, and the anchor (if any) matched."""
    checked: int
    """How many entries were examined (up to and including the first bad one)."""
    first_bad_seq: int | None = None
    """The seq where the chain first breaks (for a missing entry: the seq that is missing)."""
    reason: str | None = None
    """What is wrong there, in one sentence."""
    last_seq: int = 0
    """Seq of the last intact entry (0 for an empty log): publish it with `last_hash` as an anchor."""
    last_hash: str = GENESIS_HASH
    """Hash of the last intact entry."""


class ChainVerifier:
    """Checks entries one at a time, so a long log can be verified in batches.

    Args:
        after_seq: seq of the entry just before the first one fed (0 to start at the beginning).
        after_hash: hash of that entry (`GENESIS_HASH` at the beginning).
        anchor: optional (seq, hash) recorded out of band; the log must reach it and match it.
    """

    def __init__(
        self,
        *,
        after_seq: int = 0,
        after_hash: str = GENESIS_HASH,
        anchor: tuple[int, str] | None = None,
    ) -> None:
        self._last_seq = after_seq
        self._last_hash = after_hash
        self._anchor = anchor
        self._checked = 0
        self._bad: tuple[int, str] | None = None

    @property
    def broken(self) -> bool:
        """True once a bad entry was seen; later entries are ignored."""
        return self._bad is not None

    def feed(self, entry: AuditEntry) -> bool:
        """Check the next entry. Returns False once the chain is broken."""
        if self._bad is not None:
            return False
        self._checked += 1
        expected = self._last_seq + 1
        if entry.seq != expected:
            self._bad = (
                expected,
                f"expected entry {expected} but found entry {entry.seq}: "
                "an entry was removed, duplicated or moved",
            )
            return False
        if entry.prev_hash != self._last_hash:
            self._bad = (
                entry.seq,
                f"entry {entry.seq} does not link to entry {expected - 1} (prev_hash mismatch): "
                f"entry {expected - 1} or {entry.seq} was rewritten, or one was inserted",
            )
            return False
        if entry_hash(entry) != entry.hash:
            self._bad = (entry.seq, f"entry {entry.seq} was altered: its hash does not match its content")
            return False
        if self._anchor is not None and entry.seq == self._anchor[0] and entry.hash != self._anchor[1]:
            self._bad = (
                entry.seq,
                f"entry {entry.seq} does not match the anchor recorded for it: "
                "the log was rewritten up to this point",
            )
            return False
        self._last_seq = entry.seq
        self._last_hash = entry.hash
        return True

    def report(self) -> VerifyReport:
        """The verdict on everything fed so far."""
        if self._bad is not None:
            seq, reason = self._bad
            return VerifyReport(
                ok=False,
                checked=self._checked,
                first_bad_seq=seq,
                reason=reason,
                last_seq=self._last_seq,
                last_hash=self._last_hash,
            )
        if self._anchor is not None and self._last_seq < self._anchor[0]:
            return VerifyReport(
                ok=False,
                checked=self._checked,
                first_bad_seq=self._last_seq + 1,
                reason=(
                    f"the log ends at entry {self._last_seq} but entry {self._anchor[0]} was anchored: "
                    "entries were cut off the end"
                ),
                last_seq=self._last_seq,
                last_hash=self._last_hash,
            )
        return VerifyReport(
            ok=True, checked=self._checked, last_seq=self._last_seq, last_hash=self._last_hash
        )


def verify(
    entries: Iterable[AuditEntry],
    *,
    after_seq: int = 0,
    after_hash: str = GENESIS_HASH,
    anchor: tuple[int, str] | None = None,
) -> VerifyReport:
    """Check a chain (or a slice of one) and name the first bad entry.

    Detects an altered entry (hash mismatch), a removed, duplicated or reordered entry (seq step), an
    inserted or rewritten entry (prev_hash link), a forged tail (appended entries that do not link),
    and, with an anchor, a rewritten prefix or a truncated end.

    Example:
        >>> report = verify(await store.entries())
        >>> report.ok, report.first_bad_seq
        (True, None)
    """
    verifier = ChainVerifier(after_seq=after_seq, after_hash=after_hash, anchor=anchor)
    for entry in entries:
        if not verifier.feed(entry):
            break
    return verifier.report()


class AuditSource(Protocol):
    """**Protocol:** what `iter_store` and `verify_store` read; every `AuditStore` is one.

    Declared here so the audit layer does not import the stores (which import it to seal entries).
    """

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        """Entries with seq > `since_seq`, in seq order, at most `limit` of them."""
        ...


async def iter_store(store: AuditSource, *, batch: int = 1000) -> AsyncIterator[AuditEntry]:
    """Every entry of an audit store in seq order, fetched `batch` at a time."""
    since = 0
    while True:
        page = await store.entries(since_seq=since, limit=batch)
        for entry in page:
            yield entry
        if len(page) < batch:
            return
        since = page[-1].seq


async def verify_store(
    store: AuditSource, *, anchor: tuple[int, str] | None = None, batch: int = 1000
) -> VerifyReport:
    """Verify a whole audit store, streaming it in batches (what `maitre audit verify` runs)."""
    verifier = ChainVerifier(anchor=anchor)
    async for entry in iter_store(store, batch=batch):
        if not verifier.feed(entry):
            break
    return verifier.report()
