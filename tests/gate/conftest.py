"""A small shop toolbox shared by the gate tests."""

import time
from decimal import Decimal
from typing import Annotated, Any, Literal

import anyio
import pytest
from pydantic import Field

from maitre import Gate, Principal, Toolbox, ToolCall, ToolError

OrderId = Annotated[str, Field(pattern=r"^A[0-9]{4}$", description="the letter A then 4 digits, like A1042")]


class Flaky(Exception):
    """A transient failure the tool declares."""


def make_box(calls: dict[str, int]) -> Toolbox:
    box = Toolbox()

    @box.tool
    def get_order(order_id: OrderId) -> dict[str, Any]:
        """Look up one order by its id."""
        calls["get_order"] = calls.get("get_order", 0) + 1
        if order_id == "A9999":
            raise ToolError("NOT_FOUND", f"No order {order_id}.")
        return {"order_id": order_id, "status": "shipped", "total_inr": 1200}

    @box.tool(effect="write")
    def issue_refund(
        order_id: OrderId,
        amount: Annotated[Decimal, Field(ge=1, le=5000, decimal_places=2, description="INR, 1 to 5000")],
        reason: Literal["damaged", "wrong_item", "late"],
    ) -> str:
        """Refund an order."""
        calls["issue_refund"] = calls.get("issue_refund", 0) + 1
        return f"Refund of {amount} INR queued for {order_id} ({reason})."

    @box.tool(timeout=0.2)
    async def slow_async(seconds: float) -> str:
        """Sleep."""
        await anyio.sleep(seconds)
        return "done"

    @box.tool(timeout=0.2)
    def slow_sync(seconds: float) -> str:
        """Sleep in a thread."""
        time.sleep(seconds)
        return "done"

    @box.tool
    def explode() -> str:
        """Raise."""
        raise KeyError("secret-internal-detail")

    @box.tool
    def weird() -> object:
        """Return something that is not JSON."""
        return object()

    @box.tool(retries=3, transient=(Flaky,))
    def flaky(fail_times: int) -> str:
        """Fail a few times, then succeed."""
        calls["flaky"] = calls.get("flaky", 0) + 1
        if calls["flaky"] <= fail_times:
            raise Flaky()
        return "ok"

    @box.tool(retries=2)
    def deterministic() -> str:
        """Always fails the same way."""
        calls["deterministic"] = calls.get("deterministic", 0) + 1
        raise ToolError("NOT_FOUND", "No such thing.")

    @box.tool(retries=2)
    def overloaded() -> str:
        """Fails with a retryable error."""
        calls["overloaded"] = calls.get("overloaded", 0) + 1
        raise ToolError("TEMPORARY_UNAVAILABLE", "Busy.", retryable=True)

    @box.tool(max_result_tokens=50)
    def big_log() -> str:
        """Return a long log."""
        return "\n".join(f"line {i}: something happened at the hub" for i in range(300))

    return box


@pytest.fixture
def calls() -> dict[str, int]:
    return {}


@pytest.fixture
def gate(calls: dict[str, int]) -> Gate:
    from maitre import GateLimits

    return Gate(make_box(calls), limits=GateLimits(retry_backoff_s=0.001, retry_backoff_cap_s=0.002))


@pytest.fixture
def principal() -> Principal:
    return Principal(user="u1", tenant="t1")


def call(name: Any, arguments: Any = None, *, id: str = "c1", run_id: str | None = None) -> ToolCall:
    return ToolCall(id=id, name=name, arguments={} if arguments is None else arguments, run_id=run_id)
