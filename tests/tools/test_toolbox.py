"""Toolbox: namespaces, composition, change events and provider exports with token costs."""

from typing import Annotated

import pytest
from pydantic import Field

from maitre import DuplicateToolError, Toolbox, UserError


def make_orders() -> Toolbox:
    box = Toolbox("orders")

    @box.tool
    def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
        """Look up one order by its id."""
        return order_id

    return box


def test_namespace_gives_canonical_names_and_bare_toolbox_keeps_names():
    assert make_orders().names() == ["orders.get_order"]
    bare = Toolbox()
    bare.add_tool(lambda: "x", name="ping", description="Ping.")
    assert bare.names() == ["ping"]


def test_decorator_returns_the_function_unchanged_and_both_forms_work():
    box = Toolbox()

    def ping() -> str:
        """Ping."""
        return "pong"

    assert box.tool(ping) is ping
    assert box.tool(name="ping2")(ping) is ping
    assert box.names() == ["ping", "ping2"]
    assert ping() == "pong"


def test_misuse_fails_loudly():
    box = Toolbox()
    with pytest.raises(UserError):
        box.tool(name="x")(42)
    box.add_tool(lambda: 1, name="dup", description="d")
    with pytest.raises(DuplicateToolError):
        box.add_tool(lambda: 1, name="dup", description="d")
    with pytest.raises(UserError):
        Toolbox("bad namespace!")


def test_include_composes_and_follows_later_changes():
    orders = make_orders()
    app = Toolbox()
    events: list[tuple[str, str]] = []
    app.subscribe(lambda event, tool: events.append((event, tool.name)))
    app.include(orders)
    assert "orders.get_order" in app

    @orders.tool
    def list_orders() -> list:
        """List orders."""
        return []

    assert "orders.list_orders" in app
    orders.remove("orders.get_order")
    assert "orders.get_order" not in app
    assert events == [
        ("added", "orders.get_order"),
        ("added", "orders.list_orders"),
        ("removed", "orders.get_order"),
    ]


def test_exports_map_dotted_names_reversibly_and_count_tokens():
    box = make_orders()
    anthropic = box.definitions("anthropic")
    assert anthropic[0]["name"] == "orders__get_order"
    assert "input_schema" in anthropic[0] and "$schema" not in anthropic[0]["input_schema"]
    assert anthropic.to_canonical("orders__get_order") == "orders.get_order"
    assert box.get("orders__get_order").name == "orders.get_order"

    openai = box.definitions("openai")
    assert openai[0]["type"] == "function"
    assert openai[0]["function"]["name"] == "orders__get_order"
    assert box.definitions("openai-responses")[0]["name"] == "orders__get_order"

    mcp = box.definitions("mcp")
    assert mcp[0]["name"] == "orders.get_order"
    assert mcp[0]["annotations"]["readOnlyHint"] is True
    assert mcp[0]["inputSchema"]["$schema"].endswith("2020-12/schema")

    for defs in (anthropic, openai, mcp):
        assert 20 < defs.tokens["orders.get_order"] < 200
        assert defs.total_tokens == sum(defs.tokens.values())
    with pytest.raises(ValueError):
        box.definitions("gemini")  # type: ignore[arg-type]
