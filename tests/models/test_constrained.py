"""Constrained tool calls (issue 19, item 1): each step's request carries the schema of one answer,
built from the tools offered at that step, and the constrained answer is read back into calls."""

from __future__ import annotations

import json
import logging
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from maitre import Principal, Toolbox
from maitre.agent import Agent, StopReason, ToolResultMessage
from maitre.agent.messages import AssistantMessage, UserMessage
from maitre.models.base import ModelRequest
from maitre.models.constrained import read_step, step_schema
from maitre.models.openai import OpenAIChatModel
from maitre.models.openai_compat import OpenAICompatibleModel
from maitre.types import ToolCall

from .adapters import GOAL
from .fakeserver import FakeProvider
from .shapes import chat_completion, openai_error

pytestmark = pytest.mark.anyio


def local(provider: FakeProvider, **options: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(f"{provider.url}/v1", "qwen2.5-coder-0.5b", max_retries=0, **options)


def sent_schema(provider: FakeProvider) -> dict[str, Any]:
    return provider.last.body["response_format"]["schema"]


class Line(BaseModel):
    sku: str
    qty: int


def basket_tools(namespace: str = "shop") -> list[Any]:
    box = Toolbox(namespace)

    @box.tool
    def order(lines: list[Line], note: str = "") -> str:
        """Order lines."""
        return "ok"

    return box.tools()


async def test_the_request_carries_one_schema_for_the_tools_offered_and_no_native_tools(
    provider: FakeProvider, tools
) -> None:
    provider.queue(chat_completion('{"tool": "get_weather", "arguments": {"city": "Pune"}}'))
    async with local(provider, temperature=0, seed=7) as model:
        response = await model.complete(
            ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools, system="Plan.")
        )

    body = provider.last.body
    assert "tools" not in body and body["response_format"]["type"] == "json_object"
    assert (body["temperature"], body["seed"]) == (0, 7)
    schema = sent_schema(provider)
    consts = [
        option["properties"]["tool"]["const"] for option in schema["oneOf"] if "tool" in option["properties"]
    ]
    assert consts == ["get_weather", "find_events", "orders.get_order"]
    system = body["messages"][0]["content"]
    assert system.startswith("Plan.") and '"name":"orders.get_order"' in system and '{"answer":' in system
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("get_weather", {"city": "Pune"})]
    assert response.stop_reason == "tool_use" and response.text == ""


async def test_the_schema_enforces_names_types_and_required_fields(tools) -> None:
    schema = step_schema(tools)
    ok = [
        {"tool": "get_weather", "arguments": {"city": "Pune"}},
        {"tool": "find_events", "arguments": {"city": "Pune", "max_price_inr": 1000}},
        {"answer": "Sunny."},
    ]
    bad = [
        {"tool": "track_parcel", "arguments": {}},
        {"tool": "get_weather", "arguments": {}},
        {"tool": "find_events", "arguments": {"city": "Pune", "max_price_inr": "1000"}},
        {"tool": "get_weather", "arguments": {"city": "Pune"}, "answer": "x"},
        {"answer": 3},
    ]
    for value in ok:
        jsonschema.validate(value, schema)
    for value in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, schema)


async def test_nested_models_keep_their_definitions_under_names_that_cannot_collide() -> None:
    tools = basket_tools()
    schema = step_schema([*tools, *basket_tools("depot")])  # two tools with a $defs entry each
    assert set(schema["$defs"]) == {"t0_Line", "t1_Line"}
    jsonschema.validate({"tool": "shop.order", "arguments": {"lines": [{"sku": "a", "qty": 2}]}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"tool": "shop.order", "arguments": {"lines": [{"sku": "a", "qty": "2"}]}}, schema
        )


async def test_an_answer_is_the_answers_text_not_json(provider: FakeProvider, tools) -> None:
    provider.queue(chat_completion('{"answer": "Go trekking at Sinhagad."}'))
    async with local(provider) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert (response.text, response.tool_calls, response.stop_reason) == (
        "Go trekking at Sinhagad.",
        [],
        "end_turn",
    )


async def test_parallel_calls_are_offered_and_read_when_the_model_supports_them(
    provider: FakeProvider, tools
) -> None:
    answer = {
        "calls": [
            {"tool": "get_weather", "arguments": {"city": "Pune"}},
            {"tool": "find_events", "arguments": {"city": "Pune", "max_price_inr": 1000}},
        ]
    }
    provider.queue(chat_completion(json.dumps(answer)))
    async with local(provider, parallel_calls=True) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert [c.name for c in response.tool_calls] == ["get_weather", "find_events"]
    assert len({c.id for c in response.tool_calls}) == 2
    jsonschema.validate(answer, sent_schema(provider))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answer, step_schema(tools))  # without parallel calls, one call a step


