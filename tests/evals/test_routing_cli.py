"""`maitre eval CASES --router ...` as the README runs it: seed 002's 18 questions, learned against
keyword, thresholds and every exit status (0 met, 1 missed, 2 usage), mixed files, compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maitre.cli import app

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = str(ROOT / "examples" / "router" / "questions.jsonl")
MAKE_ROUTER = f"{ROOT / 'examples' / 'router' / 'score.py'}:make_router"
AGENT = f"{ROOT / 'examples' / 'evals' / 'agent.py'}:make_agent"
MIXED = str(ROOT / "examples" / "evals" / "mixed.yaml")
AGENT_CASES = str(ROOT / "examples" / "evals" / "cases.jsonl")
TABLE = f"{Path(__file__).with_name('routers.py')}:make_table_router"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The README's two runs: the learned router (18/18) and seed 002's keyword router (12/18)."""
    folder = tmp_path_factory.mktemp("routes")
    out = {"learned": folder / "learned.json", "keyword": folder / "keyword.json"}
    code, stdout, stderr = invoke(
        "eval",
        QUESTIONS,
        "--router",
        MAKE_ROUTER,
        "--threshold",
        "route_accuracy=0.9",
        "--json",
        str(out["learned"]),
    )
    assert code == 0, stderr
    assert "routes: 18/18 = 100.0%, cost 0.0 (0.00 each), 0 under-calls, 0 over-calls" in stdout
    assert "score.py:make_router: learned (by " in stdout and "met" in stdout
    code, stdout, stderr = invoke("eval", QUESTIONS, "--router", "keyword", "--json", str(out["keyword"]))
    assert code == 0, stderr
    assert "routes: 12/18 = 66.7%, cost 42.0 (2.33 each), 4 under-calls, 2 over-calls" in stdout
    return out


def test_seed002s_questions_learned_beside_keyword(reports: dict[str, Path]) -> None:
    learned = json.loads(reports["learned"].read_text())
    keyword = json.loads(reports["keyword"].read_text())
    assert learned["run"]["cases"] == 18 and learned["run"]["agent"] == ""
    assert learned["metrics"]["route_accuracy"] == 1.0 and learned["metrics"]["route_cost_total"] == 0.0
    assert keyword["metrics"]["route_accuracy"] == pytest.approx(12 / 18, abs=1e-6)
    assert keyword["metrics"]["route_cost_total"] == 42.0
    # the keyword router's mistakes, row for row as the seed prints them (tags in questions.jsonl)
    for case in keyword["cases"]:
        route = case["runs"][0]["route"]
        kind = (
            "right"
            if route["chosen"] == route["expected"]
            else ("under-called" if route["under_call"] else "over-called")
        )
        assert f"keyword-{kind}" in case["tags"], case["id"]
    assert learned["thresholds"] == [
        {"metric": "route_accuracy", "op": ">=", "value": 0.9, "actual": 1.0, "ok": True}
    ]


def test_a_missed_routing_threshold_exits_1() -> None:
    code, stdout, stderr = invoke(
        "eval",
        QUESTIONS,
        "--router",
        "keyword",
        "--threshold",
        "route_accuracy=0.9",
        "--threshold",
        "route_under_call_rate=0",
    )
    assert code == 1
    assert "threshold missed: route_accuracy 0.666667 (needs >= 0.9), route_under_call_rate" in " ".join(
        stderr.split()
    )
    assert "MISSED" in stdout
    code, _, stderr = invoke("eval", QUESTIONS, "--router", "keyword", "--threshold", "route_cost_mean<=2.5")
    assert code == 0, stderr


