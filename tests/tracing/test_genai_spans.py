"""An agent run is one trace in the GenAI conventions: invoke_agent > chat / execute_tool."""

import json

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.agent import Agent, ApprovalDecision, RunStatus
from maitre.models import Rule, ScriptedModel, after_tool, call, last_user_says, tool_error
from maitre.tracing import CAPTURE_CONTENT_ENV, set_capture_content

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
SECRET = "Pune-7f3a"
"""A value that appears in the goal, the arguments and the results: content, never on a span by default."""


def weekend_box() -> Toolbox:
    box = Toolbox("weekend")

    @box.tool
    async def get_weather(city: str) -> dict:
        """Weather for a city."""
        await anyio.sleep(0.05)  # the two calls overlap: they really run concurrently
        return {"city": city, "sky": "sunny"}

    @box.tool
    async def find_events(city: str) -> dict:
        """Events in a city."""
        await anyio.sleep(0.05)
        return {"events": [f"trek near {city}"]}

    @box.tool(effect="write", risk="high")
    def book_trek(city: str) -> str:
        """Book the trek."""
        return f"booked in {city}"

    @box.tool(scopes=frozenset({"admin"}))
    def wipe_calendar(confirm: bool) -> str:
        """Needs a scope nobody here has."""
        return "wiped"

    return box


def planner() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                "both at once",
                when=last_user_says("plan"),
                then=lambda r: [
                    call("weekend.get_weather", city=SECRET),
                    call("weekend.find_events", city=SECRET),
                ],
            ),
            Rule("answer", when=after_tool("find_events", ok=True), then=f"Go trekking in {SECRET}."),
        ]
    )


def by_name(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        out.setdefault(span.name, []).append(span)
    return out


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def everything(spans: list[ReadableSpan]) -> str:
    return json.dumps([dict(span.attributes or {}) for span in spans], default=str)


async def test_a_run_is_one_tree_with_the_conventions_names_and_attributes(spans: InMemorySpanExporter):
    """invoke_agent is the root; both chat calls and the two parallel tool calls are its children."""
    agent = Agent(planner(), weekend_box(), name="planner", notes=False)
    run = await agent.run(f"Plan my Saturday in {SECRET}", ALICE)
    assert run.status is RunStatus.FINISHED

    finished = list(spans.get_finished_spans())
    names = by_name(finished)
    assert set(names) == {
        "invoke_agent planner",
        "chat scripted",
        "execute_tool weekend.get_weather",
        "execute_tool weekend.find_events",
    }
    (root,) = names["invoke_agent planner"]
    assert root.parent is None and root.kind is SpanKind.INTERNAL
    assert len(names["chat scripted"]) == 2
    children = [s for s in finished if s is not root]
    assert all(parent_id(s) == root.context.span_id for s in children)
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}

    attrs = root.attributes
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "planner"
    assert attrs["gen_ai.provider.name"] == "maitre.scripted"
    assert attrs["gen_ai.conversation.id"] == run.id == attrs["maitre.run_id"]
    assert attrs["maitre.run.status"] == "finished"
    assert attrs["gen_ai.usage.input_tokens"] == run.usage.input_tokens > 0
    assert attrs["gen_ai.usage.output_tokens"] == run.usage.output_tokens > 0

    first, second = sorted(names["chat scripted"], key=lambda s: s.start_time or 0)
    assert first.kind is SpanKind.CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "scripted"
    assert first.attributes["gen_ai.response.model"] == "scripted"
    assert first.attributes["gen_ai.provider.name"] == "maitre.scripted"
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert first.attributes["gen_ai.conversation.id"] == run.id
    assert first.attributes["maitre.response.tool_calls"] == 2
    assert (
        first.attributes["gen_ai.usage.input_tokens"] + second.attributes["gen_ai.usage.input_tokens"]
        == run.usage.input_tokens
    )

    (weather,) = names["execute_tool weekend.get_weather"]
    (events,) = names["execute_tool weekend.find_events"]
    assert weather.start_time < events.end_time and events.start_time < weather.end_time  # in parallel
    calls = {c.name: c.id for m in run.messages for c in getattr(m, "tool_calls", [])}
    for span, tool in ((weather, "weekend.get_weather"), (events, "weekend.find_events")):
        assert span.kind is SpanKind.INTERNAL
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == tool
        assert span.attributes["gen_ai.tool.call.id"] == calls[tool]
        assert span.attributes["gen_ai.tool.type"] == "function"
        assert span.attributes["gen_ai.conversation.id"] == run.id
        assert span.attributes["maitre.decision"] == "allow"
        assert span.attributes["maitre.executed"] is True
        assert span.attributes["maitre.replayed"] is False
        assert "error.type" not in span.attributes
        assert span.status.status_code is StatusCode.UNSET

    assert SECRET not in everything(finished)  # content is off by default


