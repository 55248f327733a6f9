"""Search over episodes and facts: weighted rank fusion, abstention and time.

`MemoryStore.search` ranks a user's episodes (what was said) and facts (what the store concluded)
with two rankers each, full text (BM25 / `ts_rank_cd`) and embedding cosine, and fuses the four
rankings by rank, never by score (the scores of different rankers are not comparable):

    score(item) = sum over rankers r of  w_r / (k + rank_r(item))

(reciprocal rank fusion, Cormack et al. 2009, with weights). The plain RRF the store used for facts
(equal weights, k = 60) lost to its own lexical ranker on conversational text (issue 16): with
k = 60 the first and the tenth place of a ranker differ by 13 %, so one ranker's strong agreement
with the query counts little against the other's noise. `Fusion`'s defaults were chosen on the
development split of our own evaluation set (`benchmarks/data/memory/dev.jsonl`, by
`maitre.memory.evaluation.choose_fusion` and `choose_abstention`; `benchmarks/memory_bench.py
--tune` reruns the search), and are reported on the held-out split beside the lexical and the dense
ranker alone. On that conversational text the words of a question are rarely the words of its
answer ("what instrument does Hana play?" / "I've started learning the cello"), so the lexical
ranker is weak and gets a small weight (0.1 against 0.5 + 0.4 for the embeddings): with k = 5 its
first places still lift a turn that says the very word asked about.

Episodes have a second embedding ranker: each episode is also embedded with the turn before it
(its *window*), which finds an answer by its question ("Which school is it again?" / "Hollybrook
Primary, near the harbour"); the turn's own vector keeps the turn itself first.

*Abstention.* A question the memory cannot answer ("what is my blood type?") must get nothing, not
the five least unrelated turns. Before fusing, the query is judged answerable only if the best
dense candidate's cosine reaches `Fusion.min_cosine`, or the best lexical candidate holds at least
`Fusion.min_coverage` of the query's content words (crudely stemmed, so "moved" finds "moving").
Both thresholds were chosen on the development split too.

*Time.* `before` / `after` keep the episodes said in that range and the facts that became true in
it; `as_of` (or `valid_at`) asks about a moment: episodes said up to it, and the facts that were
true then (`maitre.memory.reads.values_at`: superseded ones included, which the current-facts
indexes no longer hold, so those few are ranked here, re-embedded when they have no stored vector).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .retrieval import CANDIDATES

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "Candidates",
    "Fusion",
    "answerable",
    "coverage",
    "fuse_weighted",
    "rank_texts",
]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True, kw_only=True)
class Fusion:
    """Weights of the rank fusion and thresholds of abstention (see the module's docstring)."""

    lexical: float = 0.1
    """Weight of the full-text rankers."""
    dense: float = 0.5
    """Weight of the embedding rankers (one vector per turn, per fact)."""
    window: float = 0.4
    """Weight of the episodes' window ranker (embedding of the turn before and the turn)."""
    k: float = 5.0
    """RRF's rank offset: small values let the first places of a ranker count more."""
    facts: float = 1.0
    """Multiplier of the fact rankers against the episode rankers."""
    min_cosine: float = 0.3
    """Abstain unless some candidate is at least this similar to the query..."""
    min_coverage: float = 0.5
    """... or some lexical candidate holds this share of the query's content words."""
    candidates: int = CANDIDATES
    """How many candidates each ranker hands to fusion."""

    def __post_init__(self) -> None:
        weights = {"lexical": self.lexical, "dense": self.dense, "window": self.window, "facts": self.facts}
        for name, weight in weights.items():
            if not weight >= 0.0:  # also refuses NaN
                raise ValueError(f"Fusion.{name} must be a weight >= 0, not {weight!r}")
        if not self.k > 0.0:
            raise ValueError(f"Fusion.k must be > 0 (it divides: w / (k + rank)), not {self.k!r}")
        if self.candidates < 1:
            raise ValueError(f"Fusion.candidates must be at least 1, not {self.candidates!r}")


@dataclass(kw_only=True)
class Candidates:
    """What the rankers of one source (episodes or facts) found, best first."""

    lexical: list[int]
    """Seqs from the full-text ranker."""
    dense: list[tuple[int, float]]
    """(seq, cosine) from the embedding ranker."""
    window: list[tuple[int, float]] = field(default_factory=list)
    """(seq, cosine) from the embedding ranker over windows (episodes: the turn before and the turn)."""
    texts: dict[int, str]
    """The indexed text of the lexical candidates (for the coverage test)."""


_SUFFIXES = ("ing", "ed", "es", "s", "e")


def _stem(word: str) -> str:
    """A crude stem for the coverage test: one common suffix off, then at most five letters
    ("moved", "moving", "move" -> "mov"; "types", "type" -> "typ")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:5]


def coverage(terms: Sequence[str], text: str) -> float:
    """Share of `terms` found in `text` (words compared by `_stem`)."""
    if not terms:
        return 0.0
    words = {_stem(w) for w in _WORD.findall(text.lower())}
    return sum(1 for t in terms if _stem(t.lower()) in words) / len(terms)


def answerable(terms: Sequence[str], sources: Sequence[Candidates], fusion: Fusion) -> bool:
    """Whether the evidence is strong enough to answer at all (abstention when not)."""
    best_cos = max((sim for c in sources for _, sim in [*c.dense[:1], *c.window[:1]]), default=-1.0)
    if best_cos >= fusion.min_cosine:
        return True
    best_cov = max(
        (coverage(terms, c.texts.get(seq, "")) for c in sources for seq in c.lexical[:10]), default=0.0
    )
    return best_cov >= fusion.min_coverage


def fuse_weighted(
    sources: Sequence[tuple[str, Candidates, float]], *, fusion: Fusion, k: int
) -> list[tuple[str, int, float, float | None, bool]]:
    """Weighted RRF over every source's rankers: `(kind, seq, score, cosine, lexical)`, best first.

    `sources` are `(kind, candidates, weight)`; ties are broken by cosine, then kind and seq, so
    the order is deterministic."""
    scores: dict[tuple[str, int], list[float | None]] = {}
    lexical: set[tuple[str, int]] = set()
    for kind, cands, weight in sources:
        # A ranker weighted 0 contributes nothing, not even its candidates (so the ablations are pure).
        for rank, seq in enumerate(cands.lexical if weight * fusion.lexical > 0 else []):
            item = scores.setdefault((kind, seq), [0.0, None])
            item[0] = float(item[0] or 0.0) + weight * fusion.lexical / (fusion.k + rank + 1)
            lexical.add((kind, seq))
        for rank, (seq, sim) in enumerate(cands.dense if weight * fusion.dense > 0 else []):
            item = scores.setdefault((kind, seq), [0.0, None])
            item[0] = float(item[0] or 0.0) + weight * fusion.dense / (fusion.k + rank + 1)
            item[1] = sim
        for rank, (seq, sim) in enumerate(cands.window if weight * fusion.window > 0 else []):
            item = scores.setdefault((kind, seq), [0.0, None])
            item[0] = float(item[0] or 0.0) + weight * fusion.window / (fusion.k + rank + 1)
            item[1] = max(sim, item[1]) if item[1] is not None else sim
    ranked = sorted(
        scores.items(), key=lambda kv: (-float(kv[1][0] or 0.0), -(kv[1][1] or -1.0), kv[0][0], kv[0][1])
    )
    return [(kind, seq, float(v[0] or 0.0), v[1], (kind, seq) in lexical) for (kind, seq), v in ranked[:k]]


def rank_texts(
    terms: Sequence[str],
    query: NDArray[np.float32],
    items: Sequence[tuple[int, str]],
    vectors: Callable[[list[str]], NDArray[np.float32]],
) -> Candidates:
    """Both rankings of a small in-memory set (facts true at another moment): word coverage and cosine."""
    if not items:
        return Candidates(lexical=[], dense=[], texts={})
    texts = {seq: text for seq, text in items}
    lexical = sorted(
        (seq for seq, text in items if coverage(terms, text) > 0),
        key=lambda s: (-coverage(terms, texts[s]), s),
    )
    dense: list[tuple[int, float]] = []
    if query.any():
        matrix = vectors([text for _, text in items])
        sims = np.einsum("ij,j->i", matrix, query)
        order = np.argsort(-sims, kind="stable")[:CANDIDATES]
        dense = [(items[i][0], float(sims[i])) for i in order]
    return Candidates(lexical=lexical[:CANDIDATES], dense=dense, texts=texts)
