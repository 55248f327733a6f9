"""Models behind one protocol. Provider adapters import their SDK only when constructed.

Layer: a door. Adapters import the core (`maitre.messages`, `maitre.types`, `maitre.tools`) and
never the agent loop, which imports them; see `maitre` for the layer rules.
"""

import warnings
from typing import Any

from .anthropic import AnthropicModel
from .base import FinishReason, Model, ModelError, ModelRequest, ModelResponse, Usage
from .openai import OpenAIChatModel, OpenAIResponsesModel
from .openai_compat import OpenAICompatibleModel, recover_tool_calls
from .pricing import FREE, Price, PriceTable, cost_usd, price_for, register_price
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
    "AnthropicModel",
    "FREE",
    "FinishReason",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "OpenAICompatibleModel",
    "OpenAIResponsesModel",
    "Price",
    "PriceTable",
    "Rule",
    "ScriptedModel",
    "Usage",
    "after_tool",
    "always",
    "call",
    "cost_usd",
    "last_tool_result",
    "last_user_says",
    "price_for",
    "recover_tool_calls",
    "register_price",
    "tool_error",
]


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
