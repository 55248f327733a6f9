"""`maitre eval` and `maitre eval compare` on the example, as the README runs them: exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maitre.cli import app

ROOT = Path(__file__).resolve().parents[2]
CASES = str(ROOT / "examples" / "evals" / "cases.jsonl")
AGENT = f"{ROOT / 'examples' / 'evals' / 'agent.py'}:make_agent"


def invoke(*args: str, columns: int = 80) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "a.json"
    code, stdout, _ = invoke("eval", CASES, "--agent", AGENT, "--trials", "3", "--json", str(out))
    assert code == 0 and "where-is-my-order" in stdout
    return out


def test_the_example_runs_and_its_numbers_are_the_hand_counted_ones(baseline: Path) -> None:
    document = json.loads(baseline.read_text())
    assert document["schema"] == "maitre.eval.report" and document["version"] == 1
    metrics = document["metrics"]
    # 7 cases x 3 trials: five pass every trial, callback-date 2 of 3, where-is-my-order never.
    assert metrics["pass^1"] == pytest.approx((5 + 2 / 3) / 7, abs=1e-6)
    assert metrics["pass^2"] == pytest.approx((5 + 1 / 3) / 7, abs=1e-6)
    assert metrics["pass^3"] == pytest.approx(5 / 7, abs=1e-6)
    assert metrics["selection_recall"] == 1.0 and metrics["selection_precision"] < 1.0
    by_id = {c["id"]: c for c in document["cases"]}
    assert by_id["callback-date"]["passed"] == 2
    assert by_id["refund-after-lookup"]["metrics"]["approvals_per_trial"] == 1.0
    assert {"expected": "get_order", "chosen": "get_order", "count": 6} in document["confusion"]
    assert {"expected": "(none)", "chosen": "search_kb", "count": 3} in document[
        "confusion"
    ]  # one name per tool


def test_thresholds_decide_the_exit_status(tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    code, _, stderr = invoke(
        "eval",
        CASES,
        "--agent",
        AGENT,
        "--threshold",
        "pass_rate=0.75",
        "--threshold",
        "error_rate=0.1",
        "--html",
        str(html),
    )
    assert code == 0, stderr
    assert html.read_text().startswith("<!DOCTYPE html>")
    code, stdout, stderr = invoke("eval", CASES, "--agent", AGENT, "-k", "3", "--threshold", "pass^k>=0.9")
    assert code == 1
    assert "threshold missed: pass^3" in stderr and "MISSED" in stdout


def test_yaml_cases_and_the_test_model_run_too() -> None:
    code, stdout, stderr = invoke("eval", str(ROOT / "examples" / "evals" / "cases.yaml"), "--agent", AGENT)
    assert code == 0, stderr
    assert "yaml-callback" in stdout
    # A terminal narrower than the agent's path: what ran is still one line each, not wrapped.
    code, stdout, stderr = invoke("eval", CASES, "--agent", AGENT, "--model", "test", columns=40)
    assert code == 0, stderr
    assert "\nmodel test\n" in stdout and f"agent {ROOT / 'examples' / 'evals' / 'agent.py'}" in stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--threshold", "speed=1"], "unknown metric 'speed'"),
        (["--threshold", "calls_per_trial=1"], "use >= or <="),
        (["--threshold", "pass_rate"], "METRIC=VALUE"),
        (["--agent", "no_such_file.py:make_agent"], "no such file"),
        (["--agent", f"{ROOT / 'examples' / 'evals' / 'agent.py'}:TICKETS"], "name a function"),
        (["--agent", f"{ROOT / 'examples' / 'evals' / 'agent.py'}:box"], "is a Toolbox"),
        (["--model", "nonsense:thing"], "cannot import module"),
        (["--trials", "0"], "greater than or equal to 1"),
    ],
)
def test_usage_errors_exit_2_in_one_line(args: list[str], fragment: str) -> None:
    full = ["eval", CASES, "--agent", AGENT, *args] if "--agent" not in args else ["eval", CASES, *args]
    code, _, stderr = invoke(*full)
    assert code == 2, stderr
    assert fragment in stderr and "Traceback" not in stderr


def test_a_bad_case_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "cases.jsonl"
    bad.write_text(
        '{"input": "x"}\n{"input": "y", "expected_tool": "a", "expected_arguments": {"a": {"$nope": 1}}}\n'
    )
    code, _, stderr = invoke("eval", str(bad), "--agent", AGENT)
    assert code == 2 and "cases.jsonl:2" in stderr and "$nope" in stderr


def test_help_documents_the_exit_status() -> None:
    for args in (["eval", "--help"], ["eval", "run", "--help"]):
        code, stdout, _ = invoke(*args)
        assert code == 0 and "1 a threshold missed" in " ".join(stdout.split())


def test_compare_shows_a_regression_per_metric_and_per_case(baseline: Path, tmp_path: Path) -> None:
    worse = tmp_path / "b.json"
    code, _, stderr = invoke(
        "eval", CASES, "--agent", AGENT, "--trials", "3", "--model", "test", "--json", str(worse)
    )
    assert code == 0, stderr
    code, stdout, _ = invoke("eval", "compare", str(baseline), str(worse), "--json")
    assert code == 1
    comparison = json.loads(stdout)
    metrics = {m["metric"]: m for m in comparison["metrics"]}
    assert metrics["selection_precision"]["regression"] and metrics["pass_rate"]["regression"]
    assert not metrics["calls_per_trial"]["regression"]  # neutral: changed, never a regression
    cases = {c["id"]: c for c in comparison["cases"]}
    assert cases["how-to"]["regression"] and cases["how-to"]["before"] == [3, 3]
    assert not cases["where-is-my-order"]["regression"]  # it failed before too
    code, stdout, _ = invoke("eval", "compare", str(baseline), str(worse))
    assert code == 1 and "REGRESSION" in stdout and "how-to" in stdout
    code, stdout, _ = invoke("eval", "compare", str(baseline), str(baseline))
    assert code == 0 and "0 of 7 cases regressed" in stdout and "REGRESSION" not in stdout


def test_compare_refuses_a_file_that_is_not_a_report(baseline: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    code, _, stderr = invoke("eval", "compare", str(baseline), str(other))
    assert code == 2 and "not a maitre eval report" in stderr
    code, _, stderr = invoke("eval", "compare", str(baseline), str(tmp_path / "missing.json"))
    assert code == 2 and "no such report" in stderr
