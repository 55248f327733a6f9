"""OpenTelemetry traces in the GenAI semantic conventions, so any OTLP backend can read a run.

maitre only uses the OpenTelemetry *API* (a core dependency); nothing is recorded until the host
installs an SDK tracer provider, by itself or with `configure_otlp` (the `otel` extra). Until then
every instrumented place skips its span after one cheap check (`tracing_enabled`), so the gate's
fixed cost per call stays where it was.

One agent run is one trace:

```
invoke_agent {agent}            gen_ai.conversation.id = maitre.run_id = the run id
├── chat {model}                model, provider, token usage, finish reasons
├── execute_tool {tool}         tool name, call id, maitre.decision, error.type / maitre.error_code
├── execute_tool {tool}         (calls proposed together run concurrently, all children of the run)
└── chat {model}
```

A resumed run (after an approval) is a new `invoke_agent` span with the same
`gen_ai.conversation.id` and `maitre.resumed = true`. A call that comes in through another door
(MCP, `Gate.call` from host code) is an `execute_tool` span under whatever span is current.

Attribute names follow the GenAI conventions as published in semantic-conventions-genai (the
`gen_ai.provider.name` generation, which replaced `gen_ai.system`); maitre's own facts sit beside
them under `maitre.*`. Content - messages, system instructions, tool arguments and results - is
*not* recorded unless the host opts in, with `set_capture_content(True)` or the convention's
environment variable `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`; it then goes on
the spans as JSON strings in the convention's message shape (role + parts).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ._extras import MissingExtraError, missing_modules
from .messages import AssistantMessage, Message, UserMessage
from .types import ErrorCode

if TYPE_CHECKING:
    from .gate.base import CallContext
    from .types import ToolResult

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "agent_span",
    "capture_content",
    "chat_span",
    "configure_otlp",
    "end_agent_span",
    "end_chat_span",
    "end_tool_span",
    "input_messages",
    "set_capture_content",
    "start_tool_span",
    "tracing_enabled",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' opt-in for recording content: `true` (or `span_only`, `span_and_event`)."""

_ON = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
_ENV_PROVIDER = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
_UNSET: Any = object()
_traced: list[bool] = []
"""The answer of `tracing_enabled` once a provider is installed (OpenTelemetry allows that only once)."""
_capture: list[bool] = []
"""The host's explicit content setting, if any (empty: follow the environment variable)."""

_agent_tracer = trace.get_tracer("maitre.agent")
_model_tracer = trace.get_tracer("maitre.models")

_FINISH_REASONS = {
    "end_turn": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "refusal": "content_filter",
    "error": "error",
}
"""maitre's normalised finish reasons, as the conventions' output-message finish reasons."""


def tracing_enabled() -> bool:
    """True once the host has installed an OpenTelemetry SDK; until then spans would be no-ops,
    and skipping them keeps a call's fixed cost low (0.05 µs, not the 0.5 µs of asking)."""
    if _traced:
        return _traced[0]
    if getattr(trace, "_TRACER_PROVIDER", _UNSET) is None and not _ENV_PROVIDER:
        return False  # nothing installed yet
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return False
    _traced.append(not isinstance(provider, trace.NoOpTracerProvider))
    return _traced[0]


def set_capture_content(enabled: bool | None) -> None:
    """Record content (messages, tool arguments and results) on spans, or not; None goes back to
    the environment variable `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (default off)."""
    _capture.clear()
    if enabled is not None:
        _capture.append(bool(enabled))


def capture_content() -> bool:
    """Whether spans carry content: the explicit setting, else the environment variable."""
    if _capture:
        return _capture[0]
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _ON


