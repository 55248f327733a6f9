"""Seeded fuzzing of `Gate.call` (issue 10): a malformed input is refused, never INTERNAL, and audited.

The toolbox's tools never raise, so any INTERNAL result is the runtime's own failure. `make bench`
(`benchmarks/fuzz_bench.py`) runs 100,000 inputs of the same stream; this runs a few thousand.
A failure names its input as seed and index: `fuzz_inputs.gate_input(SEED, INDEX)` rebuilds it.
"""

from __future__ import annotations

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings

from fuzz_inputs import (
    GATE_FAMILIES,
    fuzz_gate,
    fuzz_toolbox,
    gate_failure,
    gate_input_strategy,
    gate_inputs,
    run_gate_inputs,
)
from maitre import Gate, Principal, Toolbox, ToolCall

pytestmark = pytest.mark.anyio
SEED = "make-test"


async def test_three_thousand_seeded_gate_inputs_are_never_internal_and_every_call_is_audited():
    """3,000 inputs of every family through one gate: no INTERNAL, one audit entry per call."""
    report = await run_gate_inputs(gate_inputs(SEED, 3_000))
    assert report.failure_count == 0, report.summary()
    assert report.audited == report.total == 3_000
    # The stream reaches past the first refusal: tools run, approvals are asked, names are taught.
    for outcome in ("ok", "INVALID_ARGUMENTS", "UNKNOWN_TOOL", "APPROVAL_REQUIRED"):
        assert report.outcomes[outcome] >= 30, report.summary()


@pytest.mark.parametrize("family", sorted(GATE_FAMILIES))
async def test_each_family_of_hostile_input_alone_is_refused_or_run_never_internal(family):
    """150 inputs of one family (so a failure names the family), each audited once."""
    report = await run_gate_inputs(gate_inputs(f"{SEED}-{family}", 150, families=(family,)))
    assert report.failure_count == 0, report.summary()
    assert report.audited == report.total == 150


async def test_an_unknown_tool_name_with_a_lone_surrogate_is_taught_back_escaped():
    """The UNKNOWN_TOOL message echoed "\\ud800" raw, so no transport could send it."""
    gate = Gate(fuzz_toolbox())
    result = await gate.call(ToolCall(id="c1", name="get_order\ud800", arguments={}), Principal(user="u"))
    assert result.error is not None and result.error.code == "UNKNOWN_TOOL"
    assert "get_order\\ud800" in result.content
    assert gate_failure(result) is None


async def test_the_fuzz_oracle_flags_an_internal_result():
    """A tool that raises is INTERNAL: the oracle the fuzzers rely on reports it (it is not vacuous)."""
    box = Toolbox()

    @box.tool
    def boom() -> str:
        """Raise."""
        raise RuntimeError("bug")

    result = await Gate(box).call(ToolCall(id="c1", name="boom", arguments={}), Principal(user="u"))
    assert gate_failure(result) == "INTERNAL (RuntimeError)"


GATE = fuzz_gate()


def test_hypothesis_driven_gate_inputs_are_never_internal():
    """300 inputs from the same builders with hypothesis choosing (and shrinking) the random draws."""
    with start_blocking_portal() as portal:  # one event loop for every example
        _fuzz(portal)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(item=gate_input_strategy())
def _fuzz(portal, item):
    result = portal.call(GATE.call, item.call, item.principal, None, item.options)
    assert gate_failure(result) is None, f"{gate_failure(result)}: {item.describe()}"
