"""`maitre.testing`: the doubles users test their agents with, exercised through the real gate.

TestModel drives a real `Agent` over seed 000's tools (a pattern, a Decimal string, an enum) and
other schema shapes; the capture is checked against the gate's own audit log; the MCP pair speaks
to a real `GovernedServer` in memory. The last test runs TestModel over every toolbox the project
ships (the demo and the examples), so a tool whose schema advertises arguments the gate refuses
fails here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from maitre import Gate, Principal, Tool, Toolbox, ToolCall
from maitre.agent import Agent, ApprovalDecision, RunStatus
from maitre.audit import verify
from maitre.exceptions import UserError
from maitre.mcp.app import MCPApp
from maitre.testing import MemoryStores, TestModel, capture_calls, example_arguments, mcp_client

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
ANN = Principal(user="ann", tenant="acme")
OrderId = Annotated[str, Field(pattern=r"^A[0-9]{4}$", description="the letter A then 4 digits")]


class Address(BaseModel):
    city: Annotated[str, Field(min_length=2, max_length=40)]
    pin: Annotated[str, Field(pattern=r"^[1-9][0-9]{5}$")]
    floor: int | None = None


def seed_box(received: dict[str, list[dict[str, Any]]]) -> Toolbox:
    """Seed 000's two tools, plus a nested model, a bounded integer and a list."""
    box = Toolbox("shop")

    @box.tool
    def get_order(order_id: OrderId) -> dict[str, Any]:
        """Look up one order by its id."""
        received.setdefault("get_order", []).append({"order_id": order_id})
        return {"order_id": order_id, "status": "shipped"}

    @box.tool(effect="write")
    def issue_refund(
        order_id: OrderId,
        amount: Annotated[Decimal, Field(ge=1, le=5000, decimal_places=2)],
        reason: Literal["damaged", "wrong_item", "late"],
    ) -> str:
        """Refund an order."""
        received.setdefault("issue_refund", []).append(
            {"order_id": order_id, "amount": amount, "reason": reason}
        )
        return f"Refund of {amount} INR queued for {order_id} ({reason})."

    @box.tool(effect="write")
    def ship_to(
        order_id: OrderId, address: Address, copies: Annotated[int, Field(ge=2, le=9)], tags: list[str]
    ) -> str:
        """Ship an order to an address."""
        received.setdefault("ship_to", []).append({"address": address, "copies": copies, "tags": tags})
        return f"{copies} to {address.city}"

    return box


async def test_test_model_calls_every_offered_tool_once_with_arguments_the_gate_accepts():
    """One turn of parallel calls, each validated and executed by the real gate; then a summary."""
    received: dict[str, list[dict[str, Any]]] = {}
    model = TestModel()
    agent = Agent(model, seed_box(received))
    with capture_calls(agent) as calls:
        run = await agent.run("exercise every tool", ANN)
    assert run.status is RunStatus.FINISHED
    offered = {t.name for t in model.requests[0].tools}
    assert offered == {"shop.get_order", "shop.issue_refund", "shop.ship_to"}  # notes tools only when asked
    assert sorted(c.tool for c in calls) == sorted(offered)  # each once
    assert [c.error_code for c in calls] == [None] * len(offered)
    assert {c.decision for c in calls} == {"allow"}
    assert len({c.call.id for c in calls}) == len(calls) == len(model.calls)
    # the tools ran with values that satisfy their annotations
    assert received["get_order"] == [{"order_id": "A1042"}]
    refund = received["issue_refund"][0]
    assert refund["amount"] == Decimal("10.00") and refund["reason"] == "damaged"
    shipped = received["ship_to"][0]
    assert shipped["address"].pin[0] != "0" and 2 <= shipped["copies"] <= 9 and shipped["tags"]
    assert shipped["address"].floor is None  # required fields only by default
    summary = json.loads(run.final_text)
    assert set(summary["results"]) == offered and summary["skipped"] == {}
    assert summary["results"]["shop.get_order"]["ok"] is True
    assert "A1042" in summary["results"]["shop.get_order"]["content"]
    assert [len(r.tools) for r in model.requests] == [3, 3] and run.steps == 2
    assert run.usage.input_tokens > 0 and run.usage.output_tokens > 0


