"""`AnthropicModel`: the Messages API through the official `anthropic` SDK (`AsyncAnthropic`).

Translation, both ways (seed 001 shows the exchange):

- the system prompt goes in `system`; tools go in `tools` as `{name, description, input_schema}`
  with provider-safe names (`orders.get_order` -> `orders__get_order`), mapped back on return;
- an assistant turn becomes `text` and `tool_use` blocks, in the order the model wrote them;
- tool results become `tool_result` blocks (`tool_use_id`, `is_error`, text from
  `render_tool_result`, which fences untrusted output as data) inside one user message:
  consecutive results are merged, because Anthropic wants every result of a parallel turn in
  the single user message that follows it, before any other text;
- `stop_reason` maps to maitre's: `end_turn`/`stop_sequence` -> end_turn, `tool_use`,
  `max_tokens`/`model_context_window_exceeded` -> max_tokens, `refusal`, anything else -> other;
- usage: `input_tokens` counts every prompt token the request carried (fresh, cache writes and
  cache reads, which Anthropic reports apart); `cached_input_tokens` is the cache reads.

Thinking blocks that come with tool calls are kept in memory and sent back with that assistant
turn (`_http.ReplayCache`), as the API asks during a tool loop.

Retries are the SDK's (429, 408, 409, 5xx and connection errors; `Retry-After` honoured;
`max_retries` per request); what fails after them raises `ModelError`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..messages import AssistantMessage, ToolResultMessage, UserMessage, render_tool_result
from ..tools.export import provider_name
from ..types import ToolCall
from ._http import DefinitionsCache, ReplayCache, SDKModel, arguments_object, token_count
from .base import FinishReason, ModelError, ModelRequest, ModelResponse, Usage

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Usage as AnthropicUsage

__all__ = ["AnthropicModel", "DEFAULT_ANTHROPIC_MODEL"]

logger = logging.getLogger("maitre.models.anthropic")

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


class AnthropicModel(SDKModel):
    """Claude through the Messages API.

    Args:
        model: the model id, for example `"claude-sonnet-5-5"` or a dated snapshot.
        client: an `anthropic.AsyncAnthropic` to use as it is (its own retries and timeout apply).
        api_key: the key; by default the SDK reads `ANTHROPIC_API_KEY`.
        base_url: another endpoint (a proxy, a gateway, a test server).
        max_retries: retries the SDK makes for 429, 5xx and connection errors before giving up.
        timeout: seconds for one HTTP request.
        extra: more keyword arguments for `messages.create` (temperature, thinking, metadata...).

    Example:
        ```python
        model = AnthropicModel("claude-sonnet-5-5")
        response = await model.complete(ModelRequest(messages=[UserMessage(content="Hi")]))
        ```
    """

    _sdk_module = "anthropic"
    _client_class = "AsyncAnthropic"
    _provider = "Anthropic"
    otel_provider = "anthropic"
    client: AsyncAnthropic

    def __init__(
        self,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        *,
        client: AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 120.0,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            model,
            client=client,
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            extra=extra,
        )
        self._definitions = DefinitionsCache("anthropic")
        self._replay = ReplayCache()

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        definitions = self._definitions.get(request.tools)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_output_tokens,
            "messages": self.to_messages(request),
            **self.extra,
        }
        if request.system:
            params["system"] = request.system
        if definitions:
            params["tools"] = list(definitions)
        message = await self._send(self.client.messages.create, params)

        text_parts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        for block in message.content or []:
            if block.type == "text":
                text_parts.append(block.text)
            elif block.type == "tool_use":
                sent: object = block.input  # the SDK does not validate responses: check the shape
                arguments = sent if isinstance(sent, dict) else {}
                calls.append(
                    ToolCall(id=block.id, name=definitions.to_canonical(block.name), arguments=arguments)
                )
            elif block.type in ("thinking", "redacted_thinking"):
                thinking.append(block.model_dump(mode="json", exclude_none=True))
        if calls:
            self._replay.put(calls[0].id, thinking)

        raw_stop = message.stop_reason or ""
        stop_reason = _STOP_REASONS.get(raw_stop, "other")
        if raw_stop not in _STOP_REASONS:
            logger.info("Anthropic stop_reason %r mapped to 'other'", raw_stop)
        return ModelResponse(
            text="".join(text_parts),
            tool_calls=calls,
            usage=_usage(message.usage),
            stop_reason=stop_reason,
            model=str(message.model or self.model),
            raw=message,
            provider_state=thinking if calls and thinking else None,
        )

    def to_messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The request's conversation in Messages API form (public for inspection and tests)."""
        messages: list[dict[str, Any]] = []
        for message in request.messages:
            if isinstance(message, UserMessage):
                if message.content:  # the API rejects empty text blocks
                    _append(messages, "user", [{"type": "text", "text": message.content}])
            elif isinstance(message, AssistantMessage):
                blocks: list[dict[str, Any]] = []
                if message.tool_calls:
                    blocks.extend(message.provider_state or self._replay.get(message.tool_calls[0].id))
                if message.text:
                    blocks.append({"type": "text", "text": message.text})
                for call in message.tool_calls:
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": call.id,
                            "name": provider_name(call.name),
                            "input": arguments_object(call.arguments),
                        }
                    )
                if blocks:
                    _append(messages, "assistant", blocks)
            elif isinstance(message, ToolResultMessage):
                block = {
                    "type": "tool_result",
                    "tool_use_id": message.call_id,
                    "content": render_tool_result(message),
                    "is_error": message.is_error,
                }
                _append(messages, "user", [block])
            else:  # pragma: no cover - the Message union is closed
                raise ModelError(f"cannot send a {type(message).__name__} to Anthropic")
        return messages


def _append(messages: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add blocks as a new turn, or to the previous turn of the same role.

    In a user turn, `tool_result` blocks go before any text (the API requires it).
    """
    if messages and messages[-1]["role"] == role:
        content = messages[-1]["content"]
        for block in blocks:
            if block["type"] == "tool_result":
                at = sum(1 for existing in content if existing["type"] == "tool_result")
                content.insert(at, block)
            else:
                content.append(block)
        return
    messages.append({"role": role, "content": list(blocks)})


def _usage(usage: AnthropicUsage | None) -> Usage:
    if usage is None:
        return Usage()
    fresh = token_count(usage, "input_tokens")
    written = token_count(usage, "cache_creation_input_tokens")
    read = token_count(usage, "cache_read_input_tokens")
    return Usage(
        input_tokens=fresh + written + read,
        output_tokens=token_count(usage, "output_tokens"),
        cached_input_tokens=read,
    )
