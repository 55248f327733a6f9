"""Reading facts back: what is true now, what was true (or believed) at another moment, and history.

The current fact of a slot is stored as such (`status = 'current'`), so the ordinary question is
one indexed read. A question about another moment is answered from the same rows with
`maitre.memory.rules.winner`: *valid time* ("where did the user live in February?") and *system
time* ("what did we believe on 1 March?"), the two axes of a bi-temporal store. Nothing is ever
blended: a winner is one stored fact. These run inside the caller's read transaction.
"""

from __future__ import annotations

from datetime import datetime

from . import rules
from .backend import Db
from .model import Fact, MemoryPolicy
from .rows import COLS, row_fact
from .writes import slot_of

__all__ = ["current_values", "facts_valid_at", "key_history", "user_facts", "user_ids", "values_at"]


def current_values(db: Db, tenant: str, user: str, key: str) -> list[Fact]:
    """The current (not retracted) facts of a key, in storage order."""
    rows = db.execute(
        f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ? "
        "AND status = 'current' AND retracted = 0",
        (tenant, user, key),
    )
    return [row_fact(r)[1] for r in rows]


def values_at(
    db: Db, tenant: str, user: str, key: str, *, policy: MemoryPolicy, valid_at: datetime, known_at: datetime
) -> list[Fact]:
    """The winner of each slot of a key at valid time `valid_at` as known at system time `known_at`."""
    rows = db.execute(
        f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ?",
        (tenant, user, key),
    )
    slots: dict[str, list[Fact]] = {}
    for r in rows:
        fact = row_fact(r)[1]
        multi = fact.key in policy.multi_valued
        slots.setdefault(slot_of(fact.key, fact.value, multi=multi), []).append(fact)
    winners = (rules.winner(fs, valid_at=valid_at, known_at=known_at) for fs in slots.values())
    return [w for w in winners if w]


def key_history(db: Db, tenant: str, user: str, key: str) -> list[Fact]:
    """Every stored fact of a key (current and superseded), by valid_from then recorded_at."""
    rows = db.execute(
        f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ? "
        "ORDER BY valid_from, recorded_at, seq",
        (tenant, user, key),
    )
    return [row_fact(r)[1] for r in rows]


def user_facts(db: Db, tenant: str, user: str, *, include_history: bool) -> list[Fact]:
    """All of a user's facts (current only unless `include_history`), by key then valid_from."""
    where = "" if include_history else " AND status = 'current' AND retracted = 0"
    rows = db.execute(
        f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ?{where} "
        "ORDER BY key, valid_from, recorded_at, seq",
        (tenant, user),
    )
    return [row_fact(r)[1] for r in rows]


def user_ids(db: Db, tenant: str) -> list[str]:
    """Users with at least one stored fact in the tenant, sorted."""
    rows = db.execute(
        "SELECT DISTINCT user_id FROM memory_facts WHERE tenant = ? ORDER BY user_id", (tenant,)
    )
    return [r[0] for r in rows]


def facts_valid_at(
    db: Db,
    tenant: str,
    user: str,
    *,
    policy: MemoryPolicy,
    valid_at: datetime,
    known_at: datetime,
    after: datetime | None = None,
) -> list[tuple[int, Fact]]:
    """(seq, winner) of every slot of the user at valid time `valid_at` as known at `known_at`.

    With `after`, only winners that became true at or after it. Superseded facts are included:
    this is what was true then, not what is current."""
    rows = db.execute(f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ?", (tenant, user))
    slots: dict[str, list[Fact]] = {}
    for r in rows:
        fact = row_fact(r)[1]
        multi = fact.key in policy.multi_valued
        slots.setdefault(slot_of(fact.key, fact.value, multi=multi), []).append(fact)
    out = []
    for facts in slots.values():
        best = rules.winner(facts, valid_at=valid_at, known_at=known_at)
        if best is not None and best.seq is not None and (after is None or best.valid_from >= after):
            out.append((best.seq, best))
    return sorted(out, key=lambda item: item[0])
