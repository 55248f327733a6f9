"""Conflict rules, in code: which fact of a slot is current. No model on the write path.

Precedence is one total order over the facts of a slot, compared left to right:

    (origin: stated > inferred,  valid_from: newer > older,  recorded_at: newer > older,
     storage order: later > earlier)

The current fact is the maximum of that order over every stored fact of the slot; every other fact
is kept as `superseded` (never blended, never dropped). Consequences, each tested:

| situation | result |
|---|---|
| Pune (Jan, stated), then Bengaluru (Mar, stated) | Bengaluru current, Pune superseded |
| the January import replayed after the March move | stored already superseded; Bengaluru stays |
| inferred Mumbai (Apr) after stated Bengaluru (Mar) | Mumbai stored superseded: a guess never overwrites what the user said |
| stated Pune (Jan) arrives after inferred Mumbai (Apr) | Pune current: same rule, whatever the arrival order |
| the same (value, valid_from, origin) written twice | the second write is a no-op (idempotent) |
| "I still live in Bengaluru" (May, stated) | stored and current; value unchanged (a confirmation) |
| "I no longer eat meat" (a retraction) | the slot has no current value; older replays cannot revive it |
| two values, same origin and valid_from, in one batch | the later one in the batch is current (storage order) |

*Why storage order last.* One batch shares one `recorded_at`, so two facts for a key with the same
`valid_from` used to be told apart by their random ids: the winner changed from run to run
(issue 16). The storage order (`Fact.seq`; a fact not yet stored comes after every stored one) makes
the answer "later wins", within a batch and across writes alike.

*Why origin first, even over recency.* Seed 000: "a fact the user stated beats one the system
inferred". The alternative (recency first, inferred may not override stated) gives a different
answer depending on which write arrives first; a total order makes the outcome independent of
arrival order, so replays, imports and concurrent writers all converge on the same current fact.
The price: an inferred fact cannot replace a stale stated one until the user states the new value.
That is the safe direction: the system asks, it does not silently overwrite what the user said.
Inferred facts that lost are kept in history, so an application can ask "did you move to Mumbai?".

*Why bi-temporal.* The current fact is the winner at (valid time = now, system time = now).
`winner(..., valid_at=, known_at=)` answers "where did the user live in February?" (valid time) and
"what did we believe on 1 March?" (system time) from the same rows.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import datetime

from .model import Fact, Origin, WriteAction, normalise_value

__all__ = ["decide", "precedence", "same_fact", "winner"]

_ORIGIN_RANK = {Origin.STATED: 1, Origin.INFERRED: 0}


def precedence(fact: Fact) -> tuple[int, datetime, datetime, int, str]:
    """The sort key of the conflict order; the maximum is current (unstored facts sort last-stored)."""
    order = fact.seq if fact.seq is not None else sys.maxsize
    return (_ORIGIN_RANK[Origin(fact.origin)], fact.valid_from, fact.recorded_at, order, fact.id)


def same_fact(a: Fact, b: Fact) -> bool:
    """Identity for idempotency: same normalised value, valid_from, origin and retraction flag.

    The source is provenance, not identity: the same fact replayed from another source is a duplicate.
    """
    return (
        a.retracted == b.retracted
        and a.valid_from == b.valid_from
        and Origin(a.origin) == Origin(b.origin)
        and normalise_value(a.value) == normalise_value(b.value)
    )


def decide(candidate: Fact, slot: list[Fact], current: Fact | None, *, multi_valued: bool) -> WriteAction:
    """What writing `candidate` into a slot does, given the slot's stored facts and current fact.

    Returns DUPLICATE, IGNORED (a retraction of a value that is not current), INSERTED or CONFIRMED
    (stored and becomes current), or STORED_SUPERSEDED (stored, loses to `current`).
    """
    if any(same_fact(candidate, f) for f in slot):
        return WriteAction.DUPLICATE
    if (
        candidate.retracted
        and not multi_valued
        and candidate.value
        and (
            current is None
            or current.retracted
            or normalise_value(current.value) != normalise_value(candidate.value)
        )
    ):
        return WriteAction.IGNORED
    if current is not None and precedence(candidate) <= precedence(current):
        return WriteAction.STORED_SUPERSEDED
    if (
        current is not None
        and current.retracted == candidate.retracted
        and normalise_value(current.value) == normalise_value(candidate.value)
    ):
        return WriteAction.CONFIRMED
    return WriteAction.INSERTED


def winner(facts: Iterable[Fact], *, valid_at: datetime, known_at: datetime) -> Fact | None:
    """The fact current at valid time `valid_at` as known at system time `known_at`, or None.

    None also when the winner is a retraction (the slot had stopped being true).
    """
    eligible = [f for f in facts if f.valid_from <= valid_at and f.recorded_at <= known_at]
    if not eligible:
        return None
    best = max(eligible, key=precedence)
    return None if best.retracted else best
