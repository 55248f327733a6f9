"""Models behind one protocol. Provider adapters import their SDK only when constructed."""

from .base import Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage
from .scripted import (
    Rule,
    ScriptedModel,
    after_tool,
    always,
    call,
    last_tool_result,
    last_user_says,
    tool_error,
)

__all__ = [
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Rule",
    "ScriptedModel",
    "StopReason",
    "Usage",
    "after_tool",
    "always",
    "call",
    "last_tool_result",
    "last_user_says",
    "tool_error",
]
