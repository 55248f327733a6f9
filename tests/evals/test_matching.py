"""BFCL-style matching: every rule matches what it should and refuses what it should not."""

from __future__ import annotations

from typing import Any

import pytest

from maitre.evals import CallRecord, EvalCase, TrialRecord, check_trial, match_value
from maitre.evals.matching import check_spec


def ok(spec: Any, actual: Any, **options: Any) -> bool:
    return not match_value(spec, actual, **options)


# -- plain values ---------------------------------------------------------------------------------------


def test_numbers_compare_by_value_and_a_boolean_is_never_a_number() -> None:
    assert ok(1, 1.0) and ok(2.50, 2.5) and ok(0, 0)
    assert not ok(1, 2)
    assert not ok(1, True)
    assert not ok(0.3, 0.1 + 0.2)  # by exact value, not within a tolerance


def test_a_numeric_string_does_not_match_a_number_nor_the_reverse() -> None:
    [problem] = match_value(1, "1", path="n")
    assert "a string" in problem.message and problem.path == "n"
    assert not ok("1", 1)


def test_strings_match_exactly() -> None:
    assert ok("T-123456", "T-123456")
    assert not ok("T-123456", "t-123456")
    assert not ok("T-123456", "T-123456 ")


def test_null_and_booleans() -> None:
    assert ok(None, None) and ok(True, True)
    assert not ok(None, "") and not ok(True, 1) and not ok(False, None)


# -- objects and lists ----------------------------------------------------------------------------------


def test_an_object_needs_every_named_key_and_refuses_others_unless_allowed() -> None:
    spec = {"ticket_id": "T-1"}
    assert ok(spec, {"ticket_id": "T-1"})
    [missing] = match_value(spec, {})
    assert missing.path == "ticket_id" and missing.message == "missing"
    [extra] = match_value(spec, {"ticket_id": "T-1", "force": True})
    assert extra.path == "force" and "unexpected" in extra.message
    assert ok(spec, {"ticket_id": "T-1", "force": True}, allow_extra=True)


def test_optional_members_may_be_absent_but_must_match_when_present() -> None:
    spec = {"id": "A", "note": {"$optional": {"$type": "string"}}}
    assert ok(spec, {"id": "A"})
    assert ok(spec, {"id": "A", "note": "hi"})
    assert not ok(spec, {"id": "A", "note": 3})


def test_absent_members_must_not_be_sent() -> None:
    spec = {"id": "A", "tenant": {"$absent": True}}
    assert ok(spec, {"id": "A"})
    [problem] = match_value(spec, {"id": "A", "tenant": "other"})
    assert problem.path == "tenant" and "absent" in problem.message


def test_nested_objects_and_lists_report_the_path_of_the_wrong_value() -> None:
    spec = {"order": {"items": [{"sku": "X1", "qty": 1}, {"sku": "X2", "qty": 2}]}}
    assert ok(spec, {"order": {"items": [{"sku": "X1", "qty": 1.0}, {"sku": "X2", "qty": 2}]}})
    [problem] = match_value(spec, {"order": {"items": [{"sku": "X1", "qty": 1}, {"sku": "X9", "qty": 2}]}})
    assert problem.path == "order.items[1].sku"


def test_lists_match_in_order_and_length() -> None:
    assert ok(["a", "b"], ["a", "b"])
    assert not ok(["a", "b"], ["b", "a"])
    assert not ok(["a"], ["a", "a"])
    assert not ok(["a"], "a")


def test_unordered_lists_find_a_matching_even_when_the_greedy_choice_is_wrong() -> None:
    spec = {"$unordered": [{"$type": "string"}, "a"]}
    assert ok(spec, ["a", "b"])  # a greedy match gives "a" to the first spec and fails on "b"
    assert ok(spec, ["b", "a"])
    assert not ok(spec, ["b", "c"])
    assert not ok(spec, ["a"])


# -- operators ------------------------------------------------------------------------------------------


def test_one_of_accepts_any_listed_value_only() -> None:
    spec = {"$one_of": ["billing", "other"]}
    assert ok(spec, "billing") and ok(spec, "other")
    assert not ok(spec, "technical")


