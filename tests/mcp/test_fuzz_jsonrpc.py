"""Seeded fuzzing of the MCP HTTP door (issue 10): hostile bodies get 4xx or JSON-RPC errors, never a 5xx.

A real server on 127.0.0.1 (ephemeral port) serves `fuzz_inputs.fuzz_toolbox()`, whose tools never
raise. A failure is an HTTP 5xx, a JSON-RPC -32603, a dropped connection, an answer that is not
JSON-RPC, or a gate INTERNAL result; every call that reached the gate must be in its audit log.
`make bench` (`benchmarks/fuzz_bench.py`) sends 20,000 bodies of the same stream; this sends a few
hundred. `fuzz_inputs.jsonrpc_body(SEED, INDEX)` rebuilds a failing one.
"""

from __future__ import annotations

import pytest

from fuzz_inputs import BODY_FAMILIES, fuzz_gate, fuzz_toolbox, jsonrpc_bodies, post_bodies
from maitre.mcp.app import MCPApp
from maitre.mcp.server import GovernedServer
from maitre.mcp.testing import raw_request
from maitre.mcp.transports import running_http
from maitre.testing import capture_calls

pytestmark = pytest.mark.anyio
SEED = "make-test"


async def _fuzz(bodies):
    box = fuzz_toolbox()
    gate = fuzz_gate(box)
    with capture_calls(gate) as reached:  # one per call that reached the gate
        async with running_http(GovernedServer(MCPApp(box, gate=gate))) as url:
            report = await post_bodies(url, bodies, concurrency=4)
            status, answer = await raw_request(
                url, "tools/call", {"name": "get_order", "arguments": {"order_id": "A1042"}}, name="get_order"
            )
    audited = len(await gate.stores.audit.entries())
    return report, reached, audited, (status, answer)


async def test_four_hundred_hostile_jsonrpc_bodies_get_4xx_or_jsonrpc_errors_never_5xx_or_internal():
    """400 bodies of every family; the server still answers a plain call afterwards."""
    report, reached, audited, (status, answer) = await _fuzz(jsonrpc_bodies(SEED, 400))
    assert report.failure_count == 0, report.summary()
    assert report.total == 400
    assert audited == len(reached) > 50, report.summary()
    assert status == 200 and answer["result"]["isError"] is False
    # The bodies reach the gate and its refusals, not only the transport's.
    assert any(o.startswith("http 200 tool INVALID_ARGUMENTS") for o in report.outcomes), report.summary()
    assert any(o.startswith("http 400") for o in report.outcomes), report.summary()


@pytest.mark.parametrize("family", sorted(BODY_FAMILIES))
async def test_each_family_of_hostile_body_alone_is_answered_without_a_server_error(family):
    """40 bodies of one family, so a failure names the family."""
    report, reached, audited, _ = await _fuzz(jsonrpc_bodies(f"{SEED}-{family}", 40, families=(family,)))
    assert report.failure_count == 0, report.summary()
    assert audited == len(reached)
