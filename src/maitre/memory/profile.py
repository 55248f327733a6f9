"""The profile: a small, deterministic text loaded at the start of every session (seed 000).

One `key: value` line per designated key (`MemoryPolicy.profile_keys`, in that order; the values of
a multi-valued key are joined), current facts only, cut at whole lines to `profile_max_tokens`
cl100k tokens. It is materialised as a summary with lineage (`memory_summary_sources`): the write
that changes a profile key and the deletion of any fact it was built from rebuild it in the same
transaction, so a forgotten value can never survive in the profile.
"""

from __future__ import annotations

from ..tokens import count_tokens
from .backend import Db
from .model import Fact, MemoryPolicy, Profile
from .rows import COLS, row_fact

__all__ = ["PROFILE_ID", "profile_facts", "profile_text", "read_profile", "rebuild_profile"]

#: Summary id (and kind) of the profile.
PROFILE_ID = "profile"


def profile_facts(db: Db, tenant: str, user: str, policy: MemoryPolicy) -> list[Fact]:
    """The user's current facts under profile keys, in policy order."""
    keys = list(policy.profile_keys)
    if not keys:
        return []
    marks = ", ".join("?" * len(keys))
    rows = db.execute(
        f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND status = 'current' "
        f"AND retracted = 0 AND key IN ({marks}) ORDER BY valid_from, seq",
        (tenant, user, *keys),
    )
    order = {k: i for i, k in enumerate(keys)}
    return sorted((row_fact(r)[1] for r in rows), key=lambda f: order[f.key])


def profile_text(facts: list[Fact], policy: MemoryPolicy) -> tuple[str, list[Fact]]:
    """The profile text and the facts it actually uses (after the token cap)."""
    lines: list[str] = []
    used: list[Fact] = []
    grouped: dict[str, list[Fact]] = {}
    for f in facts:
        grouped.setdefault(f.key, []).append(f)
    budget = policy.profile_max_tokens
    for key, group in grouped.items():
        line = f"{key.replace('_', ' ')}: {', '.join(f.value for f in group)}"
        cost = count_tokens(line + "\n")
        if cost > budget:
            break
        budget -= cost
        lines.append(line)
        used += group
    return "\n".join(lines), used


def rebuild_profile(db: Db, tenant: str, user: str, policy: MemoryPolicy, now_us: int) -> None:
    """Replace the stored profile and its lineage from the current facts (inside the caller's transaction)."""
    text, used = profile_text(profile_facts(db, tenant, user, policy), policy)
    db.execute(
        "DELETE FROM memory_summary_sources WHERE tenant = ? AND user_id = ? AND summary_id = ?",
        (tenant, user, PROFILE_ID),
    )
    db.execute(
        "DELETE FROM memory_summaries WHERE tenant = ? AND user_id = ? AND id = ?", (tenant, user, PROFILE_ID)
    )
    if not used:
        return
    db.execute(
        "INSERT INTO memory_summaries (id, tenant, user_id, kind, text, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (PROFILE_ID, tenant, user, "profile", text, now_us),
    )
    db.executemany(
        "INSERT INTO memory_summary_sources (tenant, user_id, summary_id, fact_id) VALUES (?, ?, ?, ?)",
        [(tenant, user, PROFILE_ID, f.id) for f in used],
    )


def read_profile(db: Db, tenant: str, user: str, policy: MemoryPolicy) -> Profile:
    """The stored profile text (or, if none is stored yet, the text the current facts make) and its facts."""
    rows = db.execute(
        "SELECT text FROM memory_summaries WHERE tenant = ? AND user_id = ? AND id = ?",
        (tenant, user, PROFILE_ID),
    )
    facts = profile_facts(db, tenant, user, policy)
    text = rows[0][0] if rows else profile_text(facts, policy)[0]
    return Profile(text=text, facts=facts, tokens=count_tokens(text) if text else 0)
