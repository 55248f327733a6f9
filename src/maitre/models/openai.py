"""OpenAI adapters on the official `openai` SDK (`AsyncOpenAI`): Chat Completions and Responses.

`OpenAIChatModel` (Chat Completions):

- the system prompt is the first message (`role: system`); tools go in `tools` as
  `{"type": "function", "function": {...}}` with provider-safe names, mapped back on return;
- an assistant turn is one message with `content` and `tool_calls` (`id`, `function.name`,
  `function.arguments` as JSON text); each tool result is its own `role: tool` message with
  `tool_call_id` and the text of `render_tool_result` (untrusted output fenced as data). The
  wire format has no error flag: maitre's error texts say what went wrong themselves;
- `finish_reason`: stop -> end_turn, tool_calls/function_call -> tool_use, length -> max_tokens,
  content_filter -> refusal; a `refusal` message is a refusal;
- usage: `prompt_tokens` (which includes cached tokens), `completion_tokens`,
  `prompt_tokens_details.cached_tokens`.

`OpenAIResponsesModel` (Responses API): the system prompt is `instructions`; the conversation is a
list of items (`message`, `function_call` with `call_id`, `function_call_output`); the answer's
`output` holds `message` items (`output_text`, `refusal`) and `function_call` items; `status`
`incomplete` says why (`max_output_tokens`, `content_filter`). Reasoning items that come with
function calls are kept in memory and sent back with that turn.

Arguments the model wrote as broken JSON are passed on as the raw text: the gate answers them
with a teaching error. Retries are the SDK's (429, 408, 409, 5xx, connection errors;
`Retry-After` honoured up to the SDK's cap); what fails after them raises `ModelError`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from ..messages import AssistantMessage, ToolResultMessage, UserMessage, render_tool_result
from ..tools.export import ExportFormat, ToolDefinitions, provider_name
from ..types import ToolCall
from ._http import DefinitionsCache, ReplayCache, SDKModel, arguments_json, function_call, token_count
from .base import FinishReason, ModelError, ModelRequest, ModelResponse, Usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAIChatModel", "OpenAIResponsesModel"]

logger = logging.getLogger("maitre.models.openai")

DEFAULT_OPENAI_MODEL = "gpt-5.5"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}
"""Responses API `incomplete_details.reason` -> finish reason (anything else is "other")."""


class _OpenAIBase(SDKModel):
    """The `openai` SDK's client, and what both OpenAI APIs do alike: the constructor and its
    defaults, the tool definitions in the API's format, the model that answered."""

    _sdk_module = "openai"
    _client_class = "AsyncOpenAI"
    _provider = "OpenAI"
    otel_provider = "openai"
    _format: ClassVar[ExportFormat]
    """How this API wants the tool definitions."""
    client: AsyncOpenAI

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        client: AsyncOpenAI | None = None,
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
        self._definitions = DefinitionsCache(self._format)

    def _answered_by(self, raw: Any) -> str:
        """The model named in the answer (for pricing), else the one asked for."""
        return str(getattr(raw, "model", None) or self.model)


class OpenAIChatModel(_OpenAIBase):
    """An OpenAI model through Chat Completions.

    Args:
        model: the model id, for example `"gpt-5.5"`.
        client: an `openai.AsyncOpenAI` to use as it is (its own retries and timeout apply).
        api_key: the key; by default the SDK reads `OPENAI_API_KEY`.
        base_url: another endpoint (Azure-style proxies, gateways, a test server).
        max_retries: retries the SDK makes for 429, 5xx and connection errors before giving up.
        timeout: seconds for one HTTP request.
        extra: more keyword arguments for `chat.completions.create` (temperature, seed...).

    Example:
        ```python
        model = OpenAIChatModel("gpt-5.5")
        response = await model.complete(ModelRequest(messages=[UserMessage(content="Hi")], tools=tools))
        ```
    """

    _format = "openai"
    _token_limit_param = "max_completion_tokens"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        definitions = self._definitions.get(request.tools)
        params = self._params(request, definitions)
        completion = await self._send(self.client.chat.completions.create, params)
        if not getattr(completion, "choices", None):
            raise ModelError(f"{self._provider} answered without a choice", retryable=False)

        choice = completion.choices[0]
        message = choice.message
        text = message.content or ""
        calls: list[ToolCall] = []
        for index, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call: maitre offers none
                logger.info("ignoring a %r tool call from %s", getattr(call, "type", None), self._provider)
                continue
            calls.append(
                function_call(
                    definitions,
                    call_id=call.id,
                    name=function.name,
                    arguments=function.arguments,
                    turn=len(request.messages),
                    index=index,
                )
            )

        finish = choice.finish_reason or ""
        stop_reason = _FINISH_REASONS.get(finish, "other")
        refusal = getattr(message, "refusal", None)
        if refusal:
            text = text or refusal
            stop_reason = "refusal"
        elif calls and stop_reason == "end_turn":
            stop_reason = "tool_use"  # some servers say "stop" next to tool calls
        text, calls, stop_reason = self._finish(request, definitions, text, calls, stop_reason)
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=_usage(
                getattr(completion, "usage", None),
                "prompt_tokens",
                "completion_tokens",
                "prompt_tokens_details",
            ),
            stop_reason=stop_reason,
            model=self._answered_by(completion),
            raw=completion,
        )

    def _params(self, request: ModelRequest, definitions: ToolDefinitions) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for this request."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": self.to_messages(request),
            self._token_limit_param: request.max_output_tokens,
            **self.extra,
        }
        if definitions:
            params["tools"] = list(definitions)
        return params

    def _finish(
        self,
        request: ModelRequest,
        definitions: ToolDefinitions,
        text: str,
        calls: list[ToolCall],
        stop_reason: FinishReason,
    ) -> tuple[str, list[ToolCall], FinishReason]:
        """A hook for servers that need more reading of the answer (see `OpenAICompatibleModel`)."""
        return text, calls, stop_reason

    def to_messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The request's conversation in Chat Completions form (public for inspection and tests)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            if isinstance(message, UserMessage):
                messages.append({"role": "user", "content": message.content})
            elif isinstance(message, AssistantMessage):
                item: dict[str, Any] = {"role": "assistant", "content": message.text or None}
                if message.tool_calls:
                    item["tool_calls"] = [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": provider_name(call.name),
                                "arguments": arguments_json(call.arguments),
                            },
                        }
                        for call in message.tool_calls
                    ]
                elif item["content"] is None:
                    item["content"] = ""
                messages.append(item)
            elif isinstance(message, ToolResultMessage):
                messages.append(
                    {"role": "tool", "tool_call_id": message.call_id, "content": render_tool_result(message)}
                )
            else:  # pragma: no cover - the Message union is closed
                raise ModelError(f"cannot send a {type(message).__name__} to {self._provider}")
        return messages


