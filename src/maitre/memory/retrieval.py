"""Hybrid retrieval: lexical terms, reciprocal rank fusion and the relevance gate.

Two rankers look at a user's current facts: BM25 / Postgres full text (exact words: "dentist",
"Bengaluru", "peanuts") and dense cosine similarity (meaning: "where do I live" finds `city`).
Their scores are not comparable, so they are fused by rank with reciprocal rank fusion
(Cormack et al., 2009): score = sum over rankers of 1 / (K + rank), K = 60.

Fusion always returns something, but "what is my blood type?" should return nothing when the store
does not know (LongMemEval's abstention questions). A fact therefore qualifies only if it matched a
query word, or its cosine similarity reaches `min_similarity`. Lexical matches ignore a list of
stop words and chat filler ("my", "what", "remember"), so a shared "my" is not evidence.

`rank` runs both rankers inside the caller's read transaction. Without native vectors (pgvector)
the dense ranker searches the user's matrix in the process's `VectorCache` (`dense_search`): when
the user's version counter says another writer changed it, only the changed rows are read (the
vector log), and a process without the matrix starts from its memory-mapped snapshot.

Search over episodes and facts together, with weighted fusion and abstention, is
`maitre.memory.search` (`MemoryStore.search`); this module's `fuse` is `retrieve`'s fact fusion.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .backend import Backend, Db
from .vectors import VectorCache, VectorSnapshots, parse_log

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "CANDIDATES",
    "RRF_K",
    "Ranked",
    "SNAPSHOT_MIN_ROWS",
    "dense_search",
    "fact_dense_search",
    "fuse",
    "query_terms",
    "rank",
]

log = logging.getLogger(__name__)

RRF_K = 60
CANDIDATES = 50
"""How many candidates each ranker hands to fusion."""

_STOP_WORDS = """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves ok okay please tell know remember remind recall anything
    something thing things again also get got go going want wanted like need use used one ever still
    currently current right whats what's i'm im ive i've id i'd dont don't does doesn't"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(query: str, *, limit: int = 16) -> list[str]:
    """Distinct lower-case words of the query without stop words, in order, at most `limit`."""
    seen: list[str] = []
    for word in _WORD.findall(query.lower()):
        if word in _STOP or word in seen or (len(word) < 2 and not word.isdigit()):
            continue
        seen.append(word)
        if len(seen) == limit:
            break
    return seen


@dataclass(kw_only=True)
class Ranked:
    """One fused candidate."""

    seq: int
    """Row id of the fact."""
    score: float
    """RRF score."""
    similarity: float | None
    """Cosine similarity, if a dense candidate."""
    lexical: bool
    """Matched a query word."""


def fuse(
    lexical: list[int],
    dense: list[tuple[int, float]],
    *,
    k: int,
    min_similarity: float,
) -> list[Ranked]:
    """Fuse a lexical ranking (seqs, best first) and a dense one ((seq, cosine), best first).

    Keeps a candidate if it matched lexically or its cosine reaches `min_similarity`; returns the
    top `k` by RRF score (ties broken by similarity, then seq for determinism).
    """
    out: dict[int, Ranked] = {}
    for rank, seq in enumerate(lexical):
        out[seq] = Ranked(seq=seq, score=1.0 / (RRF_K + rank + 1), similarity=None, lexical=True)
    for rank, (seq, sim) in enumerate(dense):
        item = out.get(seq)
        if item is None:
            if sim < min_similarity:
                continue
            out[seq] = Ranked(seq=seq, score=1.0 / (RRF_K + rank + 1), similarity=sim, lexical=False)
        else:
            item.score += 1.0 / (RRF_K + rank + 1)
            item.similarity = sim
    ranked = sorted(out.values(), key=lambda r: (-r.score, -(r.similarity or 0.0), r.seq))
    return ranked[:k]


def rank(
    db: Db,
    backend: Backend,
    cache: VectorCache,
    *,
    tenant: str,
    user: str,
    terms: list[str],
    query_vector: NDArray[np.float32],
    scope: str,
    version: int,
    dim: int,
    k: int,
    min_similarity: float,
    snapshots: VectorSnapshots | None = None,
) -> list[Ranked]:
    """The user's current facts for a query, fused from both rankers (see `fuse`).

    `version` is the user's version counter read by the caller and `scope` the cache key of
    (tenant, user); both matter only without native vectors.
    """
    lexical = backend.lexical(db, tenant, user, terms, CANDIDATES)
    if not query_vector.any():  # a words-only embedder (LexicalOnlyEmbedder): no meaning to rank by
        dense = []
    elif backend.native_vectors:
        dense = backend.dense(db, tenant, user, query_vector, CANDIDATES)
    else:
        dense = fact_dense_search(
            db, backend, cache, tenant, user, query_vector, scope, version, dim, snapshots
        )
    return fuse(lexical, dense, k=k, min_similarity=min_similarity)


def fact_dense_search(
    db: Db,
    backend: Backend,
    cache: VectorCache,
    tenant: str,
    user: str,
    qvec: NDArray[np.float32],
    scope: str,
    version: int,
    dim: int,
    snapshots: VectorSnapshots | None = None,
    *,
    limit: int = CANDIDATES,
) -> list[tuple[int, float]]:
    """`dense_search` over the user's current facts (their vectors are the backend's index)."""
    return dense_search(
        db,
        cache,
        snapshots,
        kind="f",
        backend_kind=backend.kind,
        tenant=tenant,
        user=user,
        scope=scope,
        version=version,
        dim=dim,
        query=qvec,
        limit=limit,
        load_all=lambda: backend.load_vectors(db, tenant, user, dim),
    )


