"""The loop with a local model behind a fake llama.cpp server (issue 19): a time limit is a time
limit (and the request is cancelled), a call to an unknown tool written as text reaches the gate."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from maitre import Principal, Toolbox
from maitre.agent import Agent, Limits, StopReason, ToolResultMessage
from maitre.models.openai_compat import OpenAICompatibleModel
from models.fakeserver import FakeProvider, Reply
from models.shapes import chat_completion

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def orders_box() -> Toolbox:
    box = Toolbox("orders")

    @box.tool
    def get_order(order_id: str) -> dict:
        """Look up an order by its id."""
        return {"order_id": order_id, "status": "shipped"}

    return box


def local(server: FakeProvider, **options: object) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        f"{server.url}/v1", "qwen2.5-coder-0.5b", max_retries=0, constrained=False, **options
    )  # type: ignore[arg-type]


async def test_the_runs_time_limit_is_reported_as_a_time_limit_and_the_request_is_cancelled(
    server: FakeProvider,
) -> None:
    server.queue(Reply(body=chat_completion("far too late"), delay=5.0))
    async with local(server) as model:
        started = time.monotonic()
        run = await Agent(model, orders_box(), limits=Limits(max_seconds=0.4), notes=False).run(
            "Where?", ALICE
        )
        took = time.monotonic() - started

    assert run.stop_reason is StopReason.MAX_SECONDS
    assert "time limit (0.4 s)" in run.final_text and "could not be reached" not in run.final_text
    assert any(event["type"] == "model_call_cancelled" for event in run.events)
    assert took < 2.0, "the run did not wait for the abandoned answer"
    server.wait_for_hang_up()
    assert server.disconnects == 1, "the request's connection was closed, so the server stops generating"


async def test_the_adapters_own_request_timeout_says_so(server: FakeProvider) -> None:
    server.queue(Reply(body=chat_completion("late"), delay=3.0))
    async with local(server, timeout=0.3) as model:
        run = await Agent(model, orders_box(), notes=False).run("Where is order A1042?", ALICE)
    assert run.stop_reason is StopReason.MODEL_ERROR
    assert "did not answer within its request time limit" in run.final_text


async def test_a_text_call_to_an_unknown_tool_is_taught_by_the_gate_and_the_model_recovers(
    server: FakeProvider,
) -> None:
    server.queue(
        chat_completion(
            '<tool_call>\n{"name": "track_parcel", "arguments": {"parcel": "A1042"}}\n</tool_call>'
        ),
        chat_completion(
            '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "A1042"}}\n</tool_call>'
        ),
        chat_completion("Order A1042 has shipped."),
    )
    async with local(server) as model:
        run = await Agent(model, orders_box(), notes=False).run("Where is order A1042?", ALICE)

    results = [m for m in run.messages if isinstance(m, ToolResultMessage)]
    assert [(r.name, r.error_code) for r in results] == [
        ("track_parcel", "UNKNOWN_TOOL"),
        ("orders.get_order", None),
    ]
    assert "orders.get_order" in results[0].content  # the teaching error names the real tool
    assert run.stop_reason is StopReason.COMPLETED and run.final_text == "Order A1042 has shipped."