async def test_earlier_turns_go_back_as_the_json_the_schema_asks_for(provider: FakeProvider, tools) -> None:
    provider.queue(chat_completion('{"answer": "Sunny."}'))
    conversation = [
        UserMessage(content=GOAL),
        AssistantMessage(
            text="", tool_calls=[ToolCall(id="c1", name="get_weather", arguments={"city": "Pune"})]
        ),
        ToolResultMessage(call_id="c1", name="get_weather", content='{"temp_c":31}'),
    ]
    async with local(provider) as model:
        await model.complete(ModelRequest(messages=conversation, tools=tools))
    messages = provider.last.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == '{"tool":"get_weather","arguments":{"city":"Pune"}}'
    assert messages[3]["content"].startswith('<tool_response id="c1" name="get_weather">')


@pytest.mark.parametrize(
    ("dialect", "where"),
    [
        ("json_schema", lambda body: body["response_format"]["json_schema"]["schema"]),
        ("vllm", lambda body: body["guided_json"]),
        ("ollama", lambda body: body["format"]),
    ],
)
async def test_each_server_gets_the_schema_where_it_reads_it(
    provider: FakeProvider, tools, dialect, where
) -> None:
    provider.queue(chat_completion('{"answer": "ok"}'))
    async with local(provider, schema_dialect=dialect) as model:
        await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert where(provider.last.body) == step_schema(tools)


async def test_a_server_that_refuses_the_schema_turns_constrained_calls_off_once_and_answers_natively(
    provider: FakeProvider, tools, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="maitre.models.openai_compat")
    provider.queue(
        openai_error(400, "invalid_request_error", None, "response_format type json_object is not supported"),
        chat_completion("Sunny."),
        chat_completion("Still sunny."),
    )
    async with local(provider) as model:
        await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
        await model.complete(ModelRequest(messages=[UserMessage(content="Sunday?")], tools=tools))
        assert not model.constrained_mode
    first, retried, later = (r.body for r in provider.requests)
    assert "response_format" in first and "response_format" not in retried and "tools" in retried
    assert "tools" in later
    assert len([r for r in caplog.records if "constrained tool calls are off" in r.getMessage()]) == 1


async def test_a_server_that_ignores_the_schema_still_has_its_text_calls_read(
    provider: FakeProvider, tools
) -> None:
    provider.queue(
        chat_completion('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pune"}}\n</tool_call>')
    )
    async with local(provider) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("get_weather", {"city": "Pune"})]


async def test_hosted_models_are_not_constrained(provider: FakeProvider, tools) -> None:
    provider.queue(chat_completion("Hi."))
    async with OpenAIChatModel("gpt-5.5", base_url=f"{provider.url}/v1", api_key="k") as model:
        await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert "response_format" not in provider.last.body and "tools" in provider.last.body


async def test_a_run_on_a_constrained_model_ends_with_a_real_answer(provider: FakeProvider) -> None:
    box = Toolbox("orders")

    @box.tool
    def get_order(order_id: str) -> dict:
        """Look up an order."""
        return {"order_id": order_id, "status": "shipped"}

    provider.queue(
        chat_completion('{"tool": "orders.get_order", "arguments": {"order_id": "A1042"}}'),
        chat_completion('{"answer": "Order A1042 has shipped."}'),
    )
    async with local(provider) as model:
        run = await Agent(model, box, notes=False).run("Where is A1042?", Principal(user="u", tenant="t"))
    assert run.stop_reason is StopReason.COMPLETED and run.final_text == "Order A1042 has shipped."
    assert provider.requests[1].body["messages"][2]["content"].startswith('{"tool":"orders.get_order"')


def test_read_step_leaves_what_is_not_a_constrained_answer() -> None:
    for text in (
        "Sunny.",
        '{"answer": 3}',
        '{"tool": "x", "arguments": {}, "why": 1}',
        "[1]",
        '{"calls": []}',
    ):
        assert read_step(text) is None, text
    assert read_step('{"tool": "x", "arguments": [1]}').calls == [("x", "[1]")]


async def test_an_answer_cut_off_by_the_token_limit_keeps_its_words_not_its_json(
    provider: FakeProvider, tools
) -> None:
    provider.queue(
        chat_completion('{"answer": "Sunny, 31 \\u00b0C: go trekking at Sinh', finish_reason="length")
    )
    async with local(provider) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert (response.text, response.stop_reason) == ("Sunny, 31 °C: go trekking at Sinh", "max_tokens")