async def test_call_tools_and_final_text_narrow_what_the_model_does():
    """A list of names (full or last part) limits the calls; final_text replaces the summary."""
    received: dict[str, list[dict[str, Any]]] = {}
    agent = Agent(TestModel(call_tools=["get_order"], final_text="all done"), seed_box(received))
    with capture_calls(agent.gate) as calls:
        run = await agent.run("look it up", ANN)
    assert [c.tool for c in calls] == ["shop.get_order"]
    assert run.final_text == "all done" and set(received) == {"get_order"}
    with pytest.raises(UserError):
        TestModel(call_tools="get_order")  # type: ignore[arg-type]


async def test_optional_fields_are_filled_only_when_asked():
    received: dict[str, list[dict[str, Any]]] = {}
    box = seed_box(received)
    tool = box.get("shop.ship_to")
    assert tool is not None
    plain = example_arguments(tool)
    full = example_arguments(tool, optional=True)
    assert plain is not None and full is not None
    assert "floor" not in plain["address"]  # nested: required only, either way (the generator's rule)
    assert example_arguments(tool, overrides={"copies": 1}) is None  # an override is validated too


async def test_a_tool_whose_schema_cannot_be_filled_is_skipped_and_named_until_given_arguments():
    """No invalid call is ever sent: the tool is listed in `skipped`; explicit arguments fix it."""
    box = Toolbox()
    seen: list[str] = []

    async def lookahead(arguments: dict[str, Any]) -> str:
        seen.append(arguments["code"])
        return str(arguments["code"])

    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(?=.*[0-9])[a-z0-9]{6}$"}},
        "required": ["code"],
        "additionalProperties": False,
    }
    box.add(
        Tool.from_schema(
            name="lookahead",
            description="A pattern the generator cannot render.",
            input_schema=schema,
            handler=lookahead,
        )
    )

    model = TestModel()
    agent = Agent(model, box, notes=False)
    with capture_calls(agent) as calls:
        run = await agent.run("go", ANN)
    assert calls == [] and seen == [] and "lookahead" in model.skipped
    assert json.loads(run.final_text)["skipped"].keys() == {"lookahead"}

    agent = Agent(TestModel(arguments={"lookahead": {"code": "abc123"}}), box, notes=False)
    with capture_calls(agent) as calls:
        await agent.run("go", ANN)
    assert [c.error_code for c in calls] == [None] and seen == ["abc123"]


async def test_a_write_that_needs_approval_pauses_and_the_model_answers_after_the_resume():
    """Valid arguments reach the policy: the refund waits for a human, then runs exactly once."""
    received: list[str] = []
    box = Toolbox("shop")

    @box.tool(effect="write", risk="high")
    def issue_refund(
        order_id: OrderId, amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)]
    ) -> str:
        """Refund an order (a human approves first)."""
        received.append(order_id)
        return f"Refunded {amount} for {order_id}."

    agent = Agent(TestModel(), box, stores=MemoryStores(), notes=False)
    with capture_calls(agent) as calls:
        run = await agent.run("refund it", ANN)
        assert run.status is RunStatus.PAUSED
        assert [c.decision for c in calls] == ["approval_required"] and received == []
        (pending,) = run.pending
        run = await agent.resume(
            run.id, {pending.approval_id: ApprovalDecision(approve=True, approver="maria")}
        )
    assert run.status is RunStatus.FINISHED and received == ["A1042"]
    assert [c.decision for c in calls] == ["approval_required", "approved"]
    assert json.loads(run.final_text)["results"]["shop.issue_refund"]["ok"] is True


async def test_capture_sees_every_call_refused_or_executed_and_stops_at_the_end_of_the_block():
    received: dict[str, list[dict[str, Any]]] = {}
    gate = Gate(seed_box(received))
    before = list(gate.recorders)
    with capture_calls(gate, arguments="redacted") as calls:
        await gate.call(ToolCall(id="1", name="shop.get_ordr", arguments={}), ANN)
        await gate.call(ToolCall(id="2", name="shop.get_order", arguments={"order_id": "1042"}), ANN)
        await gate.call(ToolCall(id="3", name="shop.get_order", arguments={"order_id": "A1042"}), ANN)
    await gate.call(ToolCall(id="4", name="shop.get_order", arguments={"order_id": "A2042"}), ANN)
    assert gate.recorders == before
    assert [(c.call.id, c.tool, c.decision, c.error_code) for c in calls] == [
        ("1", None, "refused", "UNKNOWN_TOOL"),
        ("2", "shop.get_order", "refused", "INVALID_ARGUMENTS"),
        ("3", "shop.get_order", "allow", None),
    ]
    assert calls[2].arguments == {"order_id": "A1042"} and calls[2].principal == ANN
    assert json.loads(calls[2].entry.arguments or "") == {"order_id": "A1042"}  # redacted, not a digest
    assert [c.entry.seq for c in calls] == [1, 2, 3]
    assert verify([c.entry for c in calls]).ok


