"""Metrics on small inputs computed by hand, and pass^k as tau-bench defines it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from maitre.evals import (
    CallRecord,
    EvalCase,
    Tally,
    TrialRecord,
    check_trial,
    pass_at_k,
    pass_hat_k,
    pass_hat_ks,
)
from maitre.evals.metrics import NONE_LABEL, confusion, tally_trial


def case(**fields: Any) -> EvalCase:
    return EvalCase.model_validate({"input": "x", **fields})


def call(
    tool: str, step: int = 1, *, error: str | None = None, executed: bool = True, **kw: Any
) -> CallRecord:
    options = {k: kw.pop(k) for k in ("attempts", "schema_valid") if k in kw}
    return CallRecord(
        call_id=f"{tool}{step}{len(kw)}",
        tool=tool,
        arguments=kw,
        step=step,
        error_code=error,
        executed=executed,
        **options,
    )


def scored(c: EvalCase, *calls: CallRecord, steps: int) -> TrialRecord:
    trial = TrialRecord(case_id=c.id, trial=0, calls=list(calls), steps=steps, stop_reason="completed")
    trial.checks = check_trial(c, trial)
    return trial


REFUND = case(
    id="refund",
    expected_tools=[
        "get_order",
        {"tool": "issue_refund", "arguments": {"order_id": "A1", "amount": {"$any": True}}},
    ],
    constraints={"issue_refund": {"amount": {"$lte": 100}}},
)
NOTHING = case(id="nothing", expected_tools=[])
TRIALS = [
    (
        REFUND,
        scored(
            REFUND,
            call("get_order"),
            call("issue_refund", 2, order_id="A1", amount="50"),
            call("search_kb", 2, error="TIMEOUT", attempts=3),
            steps=3,
        ),
    ),
    (REFUND, scored(REFUND, call("issue_refund", order_id="A2", amount="500"), steps=1)),
    (NOTHING, scored(NOTHING, steps=1)),
    (
        NOTHING,
        scored(
            NOTHING, call("get_order", error="INVALID_ARGUMENTS", executed=False, schema_valid=False), steps=2
        ),
    ),
]


def total() -> Tally:
    return sum((tally_trial(c, t) for c, t in TRIALS), Tally())


def test_which_trials_pass() -> None:
    assert [t.passed for _, t in TRIALS] == [True, False, True, False]


def test_the_four_dimensions_match_the_hand_count() -> None:
    m = total().metrics()
    assert m["pass_rate"] == 0.5
    assert m["selection_precision"] == pytest.approx(3 / 5)  # hits 2+1, chosen 3+1+0+1
    assert m["selection_recall"] == pytest.approx(3 / 4)  # expected 2+2
    assert m["argument_exact"] == pytest.approx(1 / 2)
    assert m["argument_schema_valid"] == pytest.approx(4 / 5)
    assert m["argument_business_valid"] == pytest.approx(1 / 2)  # 50 <= 100 kept, 500 broken
    assert m["error_rate"] == pytest.approx(2 / 5)
    assert m["tool_error_rate"] == pytest.approx(1 / 4)  # executed 3 + 1; the timeout failed
    assert m["timeout_rate"] == pytest.approx(1 / 5)
    assert m["retries_per_call"] == pytest.approx(2 / 5)
    assert m["trajectory_efficiency"] == pytest.approx(4 / 6)  # minimum 2+2+0+0 over 3+2+0+1
    assert m["extra_calls_per_trial"] == pytest.approx(2 / 4)
    assert m["extra_steps_per_trial"] == pytest.approx(2 / 4)
    assert m["calls_per_trial"] == pytest.approx(5 / 4)
    assert dict(total().error_codes) == {"TIMEOUT": 1, "INVALID_ARGUMENTS": 1}


def test_a_ratio_with_nothing_to_count_is_none_not_zero_or_one() -> None:
    m = tally_trial(NOTHING, scored(NOTHING, steps=1)).metrics()
    assert m["selection_precision"] is None and m["selection_recall"] is None
    assert m["argument_exact"] is None and m["error_rate"] is None
    assert Tally().metrics()["pass_rate"] is None


def test_duplicate_calls_are_the_same_tool_with_the_same_arguments() -> None:
    c = case(expected_tool="get_order")
    t = scored(
        c,
        call("get_order", order_id="A1"),
        call("get_order", 2, order_id="A1"),
        call("get_order", 3, order_id="A2"),
        steps=4,
    )
    assert tally_trial(c, t).duplicate_calls == 1


def test_the_confusion_matrix_pairs_a_missed_tool_with_the_one_chosen_instead() -> None:
    counts = confusion(TRIALS)
    assert counts == {
        ("get_order", "get_order"): 1,
        ("issue_refund", "issue_refund"): 2,
        (NONE_LABEL, "search_kb"): 1,
        ("get_order", NONE_LABEL): 1,
        (NONE_LABEL, NONE_LABEL): 1,
        (NONE_LABEL, "get_order"): 1,
    }
    wrong = case(expected_tool="get_ticket_status")
    assert confusion([(wrong, scored(wrong, call("create_ticket_draft"), steps=2))]) == {
        ("get_ticket_status", "create_ticket_draft"): 1
    }


# -- pass^k ---------------------------------------------------------------------------------------------


def test_pass_hat_k_on_a_small_example() -> None:
    counts = [(3, 3), (2, 3), (0, 3)]
    assert pass_hat_ks(counts) == pytest.approx({1: 5 / 9, 2: (1 + 1 / 3) / 3, 3: 1 / 3})


def brute_force(c: int, n: int, k: int) -> float:
    """The share of k-subsets of n trials (c of them passing) in which every trial passed."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(all(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(("c", "n"), [(0, 4), (1, 4), (3, 4), (4, 4), (5, 8), (2, 2)])
def test_pass_hat_k_is_the_chance_that_k_trials_drawn_from_n_all_pass(c: int, n: int) -> None:
    for k in range(1, n + 1):
        assert pass_hat_k([(c, n)], k) == pytest.approx(brute_force(c, n, k))


def test_pass_hat_k_needs_k_trials_and_falls_while_pass_at_k_rises() -> None:
    assert pass_hat_k([(2, 2), (1, 3)], 3) is None
    assert pass_hat_k([], 1) is None
    hats = [pass_hat_k([(3, 5)], k) for k in range(1, 6)]
    ats = [pass_at_k(3, 5, k) for k in range(1, 6)]
    assert hats == sorted(hats, reverse=True) and hats[-1] == 0
    assert ats == sorted(ats) and ats[-1] == 1.0
    assert hats[0] == ats[0] == pytest.approx(3 / 5)
