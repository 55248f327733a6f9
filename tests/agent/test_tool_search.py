"""Tool search in the loop: the model starts with core + search_tools, reveals a tool, then calls it."""

import json
from typing import Annotated

import pytest
from pydantic import Field

from maitre import Principal, Toolbox
from maitre.agent import Agent, RunStatus, ToolResultMessage
from maitre.embeddings import HashingEmbedder
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says
from maitre.search import ToolIndex
from maitre.stores import MemoryStores

pytestmark = pytest.mark.anyio


def _handler(query: str) -> str:
    return "ok"


def catalogue() -> Toolbox:
    box = Toolbox("shop")

    @box.tool
    def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> dict:
        """Look up one order by its id: status and delivery date."""
        return {"order_id": order_id, "status": "shipped"}

    @box.tool(effect="write", business_key=("order_id",))
    def cancel_subscription(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
        """Cancel the customer's subscription attached to an order."""
        return "cancelled"

    for topic in ["weather forecast", "flight booking", "currency exchange rate", "calendar event", "translate text",
                  "stock price quote", "parcel tracking", "restaurant reservation", "password reset", "invoice pdf"]:  # fmt: skip
        name = "do_" + topic.replace(" ", "_")
        box.add_tool(_handler, name=name, description=f"Handle {topic} requests.")
    return box


async def test_the_model_searches_then_calls_what_it_found_and_sees_only_core_plus_revealed():
    box = catalogue()
    model = ScriptedModel(
        [
            Rule(
                "search",
                when=last_user_says("cancel"),
                then=lambda r: call("search_tools", query="cancel a subscription"),
            ),
            Rule(
                "call what was found",
                when=after_tool("search_tools", ok=True),
                then=lambda r: call(
                    json.loads(last_tool_result(r).content)["tools"][0]["name"], order_id="A1042"
                ),
            ),
            Rule("done", when=after_tool("cancel_subscription"), then="Cancelled."),
        ]
    )
    stores = MemoryStores()
    index = ToolIndex(box, embedder=HashingEmbedder())
    agent = Agent(model, box, stores=stores, core_tools=["shop.get_order"], search_index=index)
    run = await agent.run("please cancel my subscription for order A1042", Principal(user="u"))
    assert run.status is RunStatus.FINISHED, run.final_text
    offered = [sorted(t.name for t in request.tools) for request in model.requests]
    core = ["search_tools", "shop.get_order"]  # notes tools only with Agent(notes=True)
    assert offered[0] == core
    revealed = [t["name"] for t in json.loads(run.messages[2].content)["tools"]]
    assert 1 <= len(revealed) <= 5
    assert offered[1] == sorted(core + revealed)
    assert "shop.cancel_subscription" in offered[2]
    assert all(len(tools) <= len(core) + 5 for tools in offered)
    results = [m for m in run.messages if isinstance(m, ToolResultMessage)]
    assert results[-1].name == "shop.cancel_subscription" and not results[-1].is_error
    (record,) = agent.reveals.records
    assert record.query == "cancel a subscription" and record.shown[0].name == "shop.cancel_subscription"
    entries = await stores.audit.entries()
    reveal = next(e for e in entries if e.tool == "search_tools")
    assert '"query":"cancel a subscription"' in reveal.detail and "shop.cancel_subscription" in reveal.detail


async def test_an_unrevealed_tool_cannot_be_called():
    box = catalogue()
    model = ScriptedModel(
        [
            Rule(
                "guess",
                when=last_user_says("cancel"),
                then=lambda r: call("shop.cancel_subscription", order_id="A1042"),
            ),
            Rule("stop", when=after_tool("cancel_subscription"), then="could not"),
        ]
    )
    agent = Agent(
        model, box, core_tools=["shop.get_order"], search_index=ToolIndex(box, embedder=HashingEmbedder())
    )
    run = await agent.run("cancel my subscription A1042", Principal(user="u"))
    result = next(m for m in run.messages if isinstance(m, ToolResultMessage))
    assert result.error_code == "UNKNOWN_TOOL" and "search_tools" in result.content