def test_compare_shows_the_routing_regressions(reports: dict[str, Path]) -> None:
    code, stdout, _ = invoke("eval", "compare", str(reports["learned"]), str(reports["keyword"]), "--json")
    assert code == 1
    comparison = json.loads(stdout)
    metrics = {m["metric"]: m for m in comparison["metrics"]}
    assert metrics["route_accuracy"]["regression"] and metrics["route_cost_total"]["regression"]
    cases = {c["id"]: c for c in comparison["cases"]}
    acme = cases["what-is-acme-trading"]
    assert acme["regression"] and (acme["route_before"], acme["route_after"]) == ("ACT", "CONTEXT")
    assert sum(c["regression"] for c in comparison["cases"]) == 6
    code, stdout, _ = invoke("eval", "compare", str(reports["learned"]), str(reports["keyword"]))
    assert code == 1 and "ACT -> CONTEXT, wants ACT" in stdout
    code, _, _ = invoke("eval", "compare", str(reports["keyword"]), str(reports["learned"]))
    assert code == 0


def test_a_mixed_file_runs_the_agent_and_routes_with_the_agents_tools(tmp_path: Path) -> None:
    out, page = tmp_path / "mixed.json", tmp_path / "mixed.html"
    code, stdout, stderr = invoke("eval", MIXED, "--agent", AGENT, "--json", str(out), "--html", str(page))
    assert code == 0, stderr
    assert "over the agent's tools" in stdout and "model scripted" in stdout
    document = json.loads(out.read_text())
    assert document["metrics"]["selection_recall"] == 1.0 and document["metrics"]["calls_per_trial"] == 1.0
    assert document["routing"]["routed"] == 5 and document["metrics"]["route_accuracy"] is not None
    kinds = {c["id"]: (c["runs_agent"], c["routed"]) for c in document["cases"]}
    assert kinds["mixed-status"] == (True, False) and kinds["mixed-how-to"] == (True, True)
    assert kinds["route-refund"] == (False, True)
    assert "id='route-confusion'" in page.read_text()
    code, stdout, stderr = invoke("eval", MIXED, "--agent", AGENT, "--router", TABLE)
    assert code == 0 and "router " in stdout and "table" in stdout, stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([MIXED], "case(s) need an agent run (mixed-status, mixed-how-to); give --agent"),
        ([AGENT_CASES, "--agent", AGENT, "--router", "keyword"], "no case in"),
        ([QUESTIONS, "--router", "nonsense"], "use learned, words, keyword or FILE.py:ATTR"),
        ([QUESTIONS, "--router", "no_such_file.py:make"], "no such file"),
        ([QUESTIONS, "--router", f"{Path(__file__).with_name('routers.py')}:NOT_A_ROUTER"], "not a router"),
        (
            [QUESTIONS, "--router", f"{Path(__file__).with_name('routers.py')}:needs_arguments"],
            "needs arguments",
        ),
        ([QUESTIONS, "--router", f"{Path(__file__).with_name('routers.py')}:JunkRouter"], "must return"),
        ([QUESTIONS, "--router", "keyword", "--threshold", "route_speed=1"], "unknown metric 'route_speed'"),
    ],
)
def test_usage_errors_exit_2_in_one_line(args: list[str], fragment: str) -> None:
    code, _, stderr = invoke("eval", *args)
    assert code == 2, stderr
    assert fragment in " ".join(stderr.split()) and "Traceback" not in stderr


def test_a_bad_route_in_a_case_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "routes.yaml"
    bad.write_text("- input: Book the 09:40\n  expected_route: ACT\n- input: Hi\n  expected_route: TOOL\n")
    code, _, stderr = invoke("eval", str(bad), "--router", "keyword")
    assert code == 2 and "routes.yaml:3" in stderr and "is not a route" in stderr


def test_help_documents_routing_and_the_exit_status() -> None:
    for args in (["eval", "--help"], ["eval", "run", "--help"]):
        code, stdout, _ = invoke(*args)
        text = " ".join(stdout.split())
        assert code == 0 and "0 every threshold met" in text and "1 a threshold missed" in text
        assert "2 a usage error" in text and "--router" in text
    _, stdout, _ = invoke("eval", "run", "--help")
    assert "route_accuracy" in " ".join(stdout.split())
