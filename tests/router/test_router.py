"""The learned router: calibrated probabilities, expected-cost decisions, held-out scores, words-only.

Score bounds are what was measured (examples/router/score.py), with a little slack, not exact
numbers: by meaning 18/18 on seed 002 and 25/30 on the stress set (cost 5); by words 18/18 and
19/30 (cost 32); the keyword baseline 12/18 (cost 42) and 10/30 (cost 200).
"""

from __future__ import annotations

import logging

import pytest

from maitre import embeddings
from maitre.routing import (
    ROUTES,
    SEED002_COSTS,
    CostMatrix,
    Decision,
    KeywordRouter,
    LabelledRequest,
    Route,
    Router,
    dev_requests,
    route,
    score,
    score_decisions,
)

from .conftest import needs_minilm


def test_the_dev_set_is_large_balanced_and_free_of_held_out_questions(
    seed002: list[LabelledRequest], stress: list[LabelledRequest]
) -> None:
    dev = dev_requests()
    assert len(dev) >= 60
    assert {r: sum(c.label is r for c in dev) for r in ROUTES} == dict.fromkeys(ROUTES, 30)
    held = {c.request.lower() for c in [*seed002, *stress]}
    assert not held & {c.request.lower() for c in dev}
    assert len(seed002) == 18 and len(stress) == 30


@pytest.mark.parametrize("mode", ["by_meaning", "by_words"])
def test_probabilities_are_calibrated_distributions(mode: str, request: pytest.FixtureRequest) -> None:
    router: Router = request.getfixturevalue(mode)
    for text in ("What is ACME trading at?", "Summarise the paragraph I just pasted.", "hello", ""):
        decision = router.route(text)
        assert set(decision.probabilities) == set(ROUTES)
        assert sum(decision.probabilities.values()) == pytest.approx(1.0)
        assert all(0.0 <= p <= 1.0 for p in decision.probabilities.values())
    oof = router.calibration.out_of_fold_probabilities
    assert oof.shape == (len(router.examples), 3)
    assert oof.sum(axis=1) == pytest.approx(1.0)
    # out-of-fold, the true route is far more likely than under a uniform guess (ln 3 = 1.10)
    assert router.calibration.out_of_fold_log_loss < 0.3


@pytest.mark.parametrize("mode", ["by_meaning", "by_words"])
def test_the_decision_is_the_least_expected_cost_not_the_argmax(
    mode: str, request: pytest.FixtureRequest, seed002: list[LabelledRequest], stress: list[LabelledRequest]
) -> None:
    router: Router = request.getfixturevalue(mode)
    disagreements = 0
    for case in [*seed002, *stress]:
        d = router.route(case.request)
        p = [d.probabilities[r] for r in ROUTES]
        assert d.expected_costs[d.label] == pytest.approx(min(SEED002_COSTS.expected_costs(p)))
        disagreements += d.label is not d.most_probable
        if d.label is not d.most_probable:
            assert "more probable" in d.reason
            # the asymmetric matrix only ever moves a decision towards calling more
            assert ROUTES.index(d.label) > ROUTES.index(d.most_probable)
    assert disagreements >= 1  # measured: 5 by meaning, 9 by words


@needs_minilm
def test_a_hand_made_cost_matrix_flips_a_real_decision(by_meaning: Router) -> None:
    """The same probabilities under two matrices: seed 002's books the train; a matrix where a
    needless tool call costs 100 does not."""
    request = "Book me the 09:40 to Edinburgh."
    seed = by_meaning.route(request)
    careful = by_meaning.route(request, costs=CostMatrix(((0, 1, 100), (10, 0, 1), (10, 10, 0))))
    assert careful.probabilities == seed.probabilities  # measured: CONTEXT 0.45, RETRIEVE 0.04, ACT 0.51
    assert seed.label is Route.ACT
    assert careful.label is not Route.ACT  # 100 * p(CONTEXT) ~ 45 is now the dearest choice
    assert careful.expected_costs[Route.ACT] > 5 * careful.expected_costs[careful.label]  # 45 vs 5.5


@needs_minilm
def test_held_out_scores_by_meaning(
    by_meaning: Router, seed002: list[LabelledRequest], stress: list[LabelledRequest]
) -> None:
    seed = score(by_meaning, seed002)
    baseline = score(KeywordRouter(), seed002)
    assert seed.correct >= 16 and seed.under_calls <= 1 and seed.cost <= 12
    assert seed.cost < baseline.cost and seed.correct > baseline.correct
    hard = score(by_meaning, stress)
    assert hard.correct >= 22 and hard.under_calls <= 1 and hard.cost <= 15
    assert hard.cost < score(KeywordRouter(), stress).cost / 5
    dev = score_decisions(by_meaning.examples, by_meaning.out_of_fold_decisions())
    assert dev.correct >= 84 and dev.under_calls <= 1


