"""One model call inside a `chat {model}` span (the GenAI conventions; see `maitre.tracing`).

Every adapter is traced the same way, from the outside: the agent loop calls `traced_complete`
instead of `model.complete`, so a host's own `Model` is traced too, with no change to it. Without
an installed tracer provider this is one cheap check and the plain call.
"""

from __future__ import annotations

from typing import Any

from ..tracing import chat_span, end_chat_span, tracing_enabled
from .base import Model, ModelRequest, ModelResponse

__all__ = ["provider_of", "traced_complete"]


def provider_of(model: Any) -> str:
    """The model's `gen_ai.provider.name`: its `otel_provider` (every maitre adapter has one), or
    `_OTHER` for a host's model that does not say (the conventions' value for "none of these")."""
    provider = getattr(model, "otel_provider", None)
    return provider if isinstance(provider, str) and provider else "_OTHER"


def _model_name(model: Any) -> str | None:
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else None


async def traced_complete(
    model: Model, request: ModelRequest, *, conversation_id: str | None = None
) -> ModelResponse:
    """`model.complete(request)`, in a `chat` span when tracing is on.

    Args:
        model: any `Model`.
        request: the request to send.
        conversation_id: the run id (`gen_ai.conversation.id`), when the call is part of a run.
    """
    if not tracing_enabled():
        return await model.complete(request)
    with chat_span(
        provider=provider_of(model),
        model=_model_name(model),
        max_tokens=request.max_output_tokens,
        conversation_id=conversation_id,
        system=request.system,
        messages=request.messages,
    ) as span:
        response = await model.complete(request)
        end_chat_span(
            span,
            response_model=response.model,
            finish_reason=response.stop_reason,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cached_input_tokens=response.usage.cached_input_tokens,
            text=response.text,
            tool_calls=response.tool_calls,
        )
    return response