class OpenAIResponsesModel(_OpenAIBase):
    """An OpenAI model through the Responses API.

    Args:
        model: the model id, for example `"gpt-5.5"`.
        client: an `openai.AsyncOpenAI` to use as it is (its own retries and timeout apply).
        api_key: the key; by default the SDK reads `OPENAI_API_KEY`.
        base_url: another endpoint (a gateway, a test server).
        max_retries: retries the SDK makes for 429, 5xx and connection errors before giving up.
        timeout: seconds for one HTTP request.
        extra: more keyword arguments for `responses.create` (reasoning, store, include...).
    """

    _format = "openai-responses"

    @cached_property
    def _replay(self) -> ReplayCache:
        """Reasoning items kept for the turn of the function calls they came with."""
        return ReplayCache()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        definitions = self._definitions.get(request.tools)
        params: dict[str, Any] = {
            "model": self.model,
            "input": self.to_input(request),
            "max_output_tokens": request.max_output_tokens,
            **self.extra,
        }
        if request.system:
            params["instructions"] = request.system
        if definitions:
            params["tools"] = list(definitions)
        response = await self._send(self.client.responses.create, params)

        status = getattr(response, "status", None)
        if status == "failed":
            failure = getattr(response, "error", None)
            detail = getattr(failure, "message", None) or "no detail"
            code = getattr(failure, "code", None)
            retryable = code in ("server_error", "rate_limit_exceeded")
            raise ModelError(f"{self._provider} response failed: {code}: {detail}", retryable=retryable)

        texts: list[str] = []
        refusals: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[dict[str, Any]] = []
        for item in response.output or []:
            if item.type == "message":
                for part in item.content or []:
                    if part.type == "output_text" and part.text:
                        texts.append(part.text)
                    elif part.type == "refusal" and part.refusal:
                        refusals.append(part.refusal)
            elif item.type == "function_call":
                calls.append(
                    function_call(
                        definitions,
                        call_id=item.call_id,
                        name=item.name,
                        arguments=item.arguments,
                        turn=len(request.messages),
                        index=len(calls),
                    )
                )
            elif item.type == "reasoning":
                reasoning.append(item.model_dump(mode="json", exclude_none=True))
        replayable = calls and (
            self.extra.get("store", True) is not False or all("encrypted_content" in r for r in reasoning)
        )
        if replayable:
            self._replay.put(calls[0].id, reasoning)

        stop_reason: FinishReason = "tool_use" if calls else "end_turn"
        if status == "incomplete":
            reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
            stop_reason = _INCOMPLETE_REASONS.get(reason or "", "other")
        if refusals and not calls:
            stop_reason = "refusal"
        text = "".join(texts) or "".join(refusals)
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=_usage(
                getattr(response, "usage", None), "input_tokens", "output_tokens", "input_tokens_details"
            ),
            stop_reason=stop_reason,
            model=self._answered_by(response),
            raw=response,
            provider_state=reasoning if replayable and reasoning else None,
        )

    def to_input(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The request's conversation as Responses API input items (public for inspection and tests)."""
        items: list[dict[str, Any]] = []
        for message in request.messages:
            if isinstance(message, UserMessage):
                items.append({"role": "user", "content": message.content})
            elif isinstance(message, AssistantMessage):
                if message.tool_calls:
                    items.extend(message.provider_state or self._replay.get(message.tool_calls[0].id))
                if message.text:
                    items.append({"role": "assistant", "content": message.text})
                for call in message.tool_calls:
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call.id,
                            "name": provider_name(call.name),
                            "arguments": arguments_json(call.arguments),
                        }
                    )
            elif isinstance(message, ToolResultMessage):
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": message.call_id,
                        "output": render_tool_result(message),
                    }
                )
            else:  # pragma: no cover - the Message union is closed
                raise ModelError(f"cannot send a {type(message).__name__} to {self._provider}")
        return items


def _usage(usage: Any, input_field: str, output_field: str, details_field: str) -> Usage:
    """Both APIs report usage alike under their own names (Chat Completions `prompt_tokens`,
    `completion_tokens`, `prompt_tokens_details`; Responses `input_tokens`, `output_tokens`,
    `input_tokens_details`); the input count already includes the cached tokens."""
    if usage is None:
        return Usage()
    return Usage(
        input_tokens=token_count(usage, input_field),
        output_tokens=token_count(usage, output_field),
        cached_input_tokens=token_count(getattr(usage, details_field, None), "cached_tokens"),
    )
