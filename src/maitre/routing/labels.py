"""The three piles of seed 002 and the answer a router gives.

Seed 002 sorts every request into one of three piles before anything else happens:

- `CONTEXT`: the answer is already in the context (the user pasted it, said it, or it is above);
- `RETRIEVE`: a *stored* fact will do (a policy, a handbook, a runbook, something the user told
  memory earlier): look it up in memory or a document index;
- `ACT`: no stored fact will do - a live system must answer (a price now, seats left, a payment's
  state), something must be computed, or something must happen (book, send, pay).

The labels follow the seed's ground truth, so a live read such as `get_price` routes to ACT even
though maitre declares it `effect="read"`: what decides the pile is whether a stored answer could be
stale or missing, not whether the call writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Decision", "ROUTES", "Route"]


class Route(StrEnum):
    """Where the answer to a request comes from (a `str`: `Route.ACT == "ACT"`)."""

    CONTEXT = "CONTEXT"
    RETRIEVE = "RETRIEVE"
    ACT = "ACT"


ROUTES: tuple[Route, Route, Route] = (Route.CONTEXT, Route.RETRIEVE, Route.ACT)
"""The routes in the order of every matrix and probability vector here (calls increase to the right)."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One routing decision: the chosen route, and why.

    `label` is the route with the least expected cost, which is not always the most probable one:
    under an asymmetric cost matrix a 40 % chance that a tool is needed can be enough to call it.
    """

    request: str
    """The request as routed."""
    label: Route
    """The chosen route."""
    probabilities: Mapping[Route, float] = field(default_factory=dict)
    """Calibrated probability of each route being the right one (they sum to 1; empty for a
    keyword router, which has no probabilities)."""
    expected_costs: Mapping[Route, float] = field(default_factory=dict)
    """Expected cost of choosing each route under the router's cost matrix (empty without
    probabilities)."""
    reason: str = ""
    """One line a person reads: what tipped the decision."""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    """The features behind the decision (nearest examples and tools, cue words), for debugging."""

    @property
    def most_probable(self) -> Route:
        """The argmax route (what a router that ignored costs would choose)."""
        if not self.probabilities:
            return self.label
        return max(self.probabilities, key=lambda r: self.probabilities[r])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (for eval reports)."""
        return {
            "request": self.request,
            "label": self.label.value,
            "probabilities": {r.value: p for r, p in self.probabilities.items()},
            "expected_costs": {r.value: c for r, c in self.expected_costs.items()},
            "reason": self.reason,
            "evidence": dict(self.evidence),
        }
