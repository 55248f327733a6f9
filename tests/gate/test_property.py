"""Whatever a model sends, the gate answers with a ToolResult (hypothesis, 10,000+ examples)."""

import json

from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maitre import Gate, Principal, ToolCall, ToolResult

from .conftest import make_box

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=10,
)
names = st.sampled_from(
    ["get_order", "issue_refund", "get_ordr", "read_result", "explode", "weird", "", "orders.get_order"]
) | st.text(max_size=40)
arguments = (
    st.dictionaries(
        st.sampled_from(["order_id", "amount", "reason", "x", "page", "handle"]) | st.text(max_size=8),
        json_values,
        max_size=4,
    )
    | json_values.map(lambda v: json.dumps(v))
    | st.text(max_size=200)
    | st.just("x" * 300_000)
    | json_values
)

GATE = Gate(make_box({}))
PRINCIPAL = Principal(user="fuzz")


def test_the_gate_always_returns_a_tool_result():
    with start_blocking_portal() as portal:  # one event loop for every example
        _check(portal)


@settings(max_examples=10_500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=names, args=arguments)
def _fuzz(portal, name, args):
    result = portal.call(GATE.call, ToolCall(id="fuzz", name=name, arguments=args), PRINCIPAL)
    assert isinstance(result, ToolResult)
    assert isinstance(result.content, str)
    if result.is_error:
        assert result.error is not None and result.error.message


def _check(portal):
    _fuzz(portal)
