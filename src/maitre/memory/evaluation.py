"""Measuring `MemoryStore.search` on labelled conversations: recall@k, abstention, weight choice.

The sets are `benchmarks/data/memory/{dev,heldout}.jsonl` (see the README there): conversations
between two people stored as episodes in the owner's memory, and questions with the ids of the
turns that hold the answer (none for an unanswerable question, a `before` / `as_of` moment for a
temporal one). `benchmarks/memory_bench.py` reports these numbers; the tests use them on the
development split.

- *recall@k* of a question: the share of its evidence turns among the first k results, averaged
  over answerable questions (`recall_any` counts a question as found if any evidence turn is).
- *abstention*: with abstention on, `abstain_precision` is the share of empty answers that were for
  unanswerable questions, `abstain_recall` the share of unanswerable questions answered with
  nothing, and `answer_rate` the share of answerable questions that still got results.
- `choose_fusion` picks the fusion weights by grid search on one set (the development split),
  never on the held-out one; and a weight of 1.0 on a single ranker is not in the grid.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .model import Episode, to_datetime
from .search import Fusion
from .store import MemoryStore

__all__ = [
    "Conversation",
    "Scores",
    "choose_abstention",
    "choose_fusion",
    "evaluate",
    "ingest",
    "load_conversations",
    "only_dense",
    "only_embeddings",
    "only_lexical",
]


@dataclass(kw_only=True)
class Conversation:
    """One labelled conversation."""

    id: str
    owner: str
    turns: list[dict[str, Any]]
    questions: list[dict[str, Any]]


@dataclass(kw_only=True)
class Scores:
    """What one configuration scored on one set."""

    recall: float = 0.0
    recall_any: float = 0.0
    answerable: int = 0
    unanswerable: int = 0
    abstain_precision: float = 0.0
    abstain_recall: float = 0.0
    answer_rate: float = 0.0
    by_kind: dict[str, float] = field(default_factory=dict)


def load_conversations(path: str | Path) -> list[Conversation]:
    """The conversations of one JSONL set."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        turns = [{**t, "session": s["id"]} for s in doc["sessions"] for t in s["turns"]]
        out.append(Conversation(id=doc["id"], owner=doc["owner"], turns=turns, questions=doc["questions"]))
    return out


def ingest(store: MemoryStore, conversations: Iterable[Conversation], *, tenant: str = "eval") -> None:
    """Store every turn of every conversation as an episode of its owner (one tenant per set)."""
    for conv in conversations:
        episodes = [
            Episode(
                id=t["id"],
                tenant=tenant,
                user=conv.owner,
                speaker=t["speaker"],
                text=t["text"],
                at=to_datetime(t["at"], default=_EPOCH),
                session=t["session"],
                role="user",
                source=f"eval:{conv.id}",
            )
            for t in conv.turns
        ]
        store.add_episodes(conv.owner, episodes, tenant=tenant)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def only_lexical(fusion: Fusion) -> Fusion:
    """The lexical rankers alone (the ablation)."""
    return replace(fusion, lexical=1.0, dense=0.0, window=0.0)


def only_dense(fusion: Fusion) -> Fusion:
    """The embedding ranker of the turns alone (the ablation: one vector per turn, no window)."""
    return replace(fusion, lexical=0.0, dense=1.0, window=0.0)


def only_embeddings(fusion: Fusion) -> Fusion:
    """Both embedding rankers (turns and windows) without the lexical one."""
    return replace(fusion, lexical=0.0)


def evaluate(
    store: MemoryStore,
    conversations: Sequence[Conversation],
    fusion: Fusion,
    *,
    k: int = 5,
    tenant: str = "eval",
    abstain: bool = False,
) -> Scores:
    """Recall@k over answerable questions (and abstention figures when `abstain`)."""
    recalls: list[float] = []
    anys: list[float] = []
    kinds: dict[str, list[float]] = {}
    answered_unanswerable = abstained_unanswerable = abstained_answerable = answered_answerable = 0
    for conv in conversations:
        for q in conv.questions:
            hits = store.search(
                conv.owner,
                q["question"],
                k,
                tenant=tenant,
                facts=False,
                before=q.get("before"),
                as_of=q.get("as_of"),
                abstain=abstain,
                fusion=fusion,
            )
            evidence = set(q["evidence"])
            if not evidence:
                if hits:
                    answered_unanswerable += 1
                else:
                    abstained_unanswerable += 1
                continue
            if hits:
                answered_answerable += 1
            else:
                abstained_answerable += 1
            found = {h.id for h in hits} & evidence
            recalls.append(len(found) / len(evidence))
            anys.append(1.0 if found else 0.0)
            kinds.setdefault(q["kind"], []).append(len(found) / len(evidence))
    n_ans = len(recalls)
    n_un = answered_unanswerable + abstained_unanswerable
    abstained = abstained_unanswerable + abstained_answerable
    return Scores(
        recall=sum(recalls) / n_ans if n_ans else 0.0,
        recall_any=sum(anys) / n_ans if n_ans else 0.0,
        answerable=n_ans,
        unanswerable=n_un,
        abstain_precision=abstained_unanswerable / abstained if abstained else 0.0,
        abstain_recall=abstained_unanswerable / n_un if n_un else 0.0,
        answer_rate=answered_answerable / n_ans if n_ans else 0.0,
        by_kind={kind: sum(v) / len(v) for kind, v in sorted(kinds.items())},
    )


def choose_fusion(
    store: MemoryStore,
    conversations: Sequence[Conversation],
    *,
    base: Fusion | None = None,
    shares: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
    offsets: Sequence[float] = (5.0, 10.0, 30.0, 60.0),
    tenant: str = "eval",
) -> tuple[Fusion, float]:
    """The weights (lexical, dense, window; each at least the smallest share, summing to 1) and the
    RRF offset with the best recall@5 on `conversations`, and that recall.

    Ties go to the earlier grid point. No ranker gets weight 0 or 1: every one counts."""
    base = base or Fusion()
    best: tuple[Fusion, float] | None = None
    for lexical in shares:
        for dense in shares:
            window = round(1.0 - lexical - dense, 6)
            if window < min(shares) - 1e-9:
                continue
            for offset in offsets:
                candidate = replace(base, lexical=lexical, dense=dense, window=window, k=offset)
                score = evaluate(store, conversations, candidate, tenant=tenant).recall
                if best is None or score > best[1] + 1e-12:
                    best = (candidate, score)
    assert best is not None
    return best


def choose_abstention(
    store: MemoryStore,
    conversations: Sequence[Conversation],
    fusion: Fusion,
    *,
    cosines: Sequence[float] = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55),
    coverages: Sequence[float] = (0.5, 0.67, 0.75, 1.01),
    tenant: str = "eval",
) -> tuple[Fusion, Scores]:
    """The abstention thresholds that best balance abstaining on unanswerable questions and
    answering answerable ones (the mean of `abstain_recall` and `answer_rate`) on `conversations`."""
    best: tuple[Fusion, Scores, float] | None = None
    for cos in cosines:
        for cov in coverages:
            candidate = replace(fusion, min_cosine=cos, min_coverage=cov)
            scores = evaluate(store, conversations, candidate, tenant=tenant, abstain=True)
            balanced = (scores.abstain_recall + scores.answer_rate) / 2
            if best is None or balanced > best[2] + 1e-12:
                best = (candidate, scores, balanced)
    assert best is not None
    return best[0], best[1]