async def test_the_captured_entries_are_the_ones_the_gate_audits():
    """With durable-style stores the gate audits every call; the capture builds the same entries."""
    stores = MemoryStores()
    gate = Gate(seed_box({}), stores=stores)
    with capture_calls(gate) as calls:
        for i, order in enumerate(["A1042", "bad", "A1042"]):
            await gate.call(ToolCall(id=str(i), name="shop.get_order", arguments={"order_id": order}), ANN)
    audited = await stores.audit.entries()
    assert [(e.call_id, e.decision, e.call_hash, e.arguments, e.error_code) for e in audited] == [
        (c.entry.call_id, c.entry.decision, c.entry.call_hash, c.entry.arguments, c.entry.error_code)
        for c in calls
    ]


async def test_capture_needs_a_gate():
    with pytest.raises(UserError, match="needs a Gate"), capture_calls(object()):
        pass


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_the_in_memory_mcp_pair_lists_and_calls_a_tool_through_the_gate(mode):
    received: dict[str, list[dict[str, Any]]] = {}
    app = MCPApp(seed_box(received), name="shop")
    with capture_calls(app) as calls:
        async with mcp_client(app, principal=ANN, mode=mode) as client:
            listed = await client.list_tools()
            result = await client.call_tool("shop.get_order", {"order_id": "A1042"})
            refused = await client.call_tool("shop.get_order", {"order_id": "1042"})
    assert {t.name for t in listed.tools} >= {"shop.get_order", "shop.issue_refund"}
    assert not result.is_error and "shipped" in result.content[0].text
    assert refused.is_error and refused.meta["io.maitre/error"]["code"] == "INVALID_ARGUMENTS"
    assert [(c.principal.user, c.error_code) for c in calls] == [("ann", None), ("ann", "INVALID_ARGUMENTS")]
    assert received["get_order"] == [{"order_id": "A1042"}]


async def test_the_mcp_pair_serves_a_bare_toolbox_and_refuses_what_it_cannot_serve():
    async with mcp_client(seed_box({})) as client:
        result = await client.call_tool("shop.get_order", {"order_id": "A1042"})
    assert not result.is_error
    with pytest.raises(UserError):
        async with mcp_client(object()):  # type: ignore[arg-type]
            pass


# -- every toolbox the project ships ------------------------------------------------------------------


def _load(relative: str) -> Any:
    path = ROOT / relative
    name = f"_shipped_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _shipped(name: str, tmp_path: Path) -> Toolbox:
    if name == "demo":
        from maitre.demo.story import DemoWorld, build_toolbox

        return build_toolbox(DemoWorld())
    if name == "seed003_refunds":
        module = _load("examples/seed003_refunds/refunds.py")
        return module.build(module.Backend())
    if name == "seed004_order_loop":
        return _load("examples/seed004_order_loop/order_loop.py").build([])
    files = {
        "seed000_registry": "registry.py",
        "seed001_weekend": "weekend.py",
        "seed002_guards": "guards.py",
        "support_server": "server.py",
    }
    return _load(f"examples/{name}/{files[name]}").box


@pytest.mark.parametrize(
    "name",
    [
        "demo",
        "seed000_registry",
        "seed001_weekend",
        "seed002_guards",
        "seed003_refunds",
        "seed004_order_loop",
        "support_server",
    ],
)
async def test_every_shipped_toolbox_accepts_the_calls_its_own_schemas_advertise(name, tmp_path):
    """TestModel fills each tool's schema; the gate must accept every one (a tool may still say
    NOT_FOUND or ask for approval, but never that the arguments its schema describes are invalid)."""
    box = _shipped(name, tmp_path)
    model = TestModel()
    agent = Agent(model, box, notes=False)
    with capture_calls(agent) as calls:
        await agent.run("exercise every tool", ANN)
    assert model.skipped == {}, model.skipped
    assert sorted(c.tool or "" for c in calls) == sorted(box.names())
    refused = [(c.tool, c.result.content) for c in calls if c.error_code == "INVALID_ARGUMENTS"]
    assert refused == []
