"""Row mapping and the few statements every part of the memory store shares (portable SQL, `?`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .backend import Db
from .model import Fact, Origin, Status, from_micros, to_micros

__all__ = [
    "COLS",
    "VECTOR_LOG_KEEP",
    "add_tombstones",
    "bump_version",
    "chunks",
    "facts_by_seq",
    "insert_fact",
    "row_fact",
    "slot_rows",
    "tombstoned",
]

#: The columns of `memory_facts` that make a `Fact`, in `row_fact` order.
COLS = (
    "seq, id, tenant, user_id, key, value, valid_from, recorded_at, source, origin, status, "
    "superseded_by, superseded_at, retracted"
)


def row_fact(row: Sequence[Any]) -> tuple[int, Fact]:
    """(seq, Fact) from a row selected with `COLS`."""
    return row[0], Fact(
        id=row[1],
        tenant=row[2],
        user=row[3],
        key=row[4],
        value=row[5],
        valid_from=from_micros(row[6]),
        recorded_at=from_micros(row[7]),
        source=row[8],
        origin=Origin(row[9]),
        status=Status(row[10]),
        superseded_by=row[11],
        superseded_at=from_micros(row[12]) if row[12] is not None else None,
        retracted=bool(row[13]),
        seq=row[0],
    )


def chunks(items: Sequence[Any], size: int = 500) -> Iterable[Sequence[Any]]:
    """Slices of at most `size` items (bounded `IN (...)` lists)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def insert_fact(db: Db, fact: Fact, slot: str) -> int:
    """Insert a fact row; returns its seq."""
    rows = db.execute(
        "INSERT INTO memory_facts (id, tenant, user_id, key, slot, value, valid_from, recorded_at, source, "
        "origin, status, superseded_by, superseded_at, retracted) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        (
            fact.id,
            fact.tenant,
            fact.user,
            fact.key,
            slot,
            fact.value,
            to_micros(fact.valid_from),
            to_micros(fact.recorded_at),
            fact.source,
            str(fact.origin),
            str(fact.status),
            fact.superseded_by,
            to_micros(fact.superseded_at) if fact.superseded_at else None,
            int(fact.retracted),
        ),
    )
    return int(rows[0][0])


def slot_rows(db: Db, tenant: str, user: str, slot: str) -> list[tuple[int, Fact]]:
    """Every stored fact of one slot."""
    rows = db.execute(
        f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND slot = ?",
        (tenant, user, slot),
    )
    return [row_fact(r) for r in rows]


def tombstoned(db: Db, digest: str | Sequence[str]) -> bool:
    """Whether a tombstone with this digest (or any of these digests) exists."""
    digests = [digest] if isinstance(digest, str) else list(digest)
    if not digests:
        return False
    marks = ", ".join("?" * len(digests))
    return bool(db.execute(f"SELECT 1 FROM memory_tombstones WHERE digest IN ({marks})", digests))


def add_tombstones(db: Db, digests: Iterable[str], now_us: int) -> int:
    """Insert tombstones (digests only, never text); an existing one is kept. Returns how many were given."""
    unique = sorted(set(digests))
    for d in unique:
        db.execute(
            "INSERT INTO memory_tombstones (digest, created_at) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING",
            (d, now_us),
        )
    return len(unique)


VECTOR_LOG_KEEP = 4096
"""Versions of vector changes kept per user in `memory_vector_log`; a cache further behind reloads."""


def bump_version(
    db: Db,
    tenant: str,
    user: str,
    *,
    added: Sequence[str] = (),
    removed: Sequence[str] = (),
    reset: bool = False,
) -> int:
    """Increment the user's version counter (vector caches compare it); returns the new version.

    Every bump also logs which vector rows the transaction added and removed (`f<seq>` for a fact,
    `e<seq>` for an episode), so a cache in another process catches up by reading the few changed
    rows instead of the whole matrix (`maitre.memory.vectors.VectorLog`); `reset` says "reload
    everything" (a reindex)."""
    rows = db.execute(
        "INSERT INTO memory_versions (tenant, user_id, version) VALUES (?, ?, 1) "
        "ON CONFLICT (tenant, user_id) DO UPDATE SET version = memory_versions.version + 1 RETURNING version",
        (tenant, user),
    )
    version = int(rows[0][0])
    db.execute(
        "INSERT INTO memory_vector_log (tenant, user_id, version, added, removed) VALUES (?, ?, ?, ?, ?)",
        (tenant, user, version, "*" if reset else " ".join(added), " ".join(removed)),
    )
    if version % 256 == 0:  # keep the log bounded, in an occasional small delete
        db.execute(
            "DELETE FROM memory_vector_log WHERE tenant = ? AND user_id = ? AND version <= ?",
            (tenant, user, version - VECTOR_LOG_KEEP),
        )
    return version


def facts_by_seq(
    db: Db, seqs: list[int], *, tenant: str | None = None, user: str | None = None
) -> dict[int, Fact]:
    """The *current* facts among `seqs`, by seq (only the user's, when `tenant` and `user` are given:
    a seq handed over by a cache or a snapshot file is checked against the rows, not trusted)."""
    out: dict[int, Fact] = {}
    scoped = tenant is not None and user is not None
    where = " AND tenant = ? AND user_id = ?" if scoped else ""
    for chunk in chunks(seqs):
        marks = ", ".join("?" * len(chunk))
        params = (*chunk, tenant, user) if scoped else tuple(chunk)
        for r in db.execute(
            f"SELECT {COLS} FROM memory_facts WHERE seq IN ({marks}) AND status = 'current'{where}", params
        ):
            seq, fact = row_fact(r)
            out[seq] = fact
    return out
