"""The write path: a candidate validated, decided by the conflict rules, stored and indexed.

`MemoryStore.apply_many` owns the order of events, which this module keeps in three steps:

1. `prepare` (no database): refuse what must never be stored (an empty user, text that is not valid
   Unicode, a secret, a value too long, a fact dated in the future) and normalise the rest into the
   `Fact` that would be stored (its key folded through the policy's vocabulary) and the *slot* it
   competes in (the key, or key + value for a multi-valued key).
2. `likely_winners` (a read): which texts will probably become current and so need an embedding.
   The store embeds them before the write transaction opens, so the write lock is held for well
   under a millisecond.
3. `apply_one` (inside the caller's write transaction): the tombstone check, then
   `maitre.memory.rules.decide`, then the row; a winner supersedes the old current fact, which
   leaves the lexical and vector indexes, and enters them itself.

The rules themselves are in `maitre.memory.rules`; no model is on this path.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..exceptions import UserError
from . import rules
from .backend import Backend, Db
from .model import (
    Candidate,
    Fact,
    MemoryPolicy,
    Origin,
    Status,
    WriteAction,
    WriteOutcome,
    fact_text,
    looks_secret,
    normalise_value,
    require_storable,
    to_datetime,
    to_micros,
)
from .rows import insert_fact, slot_rows, tombstoned

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "AppliedWrite",
    "FUTURE_SKEW",
    "PreparedWrite",
    "apply_one",
    "likely_winners",
    "prepare",
    "reject_future",
    "slot_of",
]

FUTURE_SKEW = timedelta(minutes=5)
"""How far ahead of the store's clock a valid time may be (clock skew between machines)."""


def reject_future(candidate: Candidate, *, now: datetime) -> datetime:
    """The candidate's valid time (now if unset); a `UserError` if it is ahead of the clock.

    Every write door calls this (`write`, `apply`, `retract`, `remember`, the memory tools): a fact
    dated in the future is refused with this message, never stored and never skipped silently."""
    valid_from = to_datetime(candidate.valid_from, default=now)
    if valid_from > now + FUTURE_SKEW:
        where = f" (from {candidate.source})" if candidate.source else ""
        raise UserError(
            f"valid_from {valid_from.isoformat()} of {candidate.key!r}{where} is in the future (the "
            f"store's clock says {now.isoformat()}); write a fact when it becomes true, or fix the "
            "clock of the message it came from."
        )
    return valid_from


@dataclass(kw_only=True)
class PreparedWrite:
    """A candidate that passed validation, ready to be decided against its slot."""

    fact: Fact
    """The fact as it would be stored: normalised key and value, a fresh id, status current."""
    slot: str
    """Where it competes: the key, or key + normalised value for a multi-valued key."""
    multi: bool
    """Whether the key holds several values at once."""


@dataclass(kw_only=True)
class AppliedWrite:
    """What writing one prepared fact did, for the caller's outcome list and vector cache."""

    outcome: WriteOutcome
    """The action taken and the fact now current for the slot."""
    indexed: list[tuple[int, NDArray[np.float32]]]
    """(seq, vector) of the row that entered the indexes (the new current fact), if any."""
    unindexed: list[int]
    """Seqs of the rows that left the indexes (the fact it superseded), if any."""


def slot_of(key: str, value: str, *, multi: bool) -> str:
    """The slot a fact competes in: its key, or key + normalised value for a multi-valued key."""
    return f"{key}\x1f{normalise_value(value)}" if multi else key


def prepare(
    user: str, tenant: str, candidate: Candidate, *, policy: MemoryPolicy, now: datetime
) -> PreparedWrite:
    """Validate and normalise a candidate; a `UserError` says why it may not be stored."""
    if not user or not tenant:
        raise UserError("A memory write needs a non-empty user and tenant.")
    require_storable("user", user)
    require_storable("tenant", tenant)
    require_storable("source", candidate.source or "")
    key = policy.canonical_key(candidate.key)
    value = " ".join(require_storable("value", candidate.value).split())
    if not value and not candidate.retract:
        raise UserError(f"Memory value for {key!r} is empty; to end a value use retract().")
    if len(value) > policy.max_value_chars:
        raise UserError(
            f"Memory value for {key!r} is {len(value)} characters; the limit is "
            f"{policy.max_value_chars}. Store a short fact, not a document."
        )
    if policy.reject_secrets and looks_secret(key, value):
        raise UserError(
            f"Refusing to store {key!r}: it looks like a secret (card number, password, key). "
            "Long-term memory must never hold secrets."
        )
    valid_from = reject_future(candidate, now=now)
    multi = key in policy.multi_valued
    if multi and candidate.retract and not normalise_value(value):
        raise UserError(f"{key!r} holds several values; name the value that ended.")
    fact = Fact(
        id=uuid.uuid4().hex,
        tenant=tenant,
        user=user,
        key=key,
        value=value,
        valid_from=valid_from,
        recorded_at=now,
        source=candidate.source or "",
        origin=Origin(candidate.origin),
        status=Status.CURRENT,
        retracted=candidate.retract,
    )
    return PreparedWrite(fact=fact, slot=slot_of(key, value, multi=multi), multi=multi)


