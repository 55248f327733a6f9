"""Every bad input comes back as a ToolResult whose error teaches the model how to fix the call."""

import pytest

from maitre import ErrorCode

from .conftest import call

pytestmark = pytest.mark.anyio


async def test_a_valid_call_returns_concise_json_with_trust_and_provenance(gate, principal, calls):
    result = await gate.call(call("get_order", {"order_id": "A1042"}), principal)
    assert not result.is_error
    assert result.content == '{"order_id":"A1042","status":"shipped","total_inr":1200}'
    assert result.structured["status"] == "shipped"
    assert result.trust == "trusted"
    assert result.provenance.tool == "get_order" and result.provenance.call_id == "c1"
    assert calls["get_order"] == 1


async def test_unknown_tool_names_the_closest_tools(gate, principal):
    result = await gate.call(call("get_ordr", {"order_id": "A1042"}), principal)
    assert result.is_error and result.error.code == "UNKNOWN_TOOL"
    assert result.error.code == ErrorCode.UNKNOWN_TOOL
    assert result.error.suggestions[0] == "get_order"
    assert "Did you mean 'get_order'?" in result.content
    assert "Available tools:" in result.content


async def test_missing_and_unknown_arguments_list_the_allowed_ones(gate, principal, calls):
    result = await gate.call(call("get_order", {"id": "A1042"}), principal)
    error = result.error
    assert error.code == "INVALID_ARGUMENTS" and error.user_fixable and not error.retryable
    assert error.missing_fields == ["order_id"]
    assert "Unknown argument 'id'" in error.message and "Allowed arguments: order_id" in error.message
    assert 'get_order({"order_id":"A1042"})' in error.message
    assert "get_order" not in calls


async def test_a_pattern_error_names_path_expectation_hint_received_value_and_example(gate, principal):
    result = await gate.call(call("get_order", {"order_id": "1042"}), principal)
    text = result.content
    assert "$.order_id" in text
    assert "^A[0-9]{4}$" in text and "the letter A then 4 digits" in text
    assert 'received "1042" (string)' in text
    assert result.error.details["example"] == 'get_order({"order_id":"A1042"})'


async def test_enum_and_range_errors_show_allowed_values_and_bounds_and_keep_valid_fields(gate, principal):
    result = await gate.call(
        call("issue_refund", {"order_id": "A1042", "amount": 9000, "reason": "angry"}), principal
    )
    text = result.content
    assert '$.reason: expected one of "damaged", "wrong_item", "late"; received "angry"' in text
    assert "$.amount" in text and "less than or equal to 5000" in text
    assert '"order_id":"A1042"' in result.error.details["example"]


async def test_wrong_types_are_refused(gate, principal):
    result = await gate.call(call("get_order", {"order_id": 1042}), principal)
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "received 1042 (integer)" in result.content


async def test_broken_json_text_is_explained_with_an_example(gate, principal):
    result = await gate.call(call("get_order", '{"order_id": "A10'), principal)
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "not valid JSON" in result.content and "character" in result.content
    assert 'get_order({"order_id":"A1042"})' in result.content
    ok = await gate.call(call("get_order", '{"order_id": "A1042"}'), principal)
    assert not ok.is_error


async def test_arguments_that_are_not_an_object_are_refused(gate, principal):
    for arguments in ("[1, 2]", "42", '"text"'):
        result = await gate.call(call("get_order", arguments), principal)
        assert result.error.code == "INVALID_ARGUMENTS"


async def test_a_ten_megabyte_payload_is_refused_before_parsing(gate, principal, calls):
    huge = '{"order_id": "' + "A" * (10 * 1024 * 1024) + '"}'
    result = await gate.call(call("get_order", huge), principal)
    assert result.error.code == "INVALID_ARGUMENTS"
    assert "10,485,7" in result.content and "limit" in result.content
    as_dict = await gate.call(call("get_order", {"order_id": "A" * (10 * 1024 * 1024)}), principal)
    assert as_dict.error.code == "INVALID_ARGUMENTS"
    assert "get_order" not in calls


async def test_decimal_money_is_exact_from_json_text(gate, principal, calls):
    result = await gate.call(
        call("issue_refund", '{"order_id": "A1042", "amount": 1200.50, "reason": "damaged"}'), principal
    )
    assert (
        result.content == '"Refund of 1200.50 INR queued for A1042 (damaged)."' or "1200.50" in result.content
    )
    too_precise = await gate.call(
        call("issue_refund", {"order_id": "A1042", "amount": "10.123", "reason": "late"}), principal
    )
    assert too_precise.error.code == "INVALID_ARGUMENTS"


async def test_a_tool_that_raises_is_internal_without_leaking_details(gate, principal):
    result = await gate.call(call("explode"), principal)
    assert result.error.code == "INTERNAL"
    assert "secret-internal-detail" not in result.content
    assert "Traceback" not in result.content


async def test_an_unserialisable_return_value_is_an_internal_error(gate, principal):
    result = await gate.call(call("weird"), principal)
    assert result.error.code == "INTERNAL" and "cannot be serialised" in result.content


async def test_a_tool_error_raised_by_the_tool_reaches_the_model_as_is(gate, principal):
    result = await gate.call(call("get_order", {"order_id": "A9999"}), principal)
    assert result.error.code == "NOT_FOUND" and result.content == "No order A9999."


async def test_tool_names_that_are_not_strings_do_not_break_the_gate(gate, principal):
    for name in (None, 42, "", "x" * 5000, "orders.\u202eevil"):
        result = await gate.call(call(name), principal)
        assert result.is_error and result.error.code == "UNKNOWN_TOOL"
        assert len(result.content) < 2000


async def test_seed_003_flags_permission_denied_is_never_retryable():
    from maitre import ToolError

    assert ToolError("PERMISSION_DENIED", "no", retryable=True).retryable is False
    assert ToolError("TIMEOUT", "slow").retryable is True
    assert ToolError("INVALID_ARGUMENTS", "bad").user_fixable is True
