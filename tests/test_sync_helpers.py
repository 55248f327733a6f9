"""Gate.call_sync and Agent.run_sync / resume_sync: the async API from scripts and notebooks."""

from __future__ import annotations

import os

import anyio
import pytest

from maitre import Agent, Gate, Principal, ScriptedModel, Toolbox, ToolCall
from maitre.models import Rule, after_tool, call, last_user_says
from maitre.stores import SQLiteStores

ALICE = Principal(user="alice", tenant="acme")


def _box(ran: list[str]) -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write", risk="low", business_key=("order_id",))
    def refund(order_id: str) -> str:
        """Refund an order."""
        ran.append(order_id)
        return f"refunded {order_id}"

    return box


def test_call_sync_runs_a_governed_call_from_plain_code(tmp_path) -> None:
    ran: list[str] = []
    stores = SQLiteStores(os.path.join(tmp_path, "m.db"))
    gate = Gate(_box(ran), stores=stores)
    first = gate.call_sync(ToolCall(id="c1", name="refund", arguments={"order_id": "A1"}), ALICE)
    again = gate.call_sync(ToolCall(id="c2", name="refund", arguments={"order_id": "A1"}), ALICE)
    assert first.content == "refunded A1" and again.replayed and ran == ["A1"]
    bad = gate.call_sync(ToolCall(id="c3", name="refund", arguments={}), ALICE)
    assert bad.is_error and "order_id" in bad.content  # never raises, as call does
    stores.db.close_now()


def test_call_sync_works_where_a_loop_is_already_running() -> None:
    """A notebook cell runs inside a loop: the call moves to a worker thread's own loop."""
    ran: list[str] = []
    gate = Gate(_box(ran))

    async def cell() -> str:
        return gate.call_sync(ToolCall(id="c1", name="refund", arguments={"order_id": "B2"}), ALICE).content

    assert anyio.run(cell) == "refunded B2" and ran == ["B2"]


def test_agent_run_sync_and_resume_sync() -> None:
    ran: list[str] = []
    box = _box(ran)
    model = ScriptedModel(
        [
            Rule("done", when=after_tool("refund", ok=True), then="Done: the order is refunded."),
            Rule("refund", when=last_user_says("refund"), then=call("refund", order_id="C3")),
        ]
    )
    agent = Agent(model, box)
    run = agent.run_sync("please refund C3", ALICE)
    assert run.final_text.endswith("Done: the order is refunded.") and ran == ["C3"]
    assert agent.resume_sync(run.id, principal=ALICE).status == run.status  # a finished run stays as it is


@pytest.mark.parametrize("inside_loop", [False, True])
def test_run_sync_propagates_the_coroutine_s_exception(inside_loop: bool) -> None:
    from maitre._sync import run_sync

    async def broken() -> None:
        raise LookupError("no such order")

    def attempt() -> None:
        with pytest.raises(LookupError, match="no such order"):
            run_sync(broken)

    if inside_loop:

        async def cell() -> None:
            attempt()

        anyio.run(cell)
    else:
        attempt()
