"""Issue 19's adapter fixes, against a fake llama-cpp-python server that refuses what the real one
refuses (fixtures/README.md says what is recorded and what is reconstructed)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from maitre.agent.messages import AssistantMessage, ToolResultMessage, UserMessage
from maitre.models.base import ModelError, ModelRequest
from maitre.models.openai import OpenAIChatModel
from maitre.models.openai_compat import OpenAICompatibleModel

from .adapters import GOAL
from .fakeserver import FakeProvider, Reply
from .llamacpp import LLAMA_CPP, fixture_reply, llama_cpp_checks
from .shapes import chat_completion, chat_tool_call

pytestmark = pytest.mark.anyio


def native(provider: FakeProvider, **options: Any) -> OpenAICompatibleModel:
    """The adapter with native tools (constrained decoding off), as a llama.cpp server with --jinja takes them."""
    options.setdefault("constrained", False)
    return OpenAICompatibleModel(f"{provider.url}/v1", "qwen2.5-coder-0.5b", **options)


def after_one_tool_turn(first_call_id: str) -> list[Any]:
    return [
        UserMessage(content=GOAL),
        AssistantMessage(text="", tool_calls=[_call(first_call_id, "get_weather", {"city": "Pune"})]),
        ToolResultMessage(call_id=first_call_id, name="get_weather", content='{"temp_c":31}'),
    ]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    from maitre.types import ToolCall

    return ToolCall(id=call_id, name=name, arguments=arguments)


# -- empty content beside tool calls --------------------------------------------------------------


async def test_the_fake_llama_cpp_server_refuses_null_content_as_the_real_one_does(
    provider: FakeProvider, tools
) -> None:
    """The check has teeth: the plain OpenAI adapter's null content gets the server's HTTP 500."""
    provider.validate = llama_cpp_checks
    async with OpenAIChatModel("m", base_url=f"{provider.url}/v1", api_key="k", max_retries=0) as model:
        with pytest.raises(ModelError) as caught:
            await model.complete(ModelRequest(messages=after_one_tool_turn("call_1"), tools=tools))
    assert caught.value.status == 500
    assert LLAMA_CPP["null_content_beside_tool_calls"]["body"]["error"]["message"] in str(caught.value)
    assert provider.last.body["messages"][1]["content"] is None


async def test_an_assistant_turn_with_tool_calls_is_sent_with_empty_content(
    provider: FakeProvider, tools
) -> None:
    """After a tool turn the local adapter sends content "" beside tool_calls, and the server answers."""
    provider.validate = llama_cpp_checks
    provider.queue(fixture_reply("native_tools_call_as_text"), chat_completion("Sunny, 31 C: go trekking."))
    async with native(provider) as model:
        first = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
        assert [(c.name, c.arguments) for c in first.tool_calls] == [("get_weather", {"city": "Pune"})]
        conversation = [
            UserMessage(content=GOAL),
            AssistantMessage(text=first.text, tool_calls=first.tool_calls),
            ToolResultMessage(call_id=first.tool_calls[0].id, name="get_weather", content='{"temp_c":31}'),
        ]
        final = await model.complete(ModelRequest(messages=conversation, tools=tools))
        assert not model.prompt_mode
    assert final.text == "Sunny, 31 C: go trekking."
    assistant = provider.last.body["messages"][1]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "tools" in provider.last.body, "native tools were kept: nothing fell back to the prompt"


async def test_the_recorded_answers_of_the_real_server_are_read_as_it_meant_them(
    provider: FakeProvider, tools
) -> None:
    """With native tools the recorded server (the GGUF's own template) writes the call as fenced JSON,
    not `tool_calls`; after the result, sent with "" content, the 0.5B model repeats its call as
    bare JSON with string arguments and echoes the result: the call is read, the echo stays text."""
    provider.validate = llama_cpp_checks
    provider.queue(
        fixture_reply("native_tools_call_as_text"), fixture_reply("empty_content_beside_tool_calls")
    )
    async with native(provider) as model:
        first = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
        again = await model.complete(
            ModelRequest(messages=after_one_tool_turn(first.tool_calls[0].id), tools=tools)
        )
    assert (first.text, first.stop_reason) == ("", "tool_use")
    assert [(c.name, c.arguments) for c in again.tool_calls] == [("get_weather", {"city": "Pune"})]
    assert again.text == '{"temp_c": 31}'
    recorded = LLAMA_CPP["empty_content_beside_tool_calls"]["request"]["messages"][1]
    assert recorded["content"] == "" and provider.last.body["messages"][1]["content"] == ""


async def test_the_constrained_step_travels_as_the_recorded_server_takes_it(
    provider: FakeProvider, tools
) -> None:
    """The default dialect sends `json_object` + `schema` (the recorded server's 200), and the
    recorded constrained answer becomes the call."""
    provider.validate = llama_cpp_checks
    provider.queue(fixture_reply("constrained_step"))
    model = OpenAICompatibleModel(f"{provider.url}/v1", "qwen")
    async with model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("get_weather", {"city": "Pune"})]
    sent = provider.last.body["response_format"]
    assert sent["type"] == "json_object" and '{"const": "orders.get_order"}' in json.dumps(sent["schema"])
    assert "tools" not in provider.last.body and model.constrained_mode


async def test_the_json_schema_dialect_is_refused_by_the_server_and_constrained_calls_turn_off_once(
    provider: FakeProvider, tools, caplog: pytest.LogCaptureFixture
) -> None:
    """llama-cpp-python 0.3.36 answers `response_format: json_schema` with a 500 (recorded): the
    adapter says so once on stderr and goes on with native tools, without retrying the schema."""
    provider.validate = llama_cpp_checks
    provider.queue(fixture_reply("native_tools_call_as_text"), chat_completion("Sunny."))
    caplog.set_level(logging.WARNING, logger="maitre.models.openai_compat")
    model = OpenAICompatibleModel(f"{provider.url}/v1", "qwen", schema_dialect="json_schema", max_retries=0)
    async with model:
        first = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
        await model.complete(ModelRequest(messages=[UserMessage(content="And Sunday?")], tools=tools))
    assert first.tool_calls[0].name == "get_weather"
    assert not model.constrained_mode and not model.prompt_mode
    assert provider.requests[0].body["response_format"]["type"] == "json_schema"
    assert [("response_format" in r.body, "tools" in r.body) for r in provider.requests[1:]] == [
        (False, True),
        (False, True),
    ]
    said = [r for r in caplog.records if "refused the step's JSON schema" in r.getMessage()]
    assert len(said) == 1


# -- prompt mode only for errors that mean "no tools" ----------------------------------------------


async def test_a_template_error_that_names_tools_is_an_error_not_a_reason_to_drop_native_tools(
    provider: FakeProvider, tools
) -> None:
    """The 500 that issue 19 saw matched the old `tool|jinja|function` pattern: it is not "no tools"."""
    for name in ("template_error_naming_tools", "null_content_beside_tool_calls", "context_length_exceeded"):
        provider.reset()
        provider.queue(fixture_reply(name))
        async with native(provider, max_retries=0) as model:
            with pytest.raises(ModelError):
                await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
            assert not model.prompt_mode, name
        assert len(provider.requests) == 1, f"{name}: nothing was retried without tools"


@pytest.mark.parametrize(
    "name", ["llama_server_without_jinja", "ollama_model_without_tools", "vllm_without_tool_parser"]
)
async def test_an_error_that_means_no_tools_switches_to_the_prompt_and_says_so_once(
    provider: FakeProvider, tools, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    call_text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pune"}}\n</tool_call>'
    provider.queue(fixture_reply(name), chat_completion(call_text), chat_completion("Done."))
    caplog.set_level(logging.WARNING, logger="maitre.models.openai_compat")
    async with native(provider, max_retries=0) as model:
        first = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
        again = await model.complete(ModelRequest(messages=[UserMessage(content="And Sunday?")], tools=tools))
        assert model.prompt_mode
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("get_weather", {"city": "Pune"})]
    assert again.text == "Done."
    said = [r for r in caplog.records if "describing them in the prompt" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "tools" in provider.requests[0].body and "tools" not in provider.requests[1].body


# -- text-written calls with unknown or unqualified names reach the gate -------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # an explicit call to a tool that does not exist: the gate answers UNKNOWN_TOOL
            '<tool_call>\n{"name": "track_parcel", "arguments": {"parcel": "P1"}}\n</tool_call>',
            ("track_parcel", {"parcel": "P1"}),
        ),
        (  # a bare name that is one qualified tool's
            '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "A1042"}}\n</tool_call>',
            ("orders.get_order", {"order_id": "A1042"}),
        ),
        (  # an answer that is nothing but a call-shaped object
            '{"name": "track_parcel", "arguments": {"parcel": "P1"}}',
            ("track_parcel", {"parcel": "P1"}),
        ),
        (
            '```json\n{"name": "get_order", "arguments": {"order_id": "A1"}}\n```',
            ("orders.get_order", {"order_id": "A1"}),
        ),
        ('<function=track_parcel>{"parcel": "P1"}</function>', ("track_parcel", {"parcel": "P1"})),
    ],
)
async def test_text_calls_with_unknown_or_bare_names_become_calls(
    provider: FakeProvider, tools, text: str, expected: tuple[str, Any]
) -> None:
    provider.queue(chat_completion(text))
    async with native(provider) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [expected]
    assert response.stop_reason == "tool_use" and response.text == ""


async def test_json_inside_prose_naming_no_tool_stays_the_answer(provider: FakeProvider, tools) -> None:
    text = 'The record is {"name": "Asha", "arguments": {"n": 1}} as stored.'
    provider.queue(chat_completion(text))
    async with native(provider) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert (response.text, response.tool_calls) == (text, [])


async def test_a_native_call_with_a_bare_name_resolves_to_the_one_qualified_tool(
    provider: FakeProvider, tools
) -> None:
    provider.queue(
        chat_completion(
            tool_calls=[chat_tool_call("c1", "get_order", {"order_id": "A1042"})], finish_reason="tool_calls"
        )
    )
    async with native(provider) as model:
        response = await model.complete(ModelRequest(messages=[UserMessage(content=GOAL)], tools=tools))
    assert response.tool_calls[0].name == "orders.get_order"


async def test_a_delayed_reply_counts_a_client_that_hung_up(provider: FakeProvider) -> None:
    """The fake server's disconnect detection, which the loop's time-limit test relies on."""
    import anyio

    provider.queue(Reply(body=chat_completion("late"), delay=2.0))
    async with native(provider, max_retries=0) as model:
        with anyio.move_on_after(0.3):
            await model.complete(ModelRequest(messages=[UserMessage(content="Hi")]))
    provider.wait_for_hang_up()
    assert provider.disconnects == 1
