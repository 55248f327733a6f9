"""The router as `maitre eval` scores it: the held-out questions stay held out, `make_router` is the
shipped Router tuned on the development set only, and the default router beside an agent takes the
agent's tools (not maitre's own runtime tools) as its evidence."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from maitre import Agent, Toolbox
from maitre.cli.eval_cmds import _toolbox_router, load_router
from maitre.evals import load_cases
from maitre.routing import KeywordRouter, Router, dev_requests, load_requests
from maitre.testing import TestModel

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "router"


def _said(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .?!")


def test_questions_jsonl_is_seed002s_18_questions_in_the_eval_format() -> None:
    cases = load_cases(EXAMPLES / "questions.jsonl")
    seed = load_requests(EXAMPLES / "seed002_heldout.jsonl")
    assert [(c.input, c.expected_route) for c in cases] == [(r.request, r.label.value) for r in seed]
    assert len(cases) == 18 and not any(c.runs_agent for c in cases)
    keyword = KeywordRouter()
    for case, request in zip(cases, seed, strict=True):  # the tags are the seed's printed output
        assert request.extra["seed_keyword_router"] == keyword.route(case.input).label.value
        assert ("keyword-right" in case.tags) == (request.extra["seed_keyword_router"] == request.label.value)


def test_the_held_out_questions_are_not_in_the_development_set() -> None:
    dev = {_said(r.request) for r in dev_requests()}
    held_out = [c.input for c in load_cases(EXAMPLES / "questions.jsonl")]
    held_out += [c.input for c in load_cases(ROOT / "examples" / "evals" / "mixed.yaml") if not c.runs_agent]
    assert not [q for q in held_out if _said(q) in dev]


def test_make_router_is_the_shipped_router_tuned_on_the_dev_set(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("router_score_for_eval", EXAMPLES / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    made: list[dict[str, object]] = []
    monkeypatch.setattr(module, "Router", lambda **kwargs: made.append(kwargs) or "router")
    assert module.make_router() == "router"
    assert made == [{}]  # Router's defaults: examples are dev_requests(), never the held-out questions
    assert Router.__init__.__kwdefaults__ is not None and Router.__init__.__kwdefaults__["examples"] is None


def test_the_built_in_router_names() -> None:
    assert isinstance(load_router("keyword"), KeywordRouter)
    words = load_router("words")
    assert isinstance(words, Router) and words.mode == "words"
    words.close()


def test_the_default_router_beside_an_agent_reads_the_agents_tools() -> None:
    box = Toolbox("shop")

    @box.tool(tags=("retrieval",))
    def search_docs(query: str) -> str:
        """Search the stored help articles and policies."""
        return query

    @box.tool(effect="write")
    def send_invoice(customer: str) -> str:
        """Send an invoice to a customer now."""
        return customer

    router = _toolbox_router(lambda stores: Agent(TestModel(), box, stores=stores, notes=True), embedder=None)
    try:
        assert router.tools is not None
        kinds = {name: tool.kind for name, tool in router.tools.catalogue.items()}
        assert kinds == {"shop.search_docs": "stored", "shop.send_invoice": "live"}  # no write_notes
    finally:
        router.close()