def likely_winners(
    db: Db, prepared: list[PreparedWrite], *, digest: Callable[[Fact], list[str]], unforget: bool
) -> list[str]:
    """The texts of prepared facts that would become current now (so a replay costs no embedding)."""
    wanted: list[str] = []
    for item in prepared:
        fact = item.fact
        if fact.retracted or (not unforget and tombstoned(db, digest(fact))):
            continue
        rows = [f for _, f in slot_rows(db, fact.tenant, fact.user, item.slot)]
        current = next((f for f in rows if f.status == Status.CURRENT), None)
        action = rules.decide(fact, rows, current, multi_valued=item.multi)
        if action in (WriteAction.INSERTED, WriteAction.CONFIRMED):
            wanted.append(fact_text(fact.key, fact.value))
    return wanted


def apply_one(
    db: Db,
    backend: Backend,
    item: PreparedWrite,
    vectors: dict[str, NDArray[np.float32]],
    *,
    digest: Callable[[Fact], list[str]],
    embed: Callable[[list[str]], dict[str, NDArray[np.float32]]],
    unforget: bool,
    now: datetime,
) -> AppliedWrite:
    """Write one prepared fact through the rules, inside the caller's write transaction.

    `vectors` holds the embeddings made before the transaction opened; `embed` is called only when
    another writer changed the slot in between, so a text that was not expected to win needs one.
    `digest` gives every tombstone digest that would stand for the fact (the current one first,
    then version-1 digests while the store still has such tombstones).
    """
    fact, slot = item.fact, item.slot
    tenant, user = fact.tenant, fact.user
    fact_digest = digest(fact)
    rows = slot_rows(db, tenant, user, slot)
    current_row = next(((s, f) for s, f in rows if f.status == Status.CURRENT), None)
    current = current_row[1] if current_row else None
    visible = current if current is not None and not current.retracted else None
    if not fact.retracted:
        if unforget:
            for d in fact_digest:
                db.execute("DELETE FROM memory_tombstones WHERE digest = ?", (d,))
        elif tombstoned(db, fact_digest):
            return _unchanged(WriteOutcome(action=WriteAction.BLOCKED, current=visible))
    action = rules.decide(fact, [f for _, f in rows], current, multi_valued=item.multi)
    if action in (WriteAction.DUPLICATE, WriteAction.IGNORED):
        return _unchanged(WriteOutcome(action=action, current=visible))
    wins = action in (WriteAction.INSERTED, WriteAction.CONFIRMED)
    if not wins:
        assert current is not None
        fact.status, fact.superseded_by, fact.superseded_at = Status.SUPERSEDED, current.id, now
    seq = insert_fact(db, fact, slot)
    fact.seq = seq
    if not wins:
        return _unchanged(WriteOutcome(action=action, current=visible, stored=fact))
    applied = AppliedWrite(
        outcome=WriteOutcome(action=action, current=None if fact.retracted else fact, stored=fact),
        indexed=[],
        unindexed=[],
    )
    if current_row is not None:
        old_seq, old = current_row
        db.execute(
            "UPDATE memory_facts SET status = 'superseded', superseded_by = ?, superseded_at = ? WHERE seq = ?",
            (fact.id, to_micros(now), old_seq),
        )
        if not old.retracted:
            backend.unindex(db, [(old_seq, tenant, user, fact_text(old.key, old.value))])
            applied.unindexed.append(old_seq)
    if not fact.retracted:
        text = fact_text(fact.key, fact.value)
        vec = vectors.get(text)
        if vec is None:  # another writer changed the slot between our read and this transaction
            vec = embed([text])[text]
        backend.index(db, [(seq, tenant, user, text, vec)])
        applied.indexed.append((seq, vec))
    return applied


def _unchanged(outcome: WriteOutcome) -> AppliedWrite:
    return AppliedWrite(outcome=outcome, indexed=[], unindexed=[])
