"""Deletion that reaches every copy, in the caller's single transaction (seed 000, question 4).

`erase` removes, for one user (a key, one value of it, or everything):

1. every fact row, current and superseded: the history *is* the text, so it goes too;
2. their entries in the lexical index (FTS5 / tsvector) and the vector index;
3. every summary built from any of them, found through lineage (`memory_summary_sources`);
   the profile is rebuilt from what remains instead of being dropped;
4. the episodes (raw conversation turns) the facts were extracted from, and every episode of the
   user whose text holds a forgotten value as a whole word (`maitre.memory.episodes`): the raw text
   is a copy of the value too; forgetting everything forgets every episode;
5. and it writes one tombstone per distinct forgotten value: an HMAC of (tenant, user, canonical key,
   folded value; `maitre.memory.identity`), never the text, which the write path checks so the same
   fact cannot be extracted again or come back with a replayed import, however it is spelled.

A value to forget matches a stored value when the two are the same fact by either identity: the
slot's (`normalise_value`) or the tombstone's (`value_identity`: "Zorblux\u200bville" finds
"Zorbluxville").

Then `backend.purge` drops index remnants inside the same transaction (FTS5 keeps tokens of deleted
rows in old segments until they are merged); the store runs `backend.after_delete` after commit
(which schedules a background WAL checkpoint for SQLite and a background VACUUM ANALYZE for
Postgres: neither waits for readers, see the backends).

Forgetting the *current* value of a single-valued key while older values remain would make the
next-older value current again: the stale-address bug seed 000 opens with. A textless retraction
takes the forgotten fact's place in the conflict order instead, so the key simply has no value.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from .backend import Backend, Db
from .episodes import EpisodeDigests, delete_episodes, episodes_holding, episodes_linked
from .identity import value_identity
from .model import DeleteReport, Fact, MemoryPolicy, Status, fact_text, from_micros, normalise_value
from .profile import PROFILE_ID, rebuild_profile
from .rows import COLS, add_tombstones, bump_version, chunks, insert_fact, row_fact

__all__ = ["erase"]


def erase(
    db: Db,
    backend: Backend,
    *,
    tenant: str,
    user: str,
    key: str | None,
    value: str | None,
    policy: MemoryPolicy,
    digest: Callable[[Fact], list[str]],
    now_us: int,
    ids: Sequence[str] | None = None,
    episode_digest: EpisodeDigests | None = None,
) -> DeleteReport:
    """Forget `key` (or one `value` of it, or everything when `key` is None) for one user.

    With `ids`, only the facts with those ids (and `key` is ignored): forgetting an episode
    forgets the facts extracted from it. `episode_digest` gives the tombstones each forgotten
    episode leaves (so a replayed conversation cannot store it back)."""
    by_ids = ids is not None
    if ids is not None:
        rows = []
        for chunk in chunks(list(ids)):
            rows += db.execute(
                f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? "
                f"AND id IN ({', '.join('?' * len(chunk))})",
                (tenant, user, *chunk),
            )
        key = ""
    elif key is None:
        rows = db.execute(f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ?", (tenant, user))
    else:
        rows = db.execute(
            f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ?",
            (tenant, user, key),
        )
    found = [row_fact(r) for r in rows]
    if value is not None:
        norm, ident = normalise_value(value), value_identity(value)
        found = [
            (s, f) for s, f in found if normalise_value(f.value) == norm or value_identity(f.value) == ident
        ]
    if key is None:
        episode_seqs = {
            int(r[0])
            for r in db.execute(
                "SELECT seq FROM memory_episodes WHERE tenant = ? AND user_id = ?", (tenant, user)
            )
        }
    else:
        values = sorted({f.value for _, f in found if not f.retracted and f.value})
        if value is not None:
            values = sorted({*values, value})
        episode_seqs = episodes_linked(db, tenant, user, [f.id for _, f in found]) | episodes_holding(
            db, tenant, user, values
        )
    removed_episodes = delete_episodes(
        db, backend.kind, tenant, user, sorted(episode_seqs), tombstones=episode_digest, now_us=now_us
    )
    if not found:
        if removed_episodes:
            bump_version(db, tenant, user, removed=[f"e{s}" for s in sorted(episode_seqs)])
        return DeleteReport(episodes=len(removed_episodes))
    if key is None:
        db.execute("DELETE FROM memory_episode_facts WHERE tenant = ? AND user_id = ?", (tenant, user))
    indexed = [(s, f) for s, f in found if f.status == Status.CURRENT and not f.retracted]
    backend.unindex(db, [(s, tenant, user, fact_text(f.key, f.value)) for s, f in indexed])
    digests = sorted({digest(f)[0] for _, f in found if not f.retracted and f.value})
    add_tombstones(db, digests, now_us)
    ids = [f.id for _, f in found]
    summary_ids: set[str] = set()
    for chunk in chunks(ids):
        marks = ", ".join("?" * len(chunk))
        summary_ids |= {
            r[0]
            for r in db.execute(
                f"SELECT DISTINCT summary_id FROM memory_summary_sources WHERE tenant = ? AND user_id = ? "
                f"AND fact_id IN ({marks})",
                (tenant, user, *chunk),
            )
        }
    dropped = sorted(summary_ids - {PROFILE_ID})
    _drop_summaries(db, tenant, user, dropped)
    for chunk in chunks([s for s, _ in found]):
        db.execute(f"DELETE FROM memory_facts WHERE seq IN ({', '.join('?' * len(chunk))})", chunk)
    for chunk in chunks(ids):
        marks = ", ".join("?" * len(chunk))
        db.execute(f"UPDATE memory_facts SET superseded_by = NULL WHERE superseded_by IN ({marks})", chunk)
    if not by_ids and value is not None and key is not None and key not in policy.multi_valued:
        _hold_forgotten_slot(db, [f for _, f in found], now_us)
    for chunk in chunks([f.id for _, f in found]):
        marks = ", ".join("?" * len(chunk))
        db.execute(
            f"DELETE FROM memory_episode_facts WHERE tenant = ? AND user_id = ? AND fact_id IN ({marks})",
            (tenant, user, *chunk),
        )
    if PROFILE_ID in summary_ids:
        rebuild_profile(db, tenant, user, policy, now_us)
    if key is None:
        db.execute("DELETE FROM memory_summary_sources WHERE tenant = ? AND user_id = ?", (tenant, user))
        db.execute("DELETE FROM memory_summaries WHERE tenant = ? AND user_id = ?", (tenant, user))
    backend.purge(db)
    bump_version(
        db,
        tenant,
        user,
        removed=[f"f{s}" for s, _ in indexed] + [f"e{s}" for s in sorted(episode_seqs)],
    )
    return DeleteReport(
        facts=len(found),
        summaries_removed=len(dropped),
        profile_rebuilt=PROFILE_ID in summary_ids,
        tombstones=len(digests),
        episodes=len(removed_episodes),
    )


def _drop_summaries(db: Db, tenant: str, user: str, summary_ids: list[str]) -> None:
    for chunk in chunks(summary_ids):
        marks = ", ".join("?" * len(chunk))
        db.execute(
            f"DELETE FROM memory_summary_sources WHERE tenant = ? AND user_id = ? AND summary_id IN ({marks})",
            (tenant, user, *chunk),
        )
        db.execute(
            f"DELETE FROM memory_summaries WHERE tenant = ? AND user_id = ? AND id IN ({marks})",
            (tenant, user, *chunk),
        )


def _hold_forgotten_slot(db: Db, forgotten: list[Fact], now_us: int) -> None:
    """Keep older values of a single-valued key from reviving after its current value was forgotten."""
    current = next((f for f in forgotten if f.status == Status.CURRENT and not f.retracted), None)
    if current is None:
        return
    remaining = db.execute(
        "SELECT 1 FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ?",
        (current.tenant, current.user, current.key),
    )
    if not remaining:
        return
    hold = Fact(
        id=uuid.uuid4().hex,
        tenant=current.tenant,
        user=current.user,
        key=current.key,
        value="",
        valid_from=current.valid_from,
        recorded_at=from_micros(now_us),
        source="forget",
        origin=current.origin,
        status=Status.CURRENT,
        retracted=True,
    )
    insert_fact(db, hold, current.key)
