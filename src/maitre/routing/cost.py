"""An asymmetric cost matrix and the decision rule that respects it.

Seed 002's two mistakes do not cost the same. Over-calling (a lookup or a tool where less would do)
adds about 560 ms and $0.0038 and the answer is still right. Under-calling (answering from the
context when a lookup or a tool was needed) adds nothing measurable and ships a wrong, confident
answer ("ACME is trading at 33.50", 23 % off, no error raised). So `cost[true][chosen]` here is:

                 chosen CONTEXT  RETRIEVE  ACT
    true CONTEXT         0         1        2     over-calls: wasted latency and money
    true RETRIEVE       10         0        1
    true ACT            10        10        0     under-calls: a wrong answer

One unit is one needless call (the seed's +560 ms / +$0.0038); a wrong answer is priced at ten of
them. Ten is a product decision, not a law, which is why the matrix is a parameter: a team whose
wrong answers cost a refund would put 100 there. Answering an ACT request from stored facts
(RETRIEVE) is priced as an under-call too: a stored price or seat count is the seed's stale 33.50.

The rule is Bayes: choose the route whose expected cost `sum_t p(t) * cost[t][chosen]` is least,
given calibrated probabilities, not the most probable route. With the matrix above, answering from
the context needs p(CONTEXT) above 0.83 (against ACT) to 0.91 (against RETRIEVE): a one-in-six
chance that a tool was needed is enough to call it, which is the asymmetry the seed asks for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .labels import ROUTES, Route

__all__ = ["CostMatrix", "SEED002_COSTS"]


@dataclass(frozen=True)
class CostMatrix:
    """`cost[true][chosen]` for the three routes; zero on the diagonal is not required but usual."""

    rows: tuple[tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]]
    """Rows are the true route, columns the chosen one, both in `ROUTES` order."""

    @classmethod
    def from_mapping(cls, table: Mapping[str, Mapping[str, float]]) -> CostMatrix:
        """From `{"ACT": {"CONTEXT": 10, ...}, ...}`; a missing cell is 0 on the diagonal, else an error."""
        rows = []
        for true in ROUTES:
            row = table.get(true.value, {})
            cells = []
            for chosen in ROUTES:
                if chosen.value in row:
                    cells.append(float(row[chosen.value]))
                elif chosen is true:
                    cells.append(0.0)
                else:
                    raise ValueError(f"cost matrix: no cost for true {true.value}, chosen {chosen.value}")
            rows.append((cells[0], cells[1], cells[2]))
        return cls((rows[0], rows[1], rows[2]))

    def cost(self, true: Route | str, chosen: Route | str) -> float:
        """What choosing `chosen` costs when `true` was right."""
        return self.rows[ROUTES.index(Route(true))][ROUTES.index(Route(chosen))]

    def expected_costs(self, probabilities: Sequence[float]) -> tuple[float, float, float]:
        """Expected cost of each choice, given the probability of each true route (`ROUTES` order)."""
        if len(probabilities) != len(ROUTES):
            raise ValueError("three probabilities, in ROUTES order")
        c, r, a = (sum(p * self.rows[t][j] for t, p in enumerate(probabilities)) for j in range(3))
        return (c, r, a)

    def choose(self, probabilities: Sequence[float]) -> Route:
        """The route of least expected cost; ties go to the route that calls more (the safe side)."""
        costs = self.expected_costs(probabilities)
        best = min(costs)
        tied = [i for i, c in enumerate(costs) if c <= best + 1e-12]
        return ROUTES[max(tied)]

    def is_under_call(self, true: Route | str, chosen: Route | str) -> bool:
        """Fewer calls than needed: CONTEXT for RETRIEVE/ACT, or RETRIEVE for ACT."""
        return ROUTES.index(Route(chosen)) < ROUTES.index(Route(true))

    def is_over_call(self, true: Route | str, chosen: Route | str) -> bool:
        """More calls than needed: RETRIEVE or ACT for CONTEXT, or ACT for RETRIEVE."""
        return ROUTES.index(Route(chosen)) > ROUTES.index(Route(true))


SEED002_COSTS = CostMatrix(((0.0, 1.0, 2.0), (10.0, 0.0, 1.0), (10.0, 10.0, 0.0)))
"""The default matrix (module docstring): an over-call costs 1 per extra step, an under-call 10."""