async def test_two_runs_at_once_keep_their_own_children(spans: InMemorySpanExporter):
    """Concurrent runs: each tool and chat span hangs under its own run, never the other's."""
    agent = Agent(planner(), weekend_box(), name="planner", notes=False)
    async with anyio.create_task_group() as group:
        for _ in range(2):
            group.start_soon(agent.run, f"Plan my Saturday in {SECRET}", ALICE)
    finished = list(spans.get_finished_spans())
    roots = {s.context.span_id: s for s in finished if s.name == "invoke_agent planner"}
    assert len(roots) == 2
    for span in finished:
        if span.name.startswith(("chat", "execute_tool")):
            root = roots[parent_id(span)]
            assert span.attributes["gen_ai.conversation.id"] == root.attributes["gen_ai.conversation.id"]
    per_run = [sum(1 for s in finished if parent_id(s) == rid) for rid in roots]
    assert per_run == [4, 4]


@pytest.mark.parametrize("how", ["option", "environment"])
async def test_content_is_recorded_only_when_asked_for(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, how: str
):
    if how == "option":
        set_capture_content(True)
    else:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = Agent(planner(), weekend_box(), name="planner", notes=False, system="Plan weekends.")
    await agent.run(f"Plan my Saturday in {SECRET}", ALICE)
    names = by_name(list(spans.get_finished_spans()))

    (root,) = names["invoke_agent planner"]
    assert json.loads(root.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": f"Plan my Saturday in {SECRET}"}]}
    ]
    assert json.loads(root.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Plan weekends."}
    ]
    final = json.loads(root.attributes["gen_ai.output.messages"])
    assert final[0]["parts"][0]["content"].endswith(f"Go trekking in {SECRET}.")

    first, second = sorted(names["chat scripted"], key=lambda s: s.start_time or 0)
    output = json.loads(first.attributes["gen_ai.output.messages"])
    assert [p["type"] for p in output[0]["parts"]] == ["tool_call", "tool_call"]
    history = json.loads(second.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool"]
    assert history[2]["parts"][0]["type"] == "tool_call_response"

    (weather,) = names["execute_tool weekend.get_weather"]
    assert json.loads(weather.attributes["gen_ai.tool.call.arguments"]) == {"city": SECRET}
    assert SECRET in weather.attributes["gen_ai.tool.call.result"]


async def test_a_refused_call_carries_the_error(spans: InMemorySpanExporter):
    """Validation errors and policy denials: error.type is the ErrorCode, the status is ERROR."""
    gate = Gate(weekend_box())
    bad = await gate.call(ToolCall(id="c1", name="weekend.get_weather", arguments={"town": "x"}), ALICE)
    denied = await gate.call(
        ToolCall(id="c2", name="weekend.wipe_calendar", arguments={"confirm": True}), ALICE
    )
    missing = await gate.call(ToolCall(id="c3", name="weekend.no_such_tool", arguments={}), ALICE)
    assert bad.is_error and denied.is_error and missing.is_error
    names = by_name(list(spans.get_finished_spans()))

    (invalid,) = names["execute_tool weekend.get_weather"]
    assert invalid.parent is None  # a call outside any run is a root of its own
    assert invalid.attributes["error.type"] == str(bad.error.code) == "INVALID_ARGUMENTS"
    assert invalid.attributes["maitre.error_code"] == "INVALID_ARGUMENTS"
    assert invalid.attributes["maitre.executed"] is False
    assert invalid.status.status_code is StatusCode.ERROR
    assert "gen_ai.conversation.id" not in invalid.attributes  # no run: no conversation

    (refused,) = names["execute_tool weekend.wipe_calendar"]
    assert refused.attributes["error.type"] == str(denied.error.code)
    assert refused.attributes["maitre.decision"] == "deny"
    assert refused.status.status_code is StatusCode.ERROR

    (unknown,) = names["execute_tool weekend.no_such_tool"]  # named for what was called
    assert unknown.attributes["gen_ai.tool.name"] == "weekend.no_such_tool"
    assert unknown.attributes["error.type"] == str(missing.error.code)


async def test_a_paused_run_and_its_resumption_are_two_runs_of_one_conversation(spans: InMemorySpanExporter):
    model = ScriptedModel(
        [
            Rule("book", when=last_user_says("book"), then=lambda r: call("weekend.book_trek", city="Pune")),
            Rule("done", when=after_tool("book_trek", ok=True), then="Booked."),
            Rule("refused", when=tool_error("APPROVAL_DENIED"), then="Not booked."),
        ]
    )
    agent = Agent(model, weekend_box(), notes=False)
    run = await agent.run("Book the trek", ALICE)
    assert run.paused
    paused = by_name(list(spans.get_finished_spans()))
    (first,) = paused["invoke_agent"]  # no agent name: the conventions' bare span name
    (waiting,) = paused["execute_tool weekend.book_trek"]
    assert waiting.attributes["maitre.error_code"] == "APPROVAL_REQUIRED"
    assert waiting.attributes["maitre.approval_id"] == run.pending[0].approval_id
    assert "error.type" not in waiting.attributes  # waiting for a human is not a failure
    assert first.attributes["maitre.run.status"] == "paused"
    assert first.attributes["maitre.run.pending_approvals"] == 1
    assert first.attributes["maitre.resumed"] is False
    spans.clear()

    approval_id = run.pending[0].approval_id
    run = await agent.resume(run.id, {approval_id: ApprovalDecision.approved("maria")})
    assert run.status is RunStatus.FINISHED
    resumed = by_name(list(spans.get_finished_spans()))
    (second,) = resumed["invoke_agent"]
    assert second.context.trace_id != first.context.trace_id
    assert second.attributes["gen_ai.conversation.id"] == first.attributes["gen_ai.conversation.id"] == run.id
    assert second.attributes["maitre.resumed"] is True
    (booked,) = resumed["execute_tool weekend.book_trek"]
    assert parent_id(booked) == second.context.span_id
    assert booked.attributes["maitre.decision"] == "approved"
    assert booked.attributes["maitre.executed"] is True
    assert second.attributes["gen_ai.usage.output_tokens"] < run.usage.output_tokens  # this part only


async def test_a_model_failure_ends_the_chat_and_the_run_in_error(spans: InMemorySpanExporter):
    from maitre.models import ModelError

    class Down:
        name = "down-1"
        otel_provider = "openai"

        async def complete(self, request):
            raise ModelError("HTTP 503 from the provider", status=503, retryable=True)

    run = await Agent(Down(), weekend_box(), notes=False, name="planner").run("Plan", ALICE)
    assert run.stop_reason == "model_error"
    names = by_name(list(spans.get_finished_spans()))
    (chat,) = names["chat down-1"]
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["error.type"] == "503"
    assert chat.status.status_code is StatusCode.ERROR
    assert any(event.name == "exception" for event in chat.events)
    (root,) = names["invoke_agent planner"]
    assert root.attributes["error.type"] == "model_error"
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes["gen_ai.request.model"] == "down-1"


async def test_a_hosts_own_model_without_a_provider_name_is_other(spans: InMemorySpanExporter):
    from maitre.models import ModelResponse

    class Mine:
        name = "mine"

        async def complete(self, request):
            return ModelResponse(text="hello", model="mine-2")

    await Agent(Mine(), weekend_box(), notes=False).run("hi", ALICE)
    (chat,) = by_name(list(spans.get_finished_spans()))["chat mine"]
    assert chat.attributes["gen_ai.provider.name"] == "_OTHER"
    assert chat.attributes["gen_ai.response.model"] == "mine-2"


async def test_calls_served_over_mcp_are_execute_tool_spans(spans: InMemorySpanExporter):
    pytest.importorskip("mcp")
    from maitre.testing import mcp_client

    async with mcp_client(weekend_box()) as client:
        result = await client.call_tool("weekend.get_weather", {"city": "Pune"})
    assert not result.is_error
    (served,) = by_name(list(spans.get_finished_spans()))["execute_tool weekend.get_weather"]
    assert served.attributes["gen_ai.operation.name"] == "execute_tool"
    assert served.attributes["maitre.executed"] is True
    assert served.attributes["maitre.decision"] == "allow"
