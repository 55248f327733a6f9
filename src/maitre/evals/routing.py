"""Routing cases: a case that sets `expected_route`, scored by a router under an asymmetric cost.

Seed 002 sorts every request into CONTEXT / RETRIEVE / ACT before anything else happens, and argues
that the two ways of getting it wrong differ: an over-call (a lookup or a tool where less would do)
wastes a call and the answer is still right; an under-call (answering from the context when a tool
was needed) ships a wrong, confident answer and raises nothing. So a routed trial records the route
chosen, its cost `cost[expected][chosen]` under a `maitre.routing.CostMatrix`, and whether it was an
under- or an over-call - two routers at 12/18 are not equally good if one's six mistakes are
under-calls.

The matrix is the router's own when it has one (`Router.costs`: what it was tuned to minimise), else
`maitre.routing.SEED002_COSTS` (an over-call 1 per extra step, an under-call 10), so the keyword
baseline and the learned router are scored under the same matrix by default. The report says which.

A router is anything with a `route(request)` method returning a `maitre.routing.Decision`, a `Route`
or a route's name (`"ACT"`), directly or as an awaitable: the learned `Router`, the `KeywordRouter`,
or one of your own (a model asked to classify) can all be scored the same way.
"""

from __future__ import annotations

import inspect
from typing import Protocol

from ..exceptions import UserError
from ..routing import ROUTES, SEED002_COSTS, CostMatrix, Decision, Route
from .records import Check, RouteRecord, TrialRecord

__all__ = [
    "AnyRouter",
    "route_case",
    "route_check",
    "route_into",
    "route_trial",
    "router_name",
    "scoring_costs",
]


class AnyRouter(Protocol):
    """What `maitre eval` can score: `route(request)` -> a `Decision`, a `Route` or its name
    (or an awaitable of one)."""

    def route(self, request: str) -> object: ...


def scoring_costs(router: object) -> CostMatrix:
    """The matrix a router's decisions are priced under: its own `costs`, else seed 002's."""
    costs = getattr(router, "costs", None)
    return costs if isinstance(costs, CostMatrix) else SEED002_COSTS


def router_name(router: object) -> str:
    """How reports name a router: its `name` (`learned`, `keyword`) and, if it has one, its `mode`."""
    name = getattr(router, "name", None)
    label = name if isinstance(name, str) and name else type(router).__name__
    mode = getattr(router, "mode", None)
    return f"{label} (by {mode})" if isinstance(mode, str) and mode else label


def _as_route(value: object) -> tuple[Route, Decision | None]:
    if isinstance(value, Decision):
        return Route(value.label), value
    if isinstance(value, str) and value.strip().upper() in ROUTES:
        return Route(value.strip().upper()), None
    raise UserError(
        f"the router returned {type(value).__name__} {str(value)[:60]!r}; route() must return a "
        "maitre.routing.Decision or one of CONTEXT, RETRIEVE, ACT"
    )


async def route_case(router: AnyRouter, request: str, expected: str, costs: CostMatrix) -> RouteRecord:
    """Route `request` and price the choice against `expected`. A router that returns something
    that is not a route is a `UserError` (the router is wrong, not the case)."""
    answer = router.route(request)
    if inspect.isawaitable(answer):
        answer = await answer
    chosen, decision = _as_route(answer)
    return RouteRecord(
        expected=expected,
        chosen=chosen.value,
        cost=costs.cost(expected, chosen),
        under_call=costs.is_under_call(expected, chosen),
        over_call=costs.is_over_call(expected, chosen),
        probabilities={Route(r).value: round(float(p), 6) for r, p in decision.probabilities.items()}
        if decision is not None
        else {},
        reason=decision.reason if decision is not None else "",
    )


def route_check(record: RouteRecord | None, expected: str, error: str | None = None) -> Check:
    """The `route` check of a trial: right, or what was chosen and what it costs."""
    if record is None:
        return Check(name="route", ok=False, detail=f"expected {expected}; {error or 'no route chosen'}")
    if record.chosen == record.expected:
        return Check(name="route", ok=True, detail=f"{record.chosen}")
    kind = "under-call" if record.under_call else ("over-call" if record.over_call else "misroute")
    return Check(
        name="route",
        ok=False,
        detail=f"expected {record.expected}, chose {record.chosen} ({kind}, cost {record.cost:g})",
    )


async def route_into(
    record: TrialRecord, router: AnyRouter, request: str, expected: str, costs: CostMatrix
) -> None:
    """Route and add the route and its check to `record`; a router that raises fails the check (and,
    in a trial no agent ran, is the trial's error)."""
    try:
        record.route = await route_case(router, request, expected, costs)
    except UserError:
        raise
    except Exception as exc:  # the router under test failed on this case: it fails, the rest run
        message = f"the router raised {type(exc).__name__}: {exc}"
        if not record.ran_agent:
            record.error = record.error or message
        record.checks.append(route_check(None, expected, message))
        return
    record.checks.append(route_check(record.route, expected))


async def route_trial(
    case_id: str, request: str, expected: str, router: AnyRouter, costs: CostMatrix, *, trial: int = 0
) -> TrialRecord:
    """One trial of a routing case: no agent, only the router's decision and its check."""
    record = TrialRecord(case_id=case_id, trial=trial, status="routed", ran_agent=False)
    await route_into(record, router, request, expected, costs)
    return record
