"""Short-term memory: old tool results are trimmed first, then older turns are summarised."""

import pytest

from maitre import Principal, Toolbox
from maitre.agent import Agent, ContextManager, Limits, ToolResultMessage, UserMessage
from maitre.agent.context_manager import conversation_tokens
from maitre.models import Rule, ScriptedModel, always, call

pytestmark = pytest.mark.anyio


def log_box() -> Toolbox:
    box = Toolbox()

    @box.tool(max_result_tokens=400)
    def read_log(part: int) -> str:
        """Read part of a log."""
        return f"part {part}: " + "request handled in 12 ms status=200 " * 60

    return box


async def test_old_tool_results_are_trimmed_to_pointers_before_anything_else():
    parts = iter(range(100))
    model = ScriptedModel(
        [
            Rule(
                "stop",
                when=lambda r: sum(isinstance(m, ToolResultMessage) for m in r.messages) >= 6,
                then="done",
            ),
            Rule("read", when=always, then=lambda r: call("read_log", part=next(parts))),
        ]
    )
    manager = ContextManager(max_tokens=1500, keep_recent=2, summarise=False)
    run = await Agent(model, log_box(), context=manager, limits=Limits(max_steps=10)).run(
        "read the logs", Principal(user="u")
    )
    assert run.stop_reason == "completed"
    trimmed = [
        m for m in run.messages if isinstance(m, ToolResultMessage) and m.content.startswith("[trimmed")
    ]
    assert trimmed and "tokens of read_log output" in trimmed[0].content
    assert any(e["type"] == "context_trimmed" for e in run.events)
    for request in model.requests:
        assert conversation_tokens(request.messages) <= 1500 + 450  # at most one fresh result over


async def test_when_trimming_is_not_enough_older_turns_are_summarised_by_the_model():
    box = Toolbox()

    @box.tool
    def note(text: str) -> str:
        """Acknowledge."""
        return "ok " + text

    counter = iter(range(100))
    model = ScriptedModel(
        [
            Rule(
                "summarise",
                when=lambda r: not r.tools and "Summarise the conversation" in r.messages[0].content,
                then="The user wants notes taken; 6 notes were acknowledged.",
            ),
            Rule(
                "stop",
                when=lambda r: sum(isinstance(m, ToolResultMessage) for m in r.messages) >= 8,
                then="done",
            ),
            Rule(
                "talk",
                when=always,
                then=lambda r: call("note", text="a long remark " * 40 + str(next(counter))),
            ),
        ]
    )
    manager = ContextManager(max_tokens=900, keep_recent=2)
    run = await Agent(model, box, context=manager, notes=False, limits=Limits(max_steps=12)).run(
        "take notes", Principal(user="u")
    )
    assert any(e["type"] == "context_summarised" for e in run.events)
    first = run.messages[0]
    assert isinstance(first, UserMessage) and first.content.startswith("[Summary of the earlier conversation")
    assert "6 notes were acknowledged" in first.content or "[rule summarise]" in first.content


def test_summary_split_never_orphans_a_tool_result():
    from maitre.agent import AssistantMessage
    from maitre.types import ToolCall

    messages = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=[ToolCall(id="1", name="a"), ToolCall(id="2", name="b")]),
        ToolResultMessage(call_id="1", name="a", content="x"),
        ToolResultMessage(call_id="2", name="b", content="y"),
        AssistantMessage(text="next"),
    ]
    split = ContextManager(keep_recent=2).summary_split(messages)
    assert not isinstance(messages[split], ToolResultMessage)
