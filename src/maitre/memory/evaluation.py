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
  never on the held-out one, for the goal itself: never worse than the best single ranker on any
  conversation of the split, then the best mean recall; a weight of 1.0 on one ranker is not in
  the grid.
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
    lexical_shares: Sequence[float] = (0.1, 0.2, 0.3, 0.4),
    dense_shares: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
    offsets: Sequence[float] = (5.0, 10.0, 30.0, 60.0),
    tenant: str = "eval",
) -> tuple[Fusion, float]:
    """The weights and RRF offset chosen on `conversations` (the development split), and its recall.

    The goal is a fusion never worse than its best single ranker, so that is what is chosen for:
    first the largest worst-case margin over the conversations of the split (fused recall@5 minus
    the better of lexical-only and dense-only, per conversation, counted only when negative), then
    the best mean recall@5. The lexical and the dense weight are strictly between 0 and 1; the
    window ranker takes the rest (possibly 0). Ties go to the earlier grid point."""
    base = base or Fusion()
    singles = []
    for conv in conversations:
        lexical = evaluate(store, [conv], only_lexical(base), tenant=tenant).recall
        dense = evaluate(store, [conv], only_dense(base), tenant=tenant).recall
        singles.append(max(lexical, dense))
    best: tuple[Fusion, tuple[float, float]] | None = None
    for lexical_w in lexical_shares:
        for dense_w in dense_shares:
            window = round(1.0 - lexical_w - dense_w, 6)
            if not (0.0 < lexical_w < 1.0 and 0.0 < dense_w < 1.0) or window < -1e-9:
                continue
            for offset in offsets:
                candidate = replace(base, lexical=lexical_w, dense=dense_w, window=max(window, 0.0), k=offset)
                per_conv = [
                    evaluate(store, [conv], candidate, tenant=tenant).recall for conv in conversations
                ]
                margin = min(0.0, min(f - s for f, s in zip(per_conv, singles, strict=True)))
                score = (round(margin, 9), round(sum(per_conv) / len(per_conv), 9))
                if best is None or score > best[1]:
                    best = (candidate, score)
    assert best is not None
    return best[0], evaluate(store, conversations, best[0], tenant=tenant).recall


def choose_abstention(
    store: MemoryStore,
    conversations: Sequence[Conversation],
    fusion: Fusion,
    *,
    cosines: Sequence[float] = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    coverages: Sequence[float] = (0.5, 0.67, 0.75, 1.01),
    min_answer_rate: float = 0.85,
    tenant: str = "eval",
) -> tuple[Fusion, Scores]:
    """The abstention thresholds chosen on `conversations`: the most unanswerable questions
    answered with nothing while at least `min_answer_rate` of the answerable ones still get results
    (a missed answer costs more than a needless one), then the higher answer rate."""
    best: tuple[Fusion, Scores, tuple[float, float]] | None = None
    for cos in cosines:
        for cov in coverages:
            candidate = replace(fusion, min_cosine=cos, min_coverage=cov)
            scores = evaluate(store, conversations, candidate, tenant=tenant, abstain=True)
            if scores.answer_rate < min_answer_rate:
                continue
            key = (scores.abstain_recall, scores.answer_rate)
            if best is None or key > best[2]:
                best = (candidate, scores, key)
    if best is None:
        return fusion, evaluate(store, conversations, fusion, tenant=tenant, abstain=True)
    return best[0], best[1]
