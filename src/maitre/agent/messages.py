"""Provider-neutral conversation messages.

The loop keeps the conversation in these types and each model adapter translates them to and from
its provider's wire format. They are plain data (`to_dict` / `from_dict`) so a paused run can be
stored and resumed in another process.

Tool results carry their trust label and provenance. Adapters must present untrusted results as
data: `render_tool_result` wraps them in a fence the content cannot close or forge (a boundary id
and escaped look-alike tags, see `maitre.fence`) with a note that the content is not an
instruction (seed 002: "a tool result is untrusted input").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..fence import fence_untrusted
from ..types import ToolCall, Trust

__all__ = [
    "AssistantMessage",
    "Message",
    "ToolResultMessage",
    "UserMessage",
    "message_from_dict",
    "render_tool_result",
]


@dataclass(kw_only=True)
class UserMessage:
    """What the user (or the host, on the user's behalf) said."""

    content: str
    role: Literal["user"] = "user"

    def to_dict(self) -> dict[str, Any]:
        return {"role": "user", "content": self.content}


@dataclass(kw_only=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    provider_state: list[dict[str, Any]] | None = None
    """Opaque provider blocks to send back with this turn (thinking / reasoning items)."""
    role: Literal["assistant"] = "assistant"

    def to_dict(self) -> dict[str, Any]:
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
    name: str
    content: str
    is_error: bool = False
    trust: Trust = Trust.TRUSTED
    source: str = "local"
    """Where the content came from (provenance): `local`, `mcp:<server>`, `gate`."""
    error_code: str | None = None
    role: Literal["tool"] = "tool"

    def to_dict(self) -> dict[str, Any]:
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


def message_from_dict(data: dict[str, Any]) -> Message:
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
