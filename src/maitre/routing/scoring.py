"""Score a router on labelled requests: accuracy, and cost under an asymmetric matrix.

Accuracy alone hides what seed 002 cares about: two routers at 12/18 can differ in whether their
six mistakes are cheap over-calls or silent under-calls. So every score carries the total cost,
the over- and under-call counts and the confusion matrix beside the accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .cost import SEED002_COSTS, CostMatrix
from .data import LabelledRequest
from .labels import ROUTES, Decision, Route
from .router import RequestRouter

__all__ = ["RoutingScore", "score", "score_decisions"]


@dataclass(frozen=True, kw_only=True)
class RoutingScore:
    """How a router did on a set of labelled requests."""

    total: int
    correct: int
    cost: float
    """Sum of `cost[true][chosen]`."""
    over_calls: int
    under_calls: int
    confusion: dict[Route, dict[Route, int]]
    """`confusion[true][chosen]`."""
    rows: list[tuple[LabelledRequest, Decision]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def mean_cost(self) -> float:
        return self.cost / self.total if self.total else 0.0

    def summary(self) -> str:
        """`12/18 = 66.7%, cost 42.0 (2.33 each), 2 over-calls, 4 under-calls`."""
        return (
            f"{self.correct}/{self.total} = {100 * self.accuracy:.1f}%, cost {self.cost:.1f} "
            f"({self.mean_cost:.2f} each), {self.over_calls} over-calls, {self.under_calls} under-calls"
        )


def score_decisions(
    cases: Sequence[LabelledRequest], decisions: Sequence[Decision], costs: CostMatrix = SEED002_COSTS
) -> RoutingScore:
    """Score decisions already made (one per case, same order)."""
    if len(cases) != len(decisions):
        raise ValueError("one decision per case")
    confusion = {t: dict.fromkeys(ROUTES, 0) for t in ROUTES}
    correct = over = under = 0
    total_cost = 0.0
    for case, decision in zip(cases, decisions, strict=True):
        chosen = Route(decision.label)
        confusion[case.label][chosen] += 1
        correct += chosen is case.label
        over += costs.is_over_call(case.label, chosen)
        under += costs.is_under_call(case.label, chosen)
        total_cost += costs.cost(case.label, chosen)
    return RoutingScore(
        total=len(cases),
        correct=correct,
        cost=total_cost,
        over_calls=over,
        under_calls=under,
        confusion=confusion,
        rows=list(zip(cases, decisions, strict=True)),
    )


def score(
    router: RequestRouter, cases: Sequence[LabelledRequest], costs: CostMatrix = SEED002_COSTS
) -> RoutingScore:
    """Route every case and score the decisions."""
    return score_decisions(cases, [router.route(c.request) for c in cases], costs)
