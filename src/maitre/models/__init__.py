"""Models behind one protocol. Provider adapters import their SDK only when constructed."""

from .anthropic import AnthropicModel
from .base import Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage
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
    "StopReason",
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
