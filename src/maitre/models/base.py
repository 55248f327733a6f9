"""The `Model` protocol: messages and tool definitions in; text, tool calls, usage and a stop reason out.

Every adapter (Anthropic, OpenAI Chat Completions and Responses, OpenAI-compatible local servers,
the scripted model) implements `complete`. Adapters translate the provider-neutral messages of
`maitre.messages` to their wire format, send the toolbox's definitions in the provider's
format (with provider-safe names, mapped back to canonical names in the returned calls), and never
raise for a model's content: only transport failures (after the SDK's own retries) raise
`ModelError`, which the agent loop turns into a stop reason.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..exceptions import MaitreError
from ..types import ToolCall

if TYPE_CHECKING:
    from ..messages import Message
    from ..tools import Tool

__all__ = ["FinishReason", "Model", "ModelError", "ModelRequest", "ModelResponse", "Usage"]

FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "error", "other"]
"""Why one model call ended, as the adapter normalised the provider's own reason.

Not why a *run* ended: that is `maitre.agent.StopReason`. This was called `StopReason` too; the old
name still imports from here and from `maitre.models`, with a `DeprecationWarning`.
"""


def __getattr__(name: str) -> Any:
    if name == "StopReason":
        warnings.warn(
            "maitre.models.StopReason is deprecated: it is the model call's FinishReason (a run's "
            "stop reason is maitre.agent.StopReason)",
            DeprecationWarning,
            stacklevel=2,
        )
        return FinishReason
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(kw_only=True)
class Usage:
    """Tokens one model call consumed, as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
        }


@dataclass(kw_only=True)
class ModelRequest:
    """One call to a model."""

    messages: list[Message]
    tools: list[Tool] = field(default_factory=list)
    """The tools the model may call in this step (already filtered by tool search, if any)."""
    system: str | None = None
    max_output_tokens: int = 4096


@dataclass(kw_only=True)
class ModelResponse:
    """What the model answered."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Calls with canonical tool names (adapters map provider-safe names back)."""
    usage: Usage = field(default_factory=Usage)
    stop_reason: FinishReason = "end_turn"
    model: str = ""
    """The model that answered (for pricing)."""
    raw: Any = None
    """The provider's response object, for debugging; never persisted."""
    provider_state: list[dict[str, Any]] | None = None
    """Opaque blocks the provider needs back with this turn (Anthropic thinking, OpenAI reasoning items);
    stored on the assistant message, so a run resumed in another process can still send them."""


class ModelError(MaitreError):
    """The model could not be reached or answered with an error after retries."""

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool = False, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.timed_out = timed_out
        """The request ran past the adapter's own time limit (the SDK's `timeout`), rather than failing."""


@runtime_checkable
class Model(Protocol):
    """**Protocol:** `async complete(request) -> ModelResponse`, plus a `name` for pricing and logs."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...
