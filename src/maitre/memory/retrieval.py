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
the dense ranker searches the user's matrix in the process's `VectorCache`, loading it from the
stored BLOBs when the user's version counter says another writer changed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .backend import Backend, Db
from .vectors import VectorCache

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["CANDIDATES", "RRF_K", "Ranked", "fuse", "query_terms", "rank"]

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
        dense = _dense_cached(db, backend, cache, tenant, user, query_vector, scope, version, dim)
    return fuse(lexical, dense, k=k, min_similarity=min_similarity)


def _dense_cached(
    db: Db,
    backend: Backend,
    cache: VectorCache,
    tenant: str,
    user: str,
    qvec: NDArray[np.float32],
    scope: str,
    version: int,
    dim: int,
) -> list[tuple[int, float]]:
    hits = cache.search(scope, version, qvec, CANDIDATES)
    if hits is not None:
        return hits
    seqs, blobs = backend.load_vectors(db, tenant, user, dim)
    matrix = (
        np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float32)
        if blobs
        else np.zeros((0, dim), dtype=np.float32)
    )
    cache.put(scope, version, np.asarray(seqs, dtype=np.int64), matrix)
    hits = cache.search(scope, version, qvec, CANDIDATES)
    if hits is None:  # too large to cache: search the loaded matrix directly
        sims = np.einsum("ij,j->i", matrix, qvec)
        top = np.argsort(-sims)[:CANDIDATES]
        hits = [(int(seqs[i]), float(sims[i])) for i in top]
    return hits