def configure_otlp(url: str, *, service_name: str = "maitre", capture_content: bool | None = None) -> Any:
    """Install an SDK tracer provider that sends spans to an OTLP/HTTP endpoint, and return it.

    Args:
        url: the collector's traces endpoint, for example `http://localhost:4318/v1/traces` (a
            bare `http://host:4318` gets `/v1/traces` appended).
        service_name: the `service.name` resource attribute the backend groups traces by.
        capture_content: record messages and tool arguments/results too (see the module
            docstring); None leaves the current setting.

    Spans are batched (a `BatchSpanProcessor`) and flushed when the process exits. OpenTelemetry
    accepts one global provider per process: if the host already installed one, it is kept and
    this one is returned unused, with a warning from OpenTelemetry.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        missing = missing_modules("otel")
        if missing:
            raise MissingExtraError("otel", "Exporting traces over OTLP", missing) from None
        raise
    endpoint = url.rstrip("/")
    if not endpoint.endswith("/v1/traces"):
        endpoint += "/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    if capture_content is not None:
        set_capture_content(capture_content)
    return provider


# -- content, in the conventions' message shape ---------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _parts(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "parts": [{"type": "text", "content": message.content}]}
    if isinstance(message, AssistantMessage):
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"type": "text", "content": message.text})
        for call in message.tool_calls:
            parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
        return {"role": "assistant", "parts": parts}
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": message.call_id, "response": message.content}],
    }


def input_messages(messages: Sequence[Message]) -> str:
    """`gen_ai.input.messages`: the conversation as JSON, in the conventions' role + parts shape."""
    return _json([_parts(m) for m in messages])


def _system(system: str | None) -> str | None:
    return _json([{"type": "text", "content": system}]) if system else None


def _set(span: Span, key: str, value: Any) -> None:
    if value is not None and value != "":
        span.set_attribute(key, value)


