"""Seed 000's six calls through maitre's gate give the seed's outcomes, with better errors."""

import anyio
from registry import box, run_calls


def test_the_six_calls_have_the_seeds_outcomes():
    results = anyio.run(run_calls)
    codes = [r.error.code if r.is_error else "ok" for r in results]
    assert codes == [
        "UNKNOWN_TOOL",
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "INVALID_ARGUMENTS",
        "ok",
        "ok",
    ]
    unknown, wrong_arg, bad_id, bad_refund, refund, order = results
    assert "Did you mean 'get_order'?" in unknown.content
    assert "Unknown argument 'id'" in wrong_arg.content and "Allowed arguments: order_id" in wrong_arg.content
    assert "the letter A then 4 digits" in bad_id.content and '"1042"' in bad_id.content
    assert '"damaged", "wrong_item", "late"' in bad_refund.content and "5000" in bad_refund.content
    assert (
        refund.content == '"Refund of 1200 INR queued for A1042 (damaged)."'
        or "Refund of 1200" in refund.content
    )
    assert "shipped, arrives Friday" in order.content


def test_definitions_are_what_the_model_sees():
    assert [d["name"] for d in box.definitions("anthropic")] == ["get_order", "issue_refund"]