def test_type_follows_json_schema() -> None:
    assert ok({"$type": "integer"}, 2) and ok({"$type": "integer"}, 2.0)
    assert not ok({"$type": "integer"}, 2.5) and not ok({"$type": "integer"}, True)
    assert ok({"$type": "number"}, 2) and not ok({"$type": "number"}, "2")
    assert ok({"$type": ["string", "null"]}, None)
    assert not ok({"$type": "object"}, [])


def test_decimal_compares_numbers_and_decimal_strings_by_value() -> None:
    spec = {"$decimal": "12.5"}
    assert ok(spec, "12.50") and ok(spec, 12.5) and ok(spec, "12.5")
    assert not ok(spec, "12.51")
    assert not ok(spec, "twelve")
    assert not ok(spec, True)


def test_ranges_take_numbers_and_decimal_strings() -> None:
    spec = {"$gt": 0, "$lte": 100}
    assert ok(spec, 100) and ok(spec, "0.01") and ok(spec, "100.00")
    assert not ok(spec, 0) and not ok(spec, "100.01") and not ok(spec, "lots")
    assert ok({"$gte": 1, "$lt": 2}, 1) and not ok({"$gte": 1, "$lt": 2}, 2)


def test_regex_and_contains() -> None:
    assert ok({"$regex": r"^T-\d{6}$"}, "T-123456")
    assert not ok({"$regex": r"^T-\d{6}$"}, "T-12345")
    assert not ok({"$regex": "x"}, 1)
    assert ok({"$contains": "Billed Twice"}, "I was billed twice")
    assert not ok({"$contains": "refund"}, "I was billed twice")


def test_exact_takes_dollar_keys_literally() -> None:
    spec = {"filter": {"$exact": {"$gt": 5}}}
    assert ok(spec, {"filter": {"$gt": 5}})
    assert not ok(spec, {"filter": 6})


def test_several_operators_in_one_object_must_all_hold() -> None:
    spec = {"$type": "string", "$regex": "^A", "$contains": "42"}
    assert ok(spec, "A1042")
    assert not ok(spec, "B1042")
    assert not ok(spec, "A1000")


# -- dates ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    ["2026-07-22", "20260722", "2026/07/22", "22 July 2026", "22 Jul 2026", "July 22, 2026", "Jul 22, 2026"],
)
def test_an_iso_date_matches_the_same_date_in_any_accepted_format(written: str) -> None:
    assert ok("2026-07-22", written)
    assert ok({"$date": "22 July 2026"}, written)


@pytest.mark.parametrize(
    "written", ["2026-07-23", "07/22/2026", "22/07/2026", "tomorrow", "2026-07-22T00:00:00"]
)
def test_another_date_an_ambiguous_one_or_a_date_time_does_not(written: str) -> None:
    assert not ok("2026-07-22", written)


def test_date_times_compare_as_instants_across_offsets() -> None:
    assert ok("2026-07-22T10:00:00Z", "2026-07-22T12:00:00+02:00")
    assert ok("2026-07-22T10:00:00Z", "2026-07-22T10:00:00")  # no offset: UTC
    assert not ok("2026-07-22T10:00:00Z", "2026-07-22T10:00:01Z")
    assert not ok("2026-07-22T10:00:00Z", "2026-07-22")


# -- specs that are themselves wrong --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"a": {"$oneof": [1]}}, "unknown operator $oneof"),
        ({"a": {"$type": "text"}}, "$type takes"),
        ({"a": {"$regex": "("}}, "does not compile"),
        ({"a": {"$one_of": []}}, "non-empty list"),
        ({"a": {"$gt": "x"}}, "takes a number"),
        ({"a": {"$date": "soon"}}, "$date takes a date"),
        ({"a": {"$type": "string", "plain": 1}}, "mixes operators"),
        ([{"$optional": 1}], "only to an object's member"),
    ],
)
def test_check_spec_names_what_is_wrong(spec: Any, fragment: str) -> None:
    problems = check_spec(spec)
    assert problems and any(fragment in p for p in problems), problems


# -- the checks of a trial ------------------------------------------------------------------------------


def case(**fields: Any) -> EvalCase:
    return EvalCase.model_validate({"id": "c", "input": "do it", **fields})


