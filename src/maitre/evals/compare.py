"""`maitre eval compare A.json B.json`: what got worse from report A (the baseline) to report B.

A metric regresses when it moved the wrong way (see `metrics.DIRECTIONS`) by more than
`tolerance`; a metric measured in A and not in B regresses too (it can no longer be checked).
A neutral metric's change is listed, never a regression. A case regresses when its pass rate
fell; cases only in A are listed as removed and cases only in B as added, neither a regression.

Routing (cases that set `expected_route`): `route_accuracy`, `route_cost_*` and the under- and
over-call rates are metrics like any other, and a routed case also regresses when its route got
costlier - an over-call that became an under-call fails in both reports, but it now ships a wrong
answer. Each routed case carries the route it took in A and in B. When the two reports priced routes
under different cost matrices, `notes` says so: their costs are not comparable.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .metrics import direction

__all__ = ["CaseChange", "Comparison", "MetricChange", "compare_documents"]


@dataclass(frozen=True, kw_only=True)
class MetricChange:
    metric: str
    before: float | None
    after: float | None
    direction: str
    regression: bool

    @property
    def delta(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after - self.before


@dataclass(frozen=True, kw_only=True)
class CaseChange:
    case_id: str
    before: tuple[int, int] | None
    """(passed, trials) in A; None when the case is new."""
    after: tuple[int, int] | None
    regression: bool
    failing_checks: list[str] = field(default_factory=list)
    """The checks that failed in B's trials (what to look at)."""
    expected_route: str | None = None
    """The case's `expected_route`, for a routed case."""
    route_before: str | None = None
    """The route A's trials chose most often (None: not routed in A)."""
    route_after: str | None = None
    route_cost_before: float | None = None
    """Mean `cost[expected][chosen]` over A's trials."""
    route_cost_after: float | None = None


@dataclass(kw_only=True)
class Comparison:
    metrics: list[MetricChange]
    cases: list[CaseChange]
    notes: list[str] = field(default_factory=list)
    """What makes the two reports hard to compare (different cost matrices)."""

    @property
    def regressions(self) -> int:
        return sum(m.regression for m in self.metrics) + sum(c.regression for c in self.cases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "regressions": self.regressions,
            "notes": self.notes,
            "metrics": [
                {
                    "metric": m.metric,
                    "before": m.before,
                    "after": m.after,
                    "delta": m.delta,
                    "direction": m.direction,
                    "regression": m.regression,
                }
                for m in self.metrics
            ],
            "cases": [
                {
                    "id": c.case_id,
                    "before": list(c.before) if c.before else None,
                    "after": list(c.after) if c.after else None,
                    "regression": c.regression,
                    "failing_checks": c.failing_checks,
                    "expected_route": c.expected_route,
                    "route_before": c.route_before,
                    "route_after": c.route_after,
                    "route_cost_before": c.route_cost_before,
                    "route_cost_after": c.route_cost_after,
                }
                for c in self.cases
            ],
        }


def _rate(counts: tuple[int, int] | None) -> float | None:
    return counts[0] / counts[1] if counts and counts[1] else None


def _routes(case: dict[str, Any] | None) -> tuple[str | None, float | None]:
    """The route a case's trials chose most often (ties: the first), and their mean cost."""
    routes = [r["route"] for r in (case or {}).get("runs", []) if isinstance(r.get("route"), dict)]
    if not routes:
        return None, None
    chosen = Counter(str(r["chosen"]) for r in routes).most_common(1)[0][0]
    return chosen, sum(float(r.get("cost", 0.0)) for r in routes) / len(routes)


def compare_documents(before: dict[str, Any], after: dict[str, Any], *, tolerance: float = 0.0) -> Comparison:
    """Report B (`after`) against report A (`before`)."""
    a_metrics: dict[str, Any] = before.get("metrics", {})
    b_metrics: dict[str, Any] = after.get("metrics", {})
    changes = []
    for name in list(a_metrics) + [n for n in b_metrics if n not in a_metrics]:
        way = direction(name) or "neutral"
        old, new = a_metrics.get(name), b_metrics.get(name)
        if way == "neutral" or old is None:
            worse = False
        elif new is None:
            worse = True
        else:
            worse = (old - new if way == "higher" else new - old) > tolerance + 1e-12
        changes.append(MetricChange(metric=name, before=old, after=new, direction=way, regression=worse))
    a_cases = {c["id"]: c for c in before.get("cases", [])}
    b_cases = {c["id"]: c for c in after.get("cases", [])}
    cases = []
    for case_id in list(a_cases) + [i for i in b_cases if i not in a_cases]:
        a, b = a_cases.get(case_id), b_cases.get(case_id)
        old_counts = (int(a["passed"]), int(a["trials"])) if a else None
        new_counts = (int(b["passed"]), int(b["trials"])) if b else None
        old_rate, new_rate = _rate(old_counts), _rate(new_counts)
        worse = old_rate is not None and new_rate is not None and new_rate < old_rate - 1e-12
        route_a, cost_a = _routes(a)
        route_b, cost_b = _routes(b)
        if cost_a is not None and cost_b is not None and cost_b > cost_a + 1e-12:
            worse = True
        expected_route = ((b or a or {}).get("expectation") or {}).get("expected_route")
        failing = sorted(
            {
                check["name"]
                for run in (b or {}).get("runs", [])
                for check in run.get("checks", [])
                if not check["ok"]
            }
        )
        cases.append(
            CaseChange(
                case_id=case_id,
                before=old_counts,
                after=new_counts,
                regression=worse,
                failing_checks=failing,
                expected_route=expected_route,
                route_before=route_a,
                route_after=route_b,
                route_cost_before=cost_a,
                route_cost_after=cost_b,
            )
        )
    notes = []
    a_costs = (before.get("routing") or {}).get("costs")
    b_costs = (after.get("routing") or {}).get("costs")
    if a_costs and b_costs and a_costs != b_costs:
        notes.append("A and B priced routes under different cost matrices: their route costs do not compare")
    return Comparison(metrics=changes, cases=cases, notes=notes)
