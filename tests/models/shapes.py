"""Response bodies shaped like each provider's API reference, for the fake server to answer.

Anthropic: the Messages API `Message` object and its error envelope
(`{"type": "error", "error": {"type", "message"}}`). OpenAI: the `chat.completion` object, the
Responses API `response` object, and the `{"error": {...}}` envelope. Ollama, vLLM and llama.cpp
answer the chat completion shape (with their own ids and fingerprints).
"""

from __future__ import annotations

import json
from typing import Any

from .fakeserver import Reply

__all__ = [
    "anthropic_error",
    "anthropic_message",
    "anthropic_text",
    "anthropic_tool_use",
    "chat_completion",
    "chat_tool_call",
    "openai_error",
    "response_function_call",
    "response_message",
    "responses_response",
]


# -- Anthropic ------------------------------------------------------------------------------------


def anthropic_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "citations": None}


def anthropic_tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    model: str = "claude-sonnet-5-5-20260901",
    input_tokens: int = 2095,
    output_tokens: int = 503,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "stop_details": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
            "service_tier": "standard",
        },
    }


def anthropic_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    body = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    return Reply(status=status, body=body, headers=headers or {})


# -- OpenAI Chat Completions ------------------------------------------------------------------------


def chat_tool_call(id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": text}}


def chat_completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str = "stop",
    refusal: str | None = None,
    model: str = "gpt-5.5-2026-04-23",
    prompt_tokens: int = 1117,
    completion_tokens: int = 46,
    cached_tokens: int = 0,
    system_fingerprint: str = "fp_0c3b5f5a0b",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal, "annotations": []}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": system_fingerprint,
    }


def openai_error(
    status: int, kind: str, code: str | None, message: str, headers: dict[str, str] | None = None
) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(status=status, body=body, headers=headers or {})


# -- OpenAI Responses -------------------------------------------------------------------------------


def response_message(text: str, *, refusal: bool = False) -> dict[str, Any]:
    part = (
        {"type": "refusal", "refusal": text}
        if refusal
        else {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    )
    return {
        "type": "message",
        "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c2ea5e1a",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def response_function_call(
    call_id: str, name: str, arguments: dict[str, Any] | str, *, id: str = "fc_12345xyz"
) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "type": "function_call",
        "id": id,
        "call_id": call_id,
        "name": name,
        "arguments": text,
        "status": "completed",
    }


def responses_response(
    output: list[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
    model: str = "gpt-5.5-2026-04-23",
    input_tokens: int = 328,
    output_tokens: int = 52,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "id": "resp_67ccd3a9da748190baa7f1570fe91ac604becb25c2ea5e1a",
        "object": "response",
        "created_at": 1741476777,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
        "user": None,
        "metadata": {},
    }