def test_held_out_scores_by_words(
    by_words: Router, seed002: list[LabelledRequest], stress: list[LabelledRequest]
) -> None:
    seed = score(by_words, seed002)
    assert seed.correct >= 15 and seed.cost < score(KeywordRouter(), seed002).cost
    hard = score(by_words, stress)
    assert hard.correct >= 16 and hard.cost <= 45
    dev = score_decisions(by_words.examples, by_words.out_of_fold_decisions())
    assert dev.correct >= 80


@needs_minilm
def test_meaning_beats_words_on_the_stress_set(
    by_meaning: Router, by_words: Router, stress: list[LabelledRequest]
) -> None:
    meaning, words = score(by_meaning, stress), score(by_words, stress)
    assert meaning.correct > words.correct and meaning.cost < words.cost


def test_without_the_embeddings_extra_it_routes_by_words_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, seed002: list[LabelledRequest]
) -> None:
    monkeypatch.setattr(embeddings, "missing_embedding_packages", lambda: ["onnxruntime"])
    monkeypatch.setattr(embeddings, "_noticed", False)
    with caplog.at_level(logging.WARNING):
        first, second = Router(), Router()
    try:
        assert first.mode == second.mode == "words"
        assert first.tools is not None and first.tools.mode == "lexical"
        assert score(first, seed002).correct >= 15
    finally:
        first.close()
        second.close()
    notices = [r.getMessage() for r in caplog.records if "maitre[embeddings]" in r.getMessage()]
    assert len(notices) == 1 and "words only" in notices[0]


def test_decisions_explain_themselves(by_words: Router) -> None:
    d = by_words.route("Where is the deployment runbook documented?")
    assert d.label is Route.RETRIEVE
    assert d.reason.startswith("RETRIEVE: least expected cost")
    assert "nearest example is RETRIEVE" in d.reason and "document" in d.reason
    data = d.to_dict()
    assert data["label"] == "RETRIEVE" and set(data["probabilities"]) == {"CONTEXT", "RETRIEVE", "ACT"}


def test_route_is_a_plain_function_for_the_eval_harness() -> None:
    decision = route("Send the invoice to finance.")
    assert isinstance(decision, Decision)
    assert decision.label == "ACT" and decision.label is Route.ACT
    assert route("Send the invoice to finance.").probabilities == pytest.approx(decision.probabilities)


def test_a_router_needs_examples_of_every_route() -> None:
    from maitre.exceptions import UserError

    few = [LabelledRequest(request=f"q{i}", label=Route.ACT) for i in range(20)]
    with pytest.raises(UserError, match="at least 5 labelled examples of each route"):
        Router(examples=few, embedder=None)


class _CountingEmbedder:
    """A bag-of-words embedder (tests only) that counts the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = embeddings.HashingEmbedder()
        self.texts: list[str] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text: str):  # type: ignore[no-untyped-def]
        return self.embed([text])[0]


def test_any_embedder_can_be_given_and_each_request_is_embedded_once() -> None:
    counting = _CountingEmbedder()
    router = Router(embedder=counting)
    try:
        assert router.mode == "meaning"
        before = len(counting.texts)
        decision = router.route("Cancel my dentist appointment on Thursday.")
        assert counting.texts[before:] == ["Cancel my dentist appointment on Thursday."]
        assert decision.label is Route.ACT
        assert "tools" in decision.evidence  # the tool index ran on the same (remembered) vector
    finally:
        router.close()


@needs_minilm
def test_a_toolbox_of_ones_own_is_the_tool_evidence() -> None:
    """A read tool tagged "retrieval" looks up stored facts; every other tool is live or effectful.
    (By meaning: BM25 over a catalogue of two tools gives every word an idf of about 0.)"""
    from maitre import Toolbox

    box = Toolbox()

    @box.tool(tags=("retrieval",))
    def search_wiki(query: str) -> str:
        """Search the engineering wiki: runbooks, design docs, postmortems."""
        return ""

    @box.tool(effect="write")
    def page_oncall(message: str) -> str:
        """Page the on-call engineer with a message."""
        return ""

    router = Router(tools=box)
    try:
        assert router.tools is not None
        kinds = {name: (tool.kind, tool.effect) for name, tool in router.tools.catalogue.items()}
        assert kinds == {"search_wiki": ("stored", "read"), "page_oncall": ("live", "write")}
        d = router.route("Page the on-call engineer about the outage.")
        assert d.label is Route.ACT
        assert d.evidence["tools"]["live"]["name"] == "page_oncall"
        assert "nearest live tool page_oncall (write" in d.reason
    finally:
        router.close()