SNAPSHOT_MIN_ROWS = 2048
"""A scope with at least this many vectors gets a memory-mapped snapshot file (when a directory is set)."""


def _vectors_by_seq(db: Db, backend_kind: str, kind: str, seqs: list[int]) -> list[tuple[int, bytes]]:
    """The stored float32 blobs of some rows: facts' in the vector index, episodes' in their table."""
    if kind in ("e", "w"):
        table, column = "memory_episodes", "vec" if kind == "e" else "wvec"
    elif backend_kind == "postgres":
        table, column = "memory_index", "emb"
    else:
        table, column = "memory_vectors", "vec"
    out: list[tuple[int, bytes]] = []
    for start in range(0, len(seqs), 500):
        chunk = seqs[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        out += [
            (int(r[0]), bytes(r[1]))
            for r in db.execute(f"SELECT seq, {column} FROM {table} WHERE seq IN ({marks})", chunk)
        ]
    return out


def dense_search(
    db: Db,
    cache: VectorCache,
    snapshots: VectorSnapshots | None,
    *,
    kind: str,
    backend_kind: str,
    tenant: str,
    user: str,
    scope: str,
    version: int,
    dim: int,
    query: NDArray[np.float32],
    limit: int,
    load_all: Callable[[], tuple[list[int], list[bytes]]],
    allowed: set[int] | None = None,
) -> list[tuple[int, float]]:
    """Top (seq, cosine) of one scope's vectors, exactly, in numpy: `kind` `f` facts, `e` episodes'
    turns, `w` episodes' windows (the turn before and the turn).

    The scope's matrix comes from, in order of preference: this process's cache at `version`; the
    cache (or the memory-mapped snapshot file) at an older version brought up to date from the
    vector log, reading only the rows changed since (`parse_log`); or a full load of every BLOB
    (after which a large scope's snapshot is written, so the next process starts from it)."""
    hits = cache.search(scope, version, query, limit, allowed)
    if hits is not None:
        return hits
    cached = cache.version_of(scope)
    if (cached is None or cached > version) and snapshots is not None:
        snap = snapshots.load(scope, dim)
        if snap is not None and snap[0] <= version:
            cache.put(scope, snap[0], snap[1], snap[2])
            cached = cache.version_of(scope)
    changed = 0
    if cached is not None and cached < version:
        log_rows = db.execute(
            "SELECT version, added, removed FROM memory_vector_log WHERE tenant = ? AND user_id = ? "
            "AND version > ? AND version <= ?",
            (tenant, user, cached, version),
        )
        delta = parse_log(log_rows, cached, version, "e" if kind == "w" else kind)
        if delta is not None:
            added, removed = delta
            changed_rows = _vectors_by_seq(db, backend_kind, kind, added)
            vectors = [
                (seq, np.frombuffer(blob, dtype="<f4", count=dim).astype(np.float32))
                for seq, blob in changed_rows
            ]
            cache.apply(scope, cached, version, vectors, removed)
            changed = len(added) + len(removed)
    hits = cache.search(scope, version, query, limit, allowed)
    if hits is not None:
        if snapshots is not None and changed > SNAPSHOT_MIN_ROWS // 2:
            _save_snapshot(db, cache, snapshots, scope, kind, tenant, user)
        return hits
    seqs, blobs = load_all()
    matrix = (
        np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float32)
        if blobs
        else np.zeros((0, dim), dtype=np.float32)
    )
    cache.put(scope, version, np.asarray(seqs, dtype=np.int64), matrix)
    hits = cache.search(scope, version, query, limit, allowed)
    if hits is None:  # too large to cache: search the loaded matrix directly
        sims = np.einsum("ij,j->i", matrix, query) if len(seqs) else np.zeros(0, dtype=np.float32)
        order = np.argsort(-sims, kind="stable")
        hits = [(int(seqs[i]), float(sims[i])) for i in order if allowed is None or int(seqs[i]) in allowed][
            :limit
        ]
    elif snapshots is not None and len(seqs) >= SNAPSHOT_MIN_ROWS:
        _save_snapshot(db, cache, snapshots, scope, kind, tenant, user)
    return hits


def _save_snapshot(
    db: Db, cache: VectorCache, snapshots: VectorSnapshots, scope: str, kind: str, tenant: str, user: str
) -> None:
    rows = cache.rows(scope)
    if rows is None:
        return
    version, seqs, matrix = rows
    try:
        snapshots.save(scope, version, seqs, matrix)
    except OSError as exc:  # a read-only or full disk costs speed, never an answer
        log.info("memory: could not write the vector snapshot: %s", exc)
        return
    # A deletion that committed after `version` may have zeroed the old file before this rename:
    # zero its rows here (see VectorSnapshots).
    later = db.execute(
        "SELECT version, added, removed FROM memory_vector_log WHERE tenant = ? AND user_id = ? AND version > ?",
        (tenant, user, version),
    )
    token = "e" if kind == "w" else kind
    gone = [int(t[1:]) for r in later for t in str(r[2]).split() if t[0] == token]
    snapshots.zero(scope, gone)
