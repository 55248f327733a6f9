"""Provider-neutral conversation messages: the one vocabulary the loop and the model adapters share.

The agent loop keeps the conversation in these types and each model adapter translates them to and
from its provider's wire format. They live in the core (not in `maitre.agent`) so that the adapters
in `maitre.models` and the loop both point inward at them instead of at each other. They are plain
data (`to_dict` / `message_from_dict`) so a paused run can be stored and resumed in another process.
`maitre.agent.messages` re-exports every name here.

Tool results carry their trust label and provenance. Adapters must present untrusted results as
data: `render_tool_result` wraps them in a fence the content cannot close or forge (a boundary id
and escaped look-alike tags, see `maitre.fence`) with a note that the content is not an
instruction (seed 002: "a tool result is untrusted input").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .fence import fence_untrusted
from .tokens import count_tokens
from .types import ToolCall, Trust

__all__ = [
    "AssistantMessage",
    "Message",
    "ToolResultMessage",
    "UserMessage",
    "conversation_tokens",
    "message_from_dict",
    "message_tokens",
    "render_tool_result",
]


@dataclass(kw_only=True)
class UserMessage:
    """What the user (or the host, on the user's behalf) said."""

    content: str
    """The text."""
    role: Literal["user"] = "user"
    """Always `user` (the discriminator `message_from_dict` reads)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; `message_from_dict` reads it back."""
        return {"role": "user", "content": self.content}


@dataclass(kw_only=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both."""

    text: str = ""
    """The model's text (may be empty when it only calls tools)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """The calls it proposed, with canonical tool names."""
    provider_state: list[dict[str, Any]] | None = None
    """Opaque provider blocks to send back with this turn (thinking / reasoning items)."""
    role: Literal["assistant"] = "assistant"
    """Always `assistant`."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; `message_from_dict` reads it back."""
        data: dict[str, Any] = {
            "role": "assistant",
            "text": self.text,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments, "run_id": c.run_id}
                for c in self.tool_calls
            ],
        }
        if self.provider_state:
            data["provider_state"] = self.provider_state
        return data


@dataclass(kw_only=True)
class ToolResultMessage:
    """The gate's answer to one tool call, matched to it by `call_id`."""

    call_id: str
    """The id of the `ToolCall` this answers."""
    name: str
    """The tool's canonical name."""
    content: str
    """The result (or error) text, unfenced: `render_tool_result` fences it for a model."""
    is_error: bool = False
    """True when the call failed or was refused."""
    trust: Trust = Trust.TRUSTED
    """The trust label the gate put on the result."""
    source: str = "local"
    """Where the content came from (provenance): `local`, `mcp:<server>`, `gate`."""
    error_code: str | None = None
    """The `ErrorCode` value when `is_error`."""
    role: Literal["tool"] = "tool"
    """Always `tool`."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; `message_from_dict` reads it back."""
        return {
            "role": "tool",
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
            "trust": str(self.trust),
            "source": self.source,
            "error_code": self.error_code,
        }


Message = UserMessage | AssistantMessage | ToolResultMessage
"""One turn of a conversation, as the loop keeps it and an adapter translates it."""


def message_from_dict(data: dict[str, Any]) -> Message:
    """The message `to_dict` wrote (raises `ValueError` for an unknown role)."""
    role = data.get("role")
    if role == "user":
        return UserMessage(content=data["content"])
    if role == "assistant":
        calls = [
            ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments", {}), run_id=c.get("run_id"))
            for c in data.get("tool_calls", [])
        ]
        return AssistantMessage(
            text=data.get("text", ""), tool_calls=calls, provider_state=data.get("provider_state")
        )
    if role == "tool":
        return ToolResultMessage(
            call_id=data["call_id"],
            name=data["name"],
            content=data["content"],
            is_error=bool(data.get("is_error")),
            trust=Trust(data.get("trust", "trusted")),
            source=data.get("source", "local"),
            error_code=data.get("error_code"),
        )
    raise ValueError(f"unknown message role {role!r}")


def render_tool_result(message: ToolResultMessage) -> str:
    """The text a model reads for a tool result.

    Untrusted content is fenced off as data (`maitre.fence.fence_untrusted`): a result, and also an
    error the untrusted tool raised itself, since its message is the tool's text. The gate's own
    errors are trusted (source `gate`) and stay plain teaching text. The label is the one the gate
    put on the result: the renderer fences whatever is marked untrusted, whatever its source.
    """
    if message.trust is Trust.TRUSTED:
        return message.content
    return fence_untrusted(message.content, tool=message.name, source=message.source)


def message_tokens(message: Message) -> int:
    """Tokens of one message as a model reads it, counted once.

    Messages do not change after they are created (trimming replaces a message with a new one), so
    the count is kept on the message.
    """
    cached = message.__dict__.get("_tokens")
    if cached is not None:
        return int(cached)
    if isinstance(message, UserMessage):
        count = count_tokens(message.content)
    elif isinstance(message, AssistantMessage):
        count = count_tokens(message.text) + sum(
            count_tokens(str(c.arguments)) + 8 for c in message.tool_calls
        )
    else:
        count = count_tokens(render_tool_result(message))
    message.__dict__["_tokens"] = count
    return count


def conversation_tokens(messages: list[Message]) -> int:
    """Tokens of a conversation (the sum of `message_tokens`)."""
    return sum(message_tokens(m) for m in messages)
