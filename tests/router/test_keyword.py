"""Seed 002's keyword router, reproduced: its table row for row, and its "break this" experiments."""

from __future__ import annotations

from maitre.routing import ACT_WORDS, KeywordRouter, LabelledRequest, Route, score


def test_it_routes_the_seeds_phrases_as_the_seed_printed(seed002: list[LabelledRequest]) -> None:
    router = KeywordRouter()
    for case in seed002:
        assert router.route(case.request).label == case.extra["seed_keyword_router"], case.request
    assert router.route("Where is the deployment runbook documented?").evidence == {"word": "book"}
    assert router.route("What is ACME trading at?").label is Route.CONTEXT


def test_it_scores_12_of_18_with_two_over_calls(seed002: list[LabelledRequest]) -> None:
    s = score(KeywordRouter(), seed002)
    assert (s.correct, s.total, s.over_calls) == (12, 18, 2)
    # the seed counts 3 under-calls (ACT answered from memory); our count adds the misrouted
    # postmortem (RETRIEVE answered from the context), which is an under-call too
    assert s.under_calls == 4
    assert s.confusion[Route.ACT][Route.CONTEXT] == 3


def test_the_seeds_break_this_experiments(seed002: list[LabelledRequest]) -> None:
    with_guide = score(KeywordRouter(act_words=(*ACT_WORDS, "guide")), seed002)
    assert with_guide.over_calls == 3
    without_current = score(KeywordRouter(act_words=[w for w in ACT_WORDS if w != "current"]), seed002)
    assert without_current.correct == 11
    assert without_current.confusion[Route.ACT][Route.CONTEXT] == 4
