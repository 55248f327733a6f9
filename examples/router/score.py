"""Seed 002's router question, scored: the keyword baseline beside maitre's `Router`.

Prints accuracy and cost (seed 002's asymmetric matrix: an under-call costs 10, an over-call 1 per
step) for each router on three sets:

- dev: the 90 requests the router is tuned on (`maitre/routing/data/dev_requests.jsonl`). The
  learned router is scored out-of-fold (each request by a model tuned without it); the keyword
  router has nothing to tune.
- seed002: seed 002's 18 questions (`seed002_heldout.jsonl`), held out from tuning.
- stress: 30 paraphrases written after tuning, that mostly avoid the cue phrases (`stress_heldout.jsonl`).

Each learned router is scored twice from the same probabilities: choosing the least expected cost
(what `Router.route` does) and choosing the most probable route ("argmax"), to show what the
asymmetric rule buys. Then seed 002's table, question by question, keyword beside learned.

Run it: `.venv/bin/python examples/router/score.py` (about 5 s; words only when maitre[embeddings]
is missing: the "by meaning" rows are then left out and the learned router in the table is by words).

The same 18 questions are also `maitre eval` routing cases (`questions.jsonl`), so a router is scored
the way an agent is - accuracy, cost, a route confusion matrix, thresholds, JSON/HTML, `compare`:

    maitre eval examples/router/questions.jsonl --router examples/router/score.py:make_router
    maitre eval examples/router/questions.jsonl --router keyword      # seed 002's baseline: 12/18
"""

from __future__ import annotations

import sys
from pathlib import Path

from maitre.embeddings import missing_embedding_packages
from maitre.routing import (
    Decision,
    KeywordRouter,
    LabelledRequest,
    Router,
    RoutingScore,
    dev_requests,
    load_requests,
    score_decisions,
)

HERE = Path(__file__).resolve().parent
SETS = ("dev", "seed002", "stress")


def cases(set_name: str) -> list[LabelledRequest]:
    return dev_requests() if set_name == "dev" else load_requests(HERE / f"{set_name}_heldout.jsonl")


def decisions(router: KeywordRouter | Router, set_name: str) -> list[Decision]:
    """The learned router on its own dev set is scored out-of-fold (by a model tuned without the
    request); every other score is a plain `route`."""
    if set_name == "dev" and isinstance(router, Router):
        return router.out_of_fold_decisions()
    return [router.route(c.request) for c in cases(set_name)]


def argmax(found: list[Decision]) -> list[Decision]:
    """The same probabilities, decided by the most probable route instead of the least expected cost."""
    return [Decision(request=d.request, label=d.most_probable) for d in found]


def make_router() -> Router:
    """The router `maitre eval --router examples/router/score.py:make_router` scores: the learned
    `Router` as shipped (tuned on the development set only; by meaning when maitre[embeddings] is
    installed, by words otherwise). Swap in your own examples, tools or cost matrix here."""
    return Router()


def learned_routers() -> list[tuple[str, Router]]:
    found: list[tuple[str, Router]] = []
    if not missing_embedding_packages():
        found.append(("learned, by meaning", Router()))
    found.append(("learned, by words", Router(embedder=None)))
    return found


def rows(learned: list[tuple[str, Router]]) -> list[tuple[str, str, RoutingScore]]:
    out: list[tuple[str, str, RoutingScore]] = []
    keyword = KeywordRouter()
    for set_name in SETS:
        out.append(
            ("keyword (seed 002)", set_name, score_decisions(cases(set_name), decisions(keyword, set_name)))
        )
    for name, router in learned:
        for set_name in SETS:
            found = decisions(router, set_name)
            out.append((name, set_name, score_decisions(cases(set_name), found)))
            out.append((name + ", argmax", set_name, score_decisions(cases(set_name), argmax(found))))
    return out


def main() -> int:
    learned = learned_routers()
    print(f"{'router':32} {'set':8} {'accuracy':>15} {'cost':>7} {'over':>5} {'under':>6}")
    for name, set_name, s in rows(learned):
        label = set_name + ("*" if set_name == "dev" and name.startswith("learned") else "")
        accuracy = f"{s.correct}/{s.total} {100 * s.accuracy:5.1f}%"
        print(f"{name:32} {label:8} {accuracy:>15} {s.cost:7.1f} {s.over_calls:5} {s.under_calls:6}")
    print(
        "* out-of-fold (5-fold). Cost: seed 002's matrix in every row (under-call 10, over-call 1 per step)."
    )
    print("  argmax: the same probabilities, choosing the most probable route instead of the cheapest.")
    print()
    keyword, (_, best) = KeywordRouter(), learned[0]
    print(f"{'question':46} {'truth':9} {'keyword':9} {'learned':9} p(C/R/A)")
    for case in cases("seed002"):
        k, d = keyword.route(case.request), best.route(case.request)
        p = "/".join(f"{d.probabilities[r]:.2f}" for r in d.probabilities)
        mark = "" if k.label == case.label else "  <- keyword wrong"
        print(f"{case.request:46} {case.label.value:9} {k.label.value:9} {d.label.value:9} {p}{mark}")
    for _, router in learned:
        router.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