def _fail(span: Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


# -- invoke_agent ---------------------------------------------------------------------------------


@contextmanager
def agent_span(
    *,
    run_id: str,
    agent_name: str | None,
    provider: str,
    model: str | None,
    resumed: bool,
    system: str | None,
    messages: Sequence[Message],
) -> Iterator[Span]:
    """The `invoke_agent` span of one run (or one resumption), current while the loop runs, so
    the model and tool spans below it are its children. Call `end_agent_span` before leaving."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider,
        "gen_ai.conversation.id": run_id,
        "maitre.run_id": run_id,
        "maitre.resumed": resumed,
    }
    if agent_name:
        attributes["gen_ai.agent.name"] = agent_name
    if model:
        attributes["gen_ai.request.model"] = model
    name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
    with _agent_tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes) as span:
        if span.is_recording() and capture_content():
            _set(span, "gen_ai.system_instructions", _system(system))
            if messages:
                span.set_attribute("gen_ai.input.messages", input_messages(messages))
        yield span


def end_agent_span(
    span: Span,
    *,
    status: str,
    stop_reason: str | None,
    input_tokens: int,
    output_tokens: int,
    pending: int,
    final_text: str,
) -> None:
    """What the run came to: status, stop reason, the tokens this span's part of it used."""
    if not span.is_recording():
        return
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    span.set_attribute("maitre.run.status", status)
    _set(span, "maitre.run.stop_reason", stop_reason)
    if pending:
        span.set_attribute("maitre.run.pending_approvals", pending)
    if stop_reason == "model_error":
        _fail(span, "model_error", final_text[:200] or None)
    if capture_content() and final_text:
        span.set_attribute(
            "gen_ai.output.messages",
            _json([{"role": "assistant", "parts": [{"type": "text", "content": final_text}]}]),
        )


# -- chat -----------------------------------------------------------------------------------------


@contextmanager
def chat_span(
    *,
    provider: str,
    model: str | None,
    max_tokens: int | None,
    conversation_id: str | None,
    system: str | None,
    messages: Sequence[Message],
) -> Iterator[Span]:
    """The `chat {model}` span of one model call. An exception leaving it (a `ModelError`, a
    timeout's cancellation) sets `error.type` and the error status, and goes on."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider}
    if model:
        attributes["gen_ai.request.model"] = model
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if conversation_id:
        attributes["gen_ai.conversation.id"] = conversation_id
        attributes["maitre.run_id"] = conversation_id
    name = f"chat {model}" if model else "chat"
    with _model_tracer.start_as_current_span(
        name,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=True,
        set_status_on_exception=False,
    ) as span:
        if span.is_recording() and capture_content():
            _set(span, "gen_ai.system_instructions", _system(system))
            span.set_attribute("gen_ai.input.messages", input_messages(messages))
        try:
            yield span
        except BaseException as exc:
            status = getattr(exc, "status", None)
            _fail(span, str(status) if isinstance(status, int) else type(exc).__qualname__, str(exc)[:200])
            raise


def end_chat_span(
    span: Span,
    *,
    response_model: str,
    finish_reason: str,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int,
    text: str,
    tool_calls: Sequence[Any],
) -> None:
    """What the model answered: the model that answered, usage, finish reason (and, when content
    is captured, the output message)."""
    if not span.is_recording():
        return
    _set(span, "gen_ai.response.model", response_model)
    span.set_attribute("gen_ai.response.finish_reasons", (_FINISH_REASONS.get(finish_reason, finish_reason),))
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    if cached_input_tokens:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", cached_input_tokens)
    span.set_attribute("maitre.response.tool_calls", len(tool_calls))
    if capture_content():
        message = AssistantMessage(text=text, tool_calls=list(tool_calls))
        span.set_attribute("gen_ai.output.messages", _json([_parts(message)]))


# -- execute_tool ---------------------------------------------------------------------------------


def start_tool_span(tracer: trace.Tracer, ctx: CallContext) -> Span:
    """The `execute_tool {name}` span of one gate call, named for the name the caller used until
    the gate resolves the tool (`end_tool_span` renames it to the canonical name)."""
    name = ctx.call.name if type(ctx.call.name) is str else str(ctx.call.name)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name[:200],
        "gen_ai.tool.call.id": str(ctx.call.id)[:200],
    }
    if not ctx.run.ephemeral:
        attributes["gen_ai.conversation.id"] = ctx.run.run_id
        attributes["maitre.run_id"] = ctx.run.run_id
    return tracer.start_span(f"execute_tool {name[:200]}", kind=SpanKind.INTERNAL, attributes=attributes)


def end_tool_span(span: Span, ctx: CallContext, result: ToolResult) -> None:
    """The gate's verdict on the span: tool, decision, error; content only when opted in.

    A refused or failed call carries `error.type` (the `ErrorCode`) and the error status; a call
    waiting for a human approval is not an error (it has `maitre.approval_id` instead)."""
    if not span.is_recording():
        return
    tool = ctx.tool
    if tool is not None:
        span.update_name(f"execute_tool {tool.name}")
        span.set_attribute("gen_ai.tool.name", tool.name)
        span.set_attribute("gen_ai.tool.type", "function" if tool.source == "local" else "extension")
        _set(span, "gen_ai.tool.description", tool.description)
        span.set_attribute("maitre.tool.effect", str(tool.effect))
        span.set_attribute("maitre.tool.source", tool.source)
    span.set_attribute("maitre.decision", str(ctx.decision))
    span.set_attribute("maitre.is_error", result.is_error)
    span.set_attribute("maitre.executed", ctx.executed)
    span.set_attribute("maitre.replayed", result.replayed)
    span.set_attribute("maitre.trust", str(result.trust))
    if result.approval is not None:
        span.set_attribute("maitre.approval_id", result.approval.approval_id)
    if result.error is not None:
        code = str(result.error.code)
        span.set_attribute("maitre.error_code", code)
        if result.error.code is not ErrorCode.APPROVAL_REQUIRED:
            _fail(span, code)
    if capture_content():
        arguments = ctx.arguments if ctx.arguments is not None else ctx.call.arguments
        span.set_attribute(
            "gen_ai.tool.call.arguments", arguments if isinstance(arguments, str) else _json(arguments)
        )
        if not result.is_error:
            span.set_attribute("gen_ai.tool.call.result", result.content)
