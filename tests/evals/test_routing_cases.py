"""Routing cases (`expected_route`): the format, the numbers on hand-counted routers, mixed files,
the reports and `compare` - all with table routers, so nothing here tunes a model."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from maitre.evals import (
    CaseFileError,
    TrialRecord,
    build_document,
    compare_documents,
    evaluate,
    parse_cases,
    parse_threshold,
    render_html,
    run_eval,
)
from maitre.evals.report import dumps, load_document, run_header, summary_tables
from maitre.exceptions import UserError

from .routers import AsyncRouter, BrokenRouter, JunkRouter, StrictRouter, TableRouter, TextRouter

ROOT = Path(__file__).resolve().parents[2]

ROUTING = "\n".join(
    json.dumps(case)
    for case in (
        {"id": "paste", "input": "Summarise what I paste", "expected_route": "CONTEXT"},
        {"id": "policy", "input": "What is the refund policy?", "expected_route": "RETRIEVE"},
        {"id": "price", "input": "What is the price of ACME?", "expected_route": "act"},
        {"id": "seats", "input": "How many seats are left?", "expected_route": "ACT", "tags": ["live"]},
    )
)


def cases(text: str = ROUTING, kind: Any = "jsonl") -> list[Any]:
    return parse_cases(text, name=f"cases.{kind}", kind=kind)


def document(router: Any, text: str = ROUTING, trials: int = 1, factory: Any = None) -> dict[str, Any]:
    result = anyio.run(lambda: run_eval(cases(text), factory, router=router, trials=trials))
    return build_document(result)


def test_a_routing_case_needs_only_an_input_and_a_route() -> None:
    found = {c.id: c for c in cases()}
    assert found["price"].expected_route == "ACT"  # any case is accepted and stored upper-case
    assert all(c.is_routed and not c.runs_agent for c in found.values())
    both = cases('{"input": "x", "expected_route": "ACT", "max_tool_calls": 1}')[0]
    assert both.is_routed and both.runs_agent  # an agent field: run by the agent and routed
    who = cases('{"input": "x", "expected_route": "ACT", "principal": {"user": "ann"}}')[0]
    assert who.runs_agent  # a principal is for an agent run
    plain = cases('{"input": "x"}')[0]
    assert plain.runs_agent and not plain.is_routed
    yaml = cases("- id: y\n  input: Book the 09:40\n  expected_route: ACT\n  tags: [live]\n", "yaml")[0]
    assert yaml.expected_route == "ACT" and not yaml.runs_agent


@pytest.mark.parametrize("bad", ['"TOOL"', "3", '""'])
def test_an_unknown_route_is_an_error_naming_the_line(bad: str) -> None:
    with pytest.raises(CaseFileError, match=r"cases\.jsonl:2: expected_route: .* is not a route; use one of"):
        cases('{"input": "fine"}\n{"input": "x", "expected_route": ' + bad + "}")


def test_the_numbers_are_the_hand_counted_ones() -> None:
    doc = document(TableRouter())
    m = doc["metrics"]
    # paste right, policy over-called (RETRIEVE -> ACT, 1), price under-called (ACT -> CONTEXT, 10), seats right
    assert m["route_accuracy"] == 0.5 and m["pass_rate"] == 0.5 and m["pass^1"] == 0.5
    assert m["route_cost_total"] == 11.0 and m["route_cost_mean"] == 2.75
    assert m["route_under_call_rate"] == 0.25 and m["route_over_call_rate"] == 0.25
    assert "calls_per_trial" not in m and "selection_precision" not in m  # no agent ran: not measured
    routing = doc["routing"]
    assert (routing["routed"], routing["correct"], routing["cost"]) == (4, 2, 11.0)
    assert (routing["under_calls"], routing["over_calls"]) == (1, 1) and routing["router"] == "table"
    assert routing["costs"]["ACT"]["CONTEXT"] == 10.0 and routing["costs"]["CONTEXT"]["ACT"] == 2.0
    cells = {(c["expected"], c["chosen"]): c["count"] for c in doc["route_confusion"]}
    assert len(cells) == 9 and sum(cells.values()) == 4
    assert cells[("ACT", "CONTEXT")] == 1 and cells[("RETRIEVE", "ACT")] == 1 and cells[("ACT", "ACT")] == 1
    by_id = {c["id"]: c for c in doc["cases"]}
    run = by_id["price"]["runs"][0]
    assert run["ran_agent"] is False and run["route"]["chosen"] == "CONTEXT" and run["route"]["under_call"]
    assert run["checks"] == [
        {"name": "route", "ok": False, "detail": "expected ACT, chose CONTEXT (under-call, cost 10)"}
    ]
    assert by_id["paste"]["runs_agent"] is False and by_id["paste"]["routed"] is True


def test_trials_route_every_trial_and_pass_hat_k_counts_them() -> None:
    doc = document(TableRouter(), trials=3)
    assert doc["routing"]["routed"] == 12 and doc["routing"]["cost"] == 33.0
    assert doc["metrics"]["pass^3"] == 0.5  # a table router is deterministic: pass^k stays at pass^1


def test_a_router_with_a_matrix_of_its_own_is_priced_under_it() -> None:
    doc = document(StrictRouter())
    assert doc["metrics"]["route_cost_total"] == 101.0 and doc["routing"]["costs"]["ACT"]["CONTEXT"] == 100.0


@pytest.mark.parametrize("router", [TextRouter(), AsyncRouter()], ids=["text", "awaitable"])
def test_a_route_as_text_or_from_an_awaitable_counts_too(router: Any) -> None:
    doc = document(router)
    assert doc["cases"][2]["runs"][0]["route"]["chosen"] == (
        "ACT" if isinstance(router, TextRouter) else "CONTEXT"
    )
    assert doc["routing"]["routed"] == 4


def test_a_router_that_raises_fails_that_case_and_the_others_are_routed() -> None:
    doc = document(BrokenRouter())
    by_id = {c["id"]: c for c in doc["cases"]}
    run = by_id["seats"]["runs"][0]
    assert run["passed"] is False and run["route"] is None
    assert "the router raised RuntimeError: the classifier is down" in run["error"]
    assert by_id["paste"]["passed"] == 1
    assert doc["routing"]["routed"] == 4 and doc["metrics"]["route_accuracy"] == 0.25  # paste only


def test_a_router_that_answers_no_route_is_a_usage_error() -> None:
    with pytest.raises(UserError, match=r"route\(\) must return a maitre\.routing\.Decision"):
        document(JunkRouter())


def test_cases_that_need_an_agent_refuse_to_run_without_one() -> None:
    with pytest.raises(UserError, match=r"1 case\(s\) need an agent run \(x\)"):
        document(TableRouter(), '{"id": "x", "input": "x", "expected_tool": "a"}\n' + ROUTING)


def _example_agent() -> Any:
    from maitre._loader import load_object

    return load_object(f"{ROOT / 'examples' / 'evals' / 'agent.py'}:make_agent")


AGENT_CASES = "\n".join(
    json.dumps(case)
    for case in (
        {
            "id": "status",
            "input": "Check the status of ticket T-123456",
            "expected_tool": "get_ticket_status",
        },
        {
            "id": "order",
            "input": "Where is my order A1042?",
            "expected_tool": "get_order",
            "max_tool_calls": 1,
        },
    )
)


def test_a_mixed_file_runs_the_agent_cases_and_routes_the_rest_without_thinning_agent_metrics() -> None:
    factory = _example_agent()
    alone = document(None, AGENT_CASES, factory=factory)["metrics"]
    both_case = json.dumps(
        {"id": "both", "input": "What is the price of ACME?", "expected_route": "ACT", "expected_tools": []}
    )
    doc = document(TableRouter(), AGENT_CASES + "\n" + ROUTING, factory=factory)
    m = doc["metrics"]
    for name in ("calls_per_trial", "steps_per_trial", "selection_precision", "trajectory_efficiency"):
        assert m[name] == alone[name], name  # counted over the 2 agent trials, not the 6 trials
    assert m["route_accuracy"] == 0.5 and m["pass_rate"] == pytest.approx(3 / 6, abs=1e-6)
    # a case that is both run and routed passes only when both are right (the table under-calls it)
    mixed = document(TableRouter(), both_case, factory=factory)
    run = mixed["cases"][0]["runs"][0]
    assert run["ran_agent"] is True and [c["name"] for c in run["checks"] if not c["ok"]] == ["route"]
    assert mixed["metrics"]["selection_recall"] is None and mixed["metrics"]["route_under_call_rate"] == 1.0


def test_thresholds_on_routing_metrics_use_their_direction() -> None:
    assert str(parse_threshold("route_accuracy=0.9")) == "route_accuracy >= 0.9"
    assert str(parse_threshold("route_cost_mean=1")) == "route_cost_mean <= 1"
    assert str(parse_threshold("route_under_call_rate=0")) == "route_under_call_rate <= 0"
    metrics = document(TableRouter())["metrics"]
    results = evaluate([parse_threshold("route_accuracy=0.5"), parse_threshold("route_cost_mean=2")], metrics)
    assert [r.ok for r in results] == [True, False]
    agent_only = document(None, AGENT_CASES, factory=_example_agent())["metrics"]
    (unmeasured,) = evaluate([parse_threshold("route_accuracy=0.1")], agent_only)
    assert unmeasured.actual is None and not unmeasured.ok  # nothing routed: a bar nobody measured


def test_the_reports_show_the_route_confusion_matrix(tmp_path: Path) -> None:
    doc = document(TableRouter())
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(summary_tables(doc))
    text = out.getvalue()
    assert "routes: 2/4 = 50.0%, cost 11.0 (2.75 each), 1 under-calls, 1 over-calls" in text
    header = run_header(doc)
    assert "router table" in header and not any(line.startswith("agent ") for line in header)  # no agent ran
    row = next(line for line in text.splitlines() if line.startswith("│ ACT "))
    assert [cell.strip() for cell in row.split("│")[2:6]] == [
        "1",
        "0",
        "1",
        "1/2",
    ]  # CONTEXT RETRIEVE ACT right
    page = render_html(doc)
    assert "2/4 = 50.0% right, cost 11.0" in page and "id='route-confusion'" in page
    section = page[page.index("id='route-confusion'") :]
    assert section[: section.index("</svg>")].count("<rect") == 9
    assert "expected ACT, chose CONTEXT: 1" in page
    assert "No agent case ran." in page and "id='trajectories'><svg" not in page  # no empty chart
    path = tmp_path / "r.json"
    path.write_text(dumps(doc))
    loaded = load_document(path)
    record = TrialRecord.from_dict(loaded["cases"][2]["runs"][0])
    assert record.route is not None and record.route.chosen == "CONTEXT" and not record.ran_agent


def test_hostile_text_from_a_router_stays_text() -> None:
    class Shouting(TableRouter):
        def route(self, request: str) -> Any:
            decision = super().route(request)
            return type(decision)(
                request=request, label=decision.label, reason="<script>alert(1)</script>[red]x"
            )

    page = render_html(document(Shouting(), '{"id": "<img src=x>", "input": "<b>", "expected_route": "ACT"}'))
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;alert(1)" in page


def test_compare_shows_routing_regressions_and_a_costlier_route() -> None:
    good = document(TableRouter({"paste": "CONTEXT", "policy": "RETRIEVE", "price": "ACT", "seats": "ACT"}))
    bad = document(TableRouter())
    comparison = compare_documents(good, bad)
    metrics = {m.metric: m for m in comparison.metrics}
    assert metrics["route_accuracy"].regression and metrics["route_under_call_rate"].regression
    assert metrics["route_cost_total"].regression and metrics["route_over_call_rate"].regression
    cases = {c.case_id: c for c in comparison.cases}
    price = cases["price"]
    assert price.regression and price.failing_checks == ["route"]
    assert (price.expected_route, price.route_before, price.route_after) == ("ACT", "ACT", "CONTEXT")
    assert not cases["paste"].regression and compare_documents(good, good).regressions == 0
    assert not compare_documents(bad, good).regressions  # the other way round, everything improved
    # Both reports get "policy" wrong; in B the mistake is the costly kind: over-call (1) -> under-call (10).
    overcall, undercall = (
        document(TableRouter({"policy": "ACT"})),
        document(TableRouter({"policy": "CONTEXT"})),
    )
    step = {c.case_id: c for c in compare_documents(overcall, undercall).cases}["policy"]
    assert step.before == step.after == (0, 1) and step.regression
    assert (step.route_cost_before, step.route_cost_after) == (1.0, 10.0)
    assert not {c.case_id: c for c in compare_documents(undercall, overcall).cases}["policy"].regression
    out = io.StringIO()
    from maitre.evals.report import comparison_tables

    Console(file=out, width=200, color_system=None).print(comparison_tables(compare_documents(good, bad)))
    assert "ACT -> CONTEXT, wants ACT" in out.getvalue() and "REGRESSION" in out.getvalue()
    strict = document(StrictRouter())
    assert "different cost matrices" in compare_documents(bad, strict).notes[0]
    assert compare_documents(bad, bad).notes == []
