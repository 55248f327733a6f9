"""The conversation messages, re-exported from their home in the core, `maitre.messages`.

They moved there so the model adapters (`maitre.models`) and the loop share them without importing
each other; this module keeps `from maitre.agent.messages import ...` working.
"""

from __future__ import annotations

from ..messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
    message_from_dict,
    render_tool_result,
)

__all__ = [
    "AssistantMessage",
    "Message",
    "ToolResultMessage",
    "UserMessage",
    "message_from_dict",
    "render_tool_result",
]
