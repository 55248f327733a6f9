"""APPROVAL_REQUIRED over MCP: input_required (2026-07-28) or inline elicitation (2025-11-25),
bound to the exact call; replays, edits and self-approval where the policy forbids it never run."""

from __future__ import annotations

from typing import Annotated

import mcp_types as types
import pytest
from pydantic import Field

from maitre import Gate, Principal, Toolbox
from maitre.mcp.app import MCPApp
from maitre.mcp.server import APPROVAL_INPUT_KEY, APPROVAL_META_KEY, GovernedServer
from maitre.mcp.testing import raw_request
from maitre.mcp.transports import running_http
from maitre.policy import DefaultPolicy
from mcp import Client

pytestmark = pytest.mark.anyio


def _server(*, self_approval: bool = True) -> tuple[GovernedServer, list[str]]:
    deleted: list[str] = []
    box = Toolbox()

    @box.tool(effect="destructive", risk="high")
    def delete_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
        """Delete an order for good. Use it only when the customer asks to erase it."""
        deleted.append(order_id)
        return f"deleted {order_id}"

    gate = Gate(box, policy=DefaultPolicy(allow_self_approval=self_approval))
    return GovernedServer(MCPApp(box, name="shop", gate=gate)), deleted


def _answer(approve: bool):
    async def callback(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert "delete_order" in params.message and "A1042" in params.message
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_confirmed_call_runs_exactly_once(mode):
    """The client is asked (input_required or elicitation/create), confirms, and the call runs once."""
    server, deleted = _server()
    async with (
        running_http(server) as url,
        Client(url, mode=mode, elicitation_callback=_answer(True)) as client,
    ):
        result = await client.call_tool("delete_order", {"order_id": "A1042"})
    assert not result.is_error and result.content[0].text == "deleted A1042"
    assert deleted == ["A1042"]


async def test_a_declined_call_never_runs_and_the_model_is_told():
    """A decline is recorded as a denial; the model reads APPROVAL_DENIED."""
    server, deleted = _server()
    async with Client(server.lowlevel, mode="2026-07-28", elicitation_callback=_answer(False)) as client:
        result = await client.call_tool("delete_order", {"order_id": "A1042"})
    assert result.is_error and result.meta["io.maitre/error"]["code"] == "APPROVAL_DENIED"
    assert deleted == []


async def test_a_replayed_or_retargeted_approval_never_runs_twice_or_elsewhere():
    """The same approved state replayed, or carried to other arguments, executes nothing more."""
    server, deleted = _server()
    call = {"name": "delete_order", "arguments": {"order_id": "A1042"}}
    yes = {APPROVAL_INPUT_KEY: {"action": "accept", "content": {"approve": True}}}
    async with running_http(server) as url:
        _, first = await raw_request(
            url, "tools/call", call, name="delete_order", capabilities={"elicitation": {}}
        )
        state = first["result"]["requestState"]
        request = first["result"]["inputRequests"][APPROVAL_INPUT_KEY]
        assert request["method"] == "elicitation/create"
        _, ok = await raw_request(
            url, "tools/call", {**call, "requestState": state, "inputResponses": yes}, name="delete_order"
        )
        assert ok["result"]["content"][0]["text"] == "deleted A1042"
        _, replay = await raw_request(
            url, "tools/call", {**call, "requestState": state, "inputResponses": yes}, name="delete_order"
        )
        assert replay["result"]["isError"] or replay["result"].get("_meta", {}).get("io.maitre/replayed")
        other = {
            "name": "delete_order",
            "arguments": {"order_id": "A9999"},
            "requestState": state,
            "inputResponses": yes,
        }
        _, moved = await raw_request(url, "tools/call", other, name="delete_order")
        assert moved["error"]["code"] == -32602
    assert deleted == ["A1042"]


async def test_without_elicitation_or_self_approval_the_call_waits_for_another_person():
    """Policy forbids self-approval: no elicitation, a teaching error naming the approval id; another
    person approves out of band and the host retries with the approval id in `_meta`."""
    server, deleted = _server(self_approval=False)
    async with Client(server.lowlevel, mode="2026-07-28", elicitation_callback=_answer(True)) as client:
        waiting = await client.call_tool("delete_order", {"order_id": "A1042"})
        assert waiting.is_error and deleted == []
        approval_id = waiting.meta["io.maitre/error"]["details"]["approval_id"]
        assert approval_id in waiting.content[0].text
        await server.gate.approvals.approve(approval_id, approver=Principal(user="manager", tenant="local"))
        done = await client.call_tool(
            "delete_order", {"order_id": "A1042"}, meta={APPROVAL_META_KEY: approval_id}
        )
        again = await client.call_tool(
            "delete_order", {"order_id": "A1042"}, meta={APPROVAL_META_KEY: approval_id}
        )
    assert not done.is_error and done.content[0].text == "deleted A1042"
    # An approval works once: the same call again is the host retrying it, and it replays the first
    # result (the runless write is deduplicated per principal) instead of deleting twice.
    assert again.meta["io.maitre/replayed"] is True and "replayed" in again.content[-1].text
    assert deleted == ["A1042"]
