"""Each tool gets a plan of the stages that can act on it; a plan never changes what a call does."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.gate import DEFAULT_STAGES, CallContext, Decision
from maitre.gate.approval import approval
from maitre.gate.budget import Budgets, RateLimit
from maitre.policy import BasePolicy, PolicyDecision, PolicyRequest
from maitre.tools import Tool

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme")


def shop(done: list[str]) -> Toolbox:
    box = Toolbox()

    @box.tool
    async def get_order(order_id: str) -> dict[str, str]:
        """Look up an order."""
        done.append(f"get {order_id}")
        return {"order_id": order_id}

    @box.tool(effect="write", risk="medium")
    async def cancel(order_id: str) -> str:
        """Cancel an order."""
        done.append(f"cancel {order_id}")
        return "cancelled"

    @box.tool(effect="write", risk="high")
    async def refund(order_id: str) -> str:
        """Refund an order (needs approval)."""
        done.append(f"refund {order_id}")
        return "refunded"

    @box.tool(owner=lambda principal, arguments: arguments.get("order_id") == "mine")
    async def owned(order_id: str) -> str:
        """A tool with an ownership check."""
        done.append(f"owned {order_id}")
        return "yours"

    return box


def names(gate: Gate, tool: str) -> list[str]:
    found = gate.find_tool(tool)
    assert found is not None
    return [getattr(fn, "__name__", type(fn).__name__) for fn, _ in gate.plan(found).steps]


def call(name: str, order_id: str = "A1", id: str = "c1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments={"order_id": order_id})


async def test_a_read_the_policy_allows_outright_runs_no_governance_it_cannot_need():
    gate = Gate(shop([]))
    steps = names(gate, "get_order")
    assert "idempotency" not in steps and "approval" not in steps and "authorize" not in steps
    assert steps[0] == "decode_now" and steps[-1] == "execute"
    assert "budget_counts" in steps  # the run's default call budget can still refuse it


async def test_a_write_has_its_key_an_approval_tool_its_approval_an_owned_tool_its_check():
    gate = Gate(shop([]))
    assert "idempotency" in names(gate, "cancel") and "approval" not in names(gate, "cancel")
    assert {"authorize", "approval", "idempotency"} <= set(names(gate, "refund"))
    assert "authorize" in names(gate, "owned") and "approval" in names(gate, "owned")


async def test_the_plan_is_built_once_per_tool():
    gate = Gate(shop([]))
    tool = gate.find_tool("get_order")
    assert tool is not None
    assert gate.plan(tool) is gate.plan(tool)


async def test_the_policy_decision_is_still_recorded_when_authorize_is_not_in_the_plan():
    seen: list[Any] = []

    async def recorder(ctx: CallContext, result: Any) -> None:
        seen.append((ctx.policy.rule if ctx.policy else None, ctx.decision))

    gate = Gate(shop([]), recorders=[recorder])
    assert not (await gate.call(call("get_order"), ALICE)).is_error
    assert seen == [("risk-matrix", Decision.ALLOW)]


async def test_without_any_budget_there_is_no_budget_step_and_with_one_it_refuses():
    done: list[str] = []
    gate = Gate(shop(done), budgets=Budgets(max_calls_per_run=None))
    assert not {"budget", "budget_counts"} & set(names(gate, "get_order"))
    gate.budgets = Budgets(per_tool={"get_order": 1})
    run = gate.new_run(ALICE)
    assert not (await gate.call(call("get_order", "A1"), ALICE, run)).is_error
    second = await gate.call(call("get_order", "A2", id="c2"), ALICE, run)
    assert second.error is not None and second.error.code == "BUDGET_EXCEEDED"
    assert done == ["get A1"]
    gate.budgets = Budgets(rate_limit=RateLimit(per_second=0.001, burst=1))
    assert "budget" in names(gate, "get_order")  # a rate limit waits on the store: the async stage


async def test_a_tool_replaced_under_the_same_name_gets_a_new_plan():
    done: list[str] = []
    box = shop(done)
    gate = Gate(box)
    assert "idempotency" not in names(gate, "get_order")
    box.remove("get_order")

    async def get_order(order_id: str) -> str:
        """Now a write (a bad name, but a real change)."""
        done.append(f"write {order_id}")
        return "written"

    box.add(Tool.from_function(get_order, effect="write", risk="medium"))
    assert "idempotency" in names(gate, "get_order")
    first = await gate.call(call("get_order"), ALICE)
    again = await gate.call(call("get_order", id="c2"), ALICE)  # runless duplicate: replayed
    assert not first.is_error and again.replayed and done == ["write A1"]


async def test_replacing_the_policy_rebuilds_every_plan():
    class AskForEverything(BasePolicy):
        uses_arguments = False

        def decide(self, request: PolicyRequest) -> PolicyDecision:
            return PolicyDecision.needs_approval("asked", rule="test")

    done: list[str] = []
    gate = Gate(shop(done))
    assert not (await gate.call(call("get_order"), ALICE)).is_error
    gate.policy = AskForEverything()
    assert "approval" in names(gate, "get_order")
    asked = await gate.call(call("get_order", id="c2"), ALICE)
    assert asked.error is not None and asked.error.code == "APPROVAL_REQUIRED"
    assert done == ["get A1"]


async def test_a_static_decision_other_than_allow_is_applied():
    class Closed(BasePolicy):
        uses_arguments = False

        def decide(self, request: PolicyRequest) -> PolicyDecision:  # pragma: no cover - never asked
            return PolicyDecision.allow("open")

        def static_decision(self, tool: Tool) -> PolicyDecision | None:
            return PolicyDecision.deny("closed", rule="static")

    done: list[str] = []
    gate = Gate(shop(done), policy=Closed())
    denied = await gate.call(call("get_order"), ALICE)
    assert denied.error is not None and denied.error.code == "PERMISSION_DENIED" and done == []


async def test_a_host_stage_that_declares_it_does_not_apply_is_left_out_of_that_tools_plan():
    ran: list[str] = []

    class WritesOnly:
        __name__ = "writes_only"

        def applies(self, tool: Tool, gate: Gate) -> bool:
            return tool.effect.value != "read"

        async def __call__(self, ctx: CallContext) -> None:
            assert ctx.tool is not None
            ran.append(ctx.tool.name)

    stage = WritesOnly()
    gate = Gate(shop([]), stages=[*DEFAULT_STAGES[:2], stage, *DEFAULT_STAGES[2:]])
    assert "writes_only" not in names(gate, "get_order") and "writes_only" in names(gate, "cancel")
    await gate.call(call("get_order"), ALICE)
    await gate.call(call("cancel"), ALICE)
    assert ran == ["cancel"]


async def test_a_host_stage_may_ask_for_an_approval_the_policy_did_not():
    """With a host stage in the list, the approval stage stays in every plan."""
    done: list[str] = []

    async def four_eyes(ctx: CallContext) -> None:
        ctx.decision = Decision.APPROVAL_REQUIRED

    stages = list(DEFAULT_STAGES)
    stages.insert(stages.index(approval), four_eyes)  # after the policy, before the approval stage
    gate = Gate(shop(done), stages=stages)
    result = await gate.call(call("get_order"), ALICE)
    assert result.error is not None and result.error.code == "APPROVAL_REQUIRED"
    assert result.approval is not None and done == []


async def test_changing_the_stage_list_in_place_rebuilds_the_plans():
    seen: list[str] = []

    async def note(ctx: CallContext) -> None:
        seen.append("noted")

    gate = Gate(shop([]))
    await gate.call(call("get_order"), ALICE)
    gate.stages.insert(1, note)
    await gate.call(call("get_order", "A2", id="c2"), ALICE)
    assert seen == ["noted"]
    gate.stages.remove(note)
    await gate.call(call("get_order", "A3", id="c3"), ALICE)
    assert seen == ["noted"]


async def test_a_stage_list_without_resolve_runs_every_stage_in_order():
    order: list[str] = []

    async def first(ctx: CallContext) -> None:
        order.append("first")
        ctx.tool = ctx.gate.find_tool("get_order")

    async def second(ctx: CallContext) -> None:
        order.append("second")

    gate = Gate(shop([]), stages=[first, second, *DEFAULT_STAGES[1:]])
    result = await gate.call(call("get_order"), ALICE)
    assert not result.is_error and order == ["first", "second"]


async def test_the_toolbox_does_not_keep_a_gate_alive():
    box = shop([])
    gate = Gate(box)
    ref = weakref.ref(gate)
    del gate
    gc.collect()
    assert ref() is None
    box.remove("get_order")  # the dead gate's listener goes quietly
