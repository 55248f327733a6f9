"""Thinking / reasoning blocks travel with the assistant message, so a resumed run can send them back."""

from maitre.agent.messages import AssistantMessage, ToolResultMessage, UserMessage, message_from_dict
from maitre.models import AnthropicModel, ModelRequest, OpenAIResponsesModel
from maitre.types import ToolCall

THINKING = [{"type": "thinking", "thinking": "check the order first", "signature": "sig-123"}]
REASONING = [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"}]


def conversation(state):
    stored = AssistantMessage(
        tool_calls=[ToolCall(id="toolu_1", name="get_order", arguments={})], provider_state=state
    )
    restored = message_from_dict(stored.to_dict())  # what a run saved by another process holds
    return [
        UserMessage(content="where is A1042?"),
        restored,
        ToolResultMessage(call_id="toolu_1", name="get_order", content="shipped"),
    ]


def test_a_fresh_anthropic_adapter_sends_the_stored_thinking_blocks_back():
    model = AnthropicModel("claude-sonnet-5-5", api_key="test", base_url="http://127.0.0.1:9")
    messages = model.to_messages(ModelRequest(messages=conversation(THINKING)))
    assistant = messages[1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == THINKING[0]
    assert assistant["content"][1]["type"] == "tool_use"


def test_a_fresh_responses_adapter_sends_the_stored_reasoning_items_back():
    model = OpenAIResponsesModel("gpt-5.5", api_key="test", base_url="http://127.0.0.1:9")
    items = model.to_input(ModelRequest(messages=conversation(REASONING)))
    assert REASONING[0] in items
    assert items.index(REASONING[0]) < next(
        i for i, item in enumerate(items) if item.get("type") == "function_call"
    )
