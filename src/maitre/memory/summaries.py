"""Summaries: texts derived from a user's facts, stored with their lineage.

A summary (a model-written session summary, say) is only as forgettable as its lineage: every fact
it was built from is recorded in `memory_summary_sources`, and `maitre.memory.forget` deletes the
summary with any of them, because a summary cannot be trusted to have forgotten what it was built
from. So a summary must name at least one source, and only facts of the same user. The profile is
the one summary the store builds itself (`maitre.memory.profile`); these work inside the caller's
transaction.
"""

from __future__ import annotations

from ..exceptions import UserError
from .backend import Db
from .model import Summary, from_micros
from .rows import chunks

__all__ = ["load_summaries", "store_summary"]


def store_summary(db: Db, summary: Summary, *, created_us: int) -> None:
    """Insert a summary and its lineage; a `UserError` if a source is not one of the user's facts."""
    tenant, user = summary.tenant, summary.user
    known = set()
    for chunk in chunks(summary.sources):
        marks = ", ".join("?" * len(chunk))
        known |= {
            r[0]
            for r in db.execute(
                f"SELECT id FROM memory_facts WHERE tenant = ? AND user_id = ? AND id IN ({marks})",
                (tenant, user, *chunk),
            )
        }
    missing = [s for s in summary.sources if s not in known]
    if missing or not summary.sources:
        raise UserError(f"A summary must be built from this user's facts; unknown fact ids: {missing}.")
    db.execute(
        "INSERT INTO memory_summaries (id, tenant, user_id, kind, text, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (summary.id, tenant, user, summary.kind, summary.text, created_us),
    )
    db.executemany(
        "INSERT INTO memory_summary_sources (tenant, user_id, summary_id, fact_id) VALUES (?, ?, ?, ?)",
        [(tenant, user, summary.id, s) for s in summary.sources],
    )


def load_summaries(db: Db, tenant: str, user: str) -> list[Summary]:
    """Every stored summary of the user (the profile included), oldest first, with its lineage."""
    rows = db.execute(
        "SELECT id, kind, text, created_at FROM memory_summaries WHERE tenant = ? AND user_id = ? "
        "ORDER BY created_at, id",
        (tenant, user),
    )
    links = db.execute(
        "SELECT summary_id, fact_id FROM memory_summary_sources WHERE tenant = ? AND user_id = ?",
        (tenant, user),
    )
    sources: dict[str, list[str]] = {}
    for sid, fid in links:
        sources.setdefault(sid, []).append(fid)
    return [
        Summary(
            id=r[0],
            tenant=tenant,
            user=user,
            kind=r[1],
            text=r[2],
            sources=sorted(sources.get(r[0], [])),
            created_at=from_micros(r[3]),
        )
        for r in rows
    ]
