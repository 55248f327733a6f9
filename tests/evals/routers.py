"""Routers for the routing-case tests: a table of answers, so every number is counted by hand.

Loaded by path by the CLI tests (`--router tests/evals/routers.py:make_table_router`) and imported
by the library tests.
"""

from __future__ import annotations

from maitre.routing import CostMatrix, Decision, Route

ANSWERS = {
    "paste": "CONTEXT",  # right
    "policy": "ACT",  # RETRIEVE over-called: cost 1
    "price": "CONTEXT",  # ACT under-called: cost 10
    "seats": "ACT",  # right
}


class TableRouter:
    """Answers from `ANSWERS` by the first key found in the request (CONTEXT when none is)."""

    name = "table"

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.answers = answers if answers is not None else ANSWERS
        self.closed = False

    def route(self, request: str) -> Decision:
        label = next((v for k, v in self.answers.items() if k in request), "CONTEXT")
        return Decision(
            request=request, label=Route(label), probabilities={Route(label): 1.0}, reason="table"
        )

    def close(self) -> None:
        self.closed = True


class TextRouter:
    """Returns the route's name as text, not a Decision."""

    def route(self, request: str) -> str:
        return "act" if "price" in request else "CONTEXT"


class AsyncRouter:
    """An awaitable route (a router that asks a model, say)."""

    async def route(self, request: str) -> Decision:
        return TableRouter().route(request)


class StrictRouter(TableRouter):
    """Priced under a matrix of its own: an under-call costs 100."""

    costs = CostMatrix(((0.0, 1.0, 2.0), (100.0, 0.0, 1.0), (100.0, 100.0, 0.0)))


class BrokenRouter:
    """Raises on requests about seats; routes the rest."""

    def route(self, request: str) -> Decision:
        if "seats" in request:
            raise RuntimeError("the classifier is down")
        return TableRouter().route(request)


class JunkRouter:
    """Returns something that is not a route."""

    def route(self, request: str) -> object:
        return 42


def make_table_router() -> TableRouter:
    return TableRouter()


def needs_arguments(answers: dict[str, str]) -> TableRouter:
    return TableRouter(answers)


NOT_A_ROUTER = {"route": "ACT"}