def trial(*calls: CallRecord, stop_reason: str = "completed", steps: int = 2) -> TrialRecord:
    return TrialRecord(case_id="c", trial=0, calls=list(calls), stop_reason=stop_reason, steps=steps)


def rec(tool: str, step: int = 1, approval: bool = False, **arguments: Any) -> CallRecord:
    return CallRecord(
        call_id=f"{tool}-{step}", tool=tool, arguments=arguments, step=step, approval_requested=approval
    )


def failed(c: EvalCase, t: TrialRecord) -> dict[str, str]:
    return {check.name: check.detail for check in check_trial(c, t) if not check.ok}


SEED = {
    "input": "Check the status of ticket T-123456",
    "expected_tool": "get_ticket_status",
    "expected_arguments": {"ticket_id": "T-123456"},
    "forbidden_tools": ["create_ticket_draft"],
    "max_tool_calls": 1,
}


def test_seed_003s_case_passes_on_the_right_call_with_a_prefixed_tool_name() -> None:
    assert failed(case(**SEED), trial(rec("support.get_ticket_status", ticket_id="T-123456"))) == {}


def test_seed_003s_case_fails_each_way_it_can() -> None:
    c = case(**SEED)
    assert set(failed(c, trial(rec("get_ticket_status", ticket_id="T-654321")))) == {"arguments"}
    assert set(failed(c, trial(rec("search_tickets", q="T-123456")))) == {"selection", "arguments"}
    wrong_and_right = trial(
        rec("create_ticket_draft", title="x"), rec("get_ticket_status", 2, ticket_id="T-123456")
    )
    assert set(failed(c, wrong_and_right)) == {"forbidden", "max_tool_calls"}


def test_ordered_tools_must_come_in_order() -> None:
    c = case(expected_tools=["get_order", "issue_refund"], tool_order="ordered")
    assert failed(c, trial(rec("get_order"), rec("search", 1), rec("issue_refund", 2))) == {}
    assert set(failed(c, trial(rec("issue_refund"), rec("get_order", 2)))) == {"order"}
    unordered = case(expected_tools=["get_order", "issue_refund"])
    assert failed(unordered, trial(rec("issue_refund"), rec("get_order", 2))) == {}


def test_an_empty_expected_list_means_no_tool_but_runtime_tools_do_not_count() -> None:
    c = case(expected_tools=[])
    assert failed(c, trial(rec("write_notes", text="plan"))) == {}
    assert "get_order" in failed(c, trial(rec("get_order")))["selection"]


def test_stop_reason_and_approval_expectations() -> None:
    c = case(expected_stop_reason="approval_required", expected_approval=["issue_refund"])
    assert failed(c, trial(rec("issue_refund", approval=True), stop_reason="approval_required")) == {}
    assert set(failed(c, trial(rec("issue_refund")))) == {"stop_reason", "approval"}
    assert set(failed(case(expected_approval=False), trial(rec("x", approval=True)))) == {"approval"}
    assert failed(case(expected_approval=True), trial(rec("x", approval=True))) == {}


def test_business_constraints_hold_on_every_call_of_their_tool() -> None:
    c = case(constraints={"issue_refund": {"amount": {"$gt": 0, "$lte": 100}}})
    assert failed(c, trial(rec("shop.issue_refund", amount="40.00"), rec("get_order", amount="999"))) == {}
    assert "amount" in failed(c, trial(rec("shop.issue_refund", amount="140.00")))["constraints"]


def test_arguments_match_when_any_call_of_the_tool_matches() -> None:
    c = case(expected_tool="get_order", expected_arguments={"order_id": "A1042"})
    assert failed(c, trial(rec("get_order", order_id="A9999"), rec("get_order", 2, order_id="A1042"))) == {}
    broken = CallRecord(call_id="x", tool="get_order", arguments=None, step=1)
    assert "not a JSON object" in failed(c, trial(broken))["arguments"]


def test_nan_and_infinity_are_no_numbers_for_ranges_or_decimals() -> None:
    assert not ok({"$lte": 100}, float("nan"))
    assert not ok({"$gte": 0}, float("inf"))
    assert not ok({"$decimal": "1"}, float("nan"))
