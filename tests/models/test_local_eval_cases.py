"""The real-model evaluation's case file (issue 19, item 6) is what the issue asks for and loads."""

from __future__ import annotations

from pathlib import Path

from maitre.evals import load_cases

CASES = Path(__file__).parents[2] / "benchmarks" / "data" / "local_model" / "cases.jsonl"


def test_ten_tool_decisions_and_five_recoveries_that_a_schema_cannot_prevent() -> None:
    cases = load_cases(str(CASES))
    decisions = [c for c in cases if "decision" in c.tags]
    recoveries = [c for c in cases if "recovery" in c.tags]
    assert (len(decisions), len(recoveries), len(cases)) == (10, 5, 15)
    ids = {c.id for c in decisions}
    assert {"order-malformed-id", "weekend-parallel", "refund-needs-approval", "search-200-tools"} <= ids
    # each recovery is an error the schema allows: a well-formed call the world or a person refuses
    assert all(c.expected_stop_reason == "completed" for c in recoveries)
    assert any(c.on_approval == "deny" for c in recoveries)
