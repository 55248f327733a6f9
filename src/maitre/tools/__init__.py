"""Typed tools: functions become strict JSON-Schema tools in a `Toolbox`.

Layer: core. Tools import only the core's data types and helpers, never a door (`agent`, `models`,
`mcp`, `memory`, `search`, `cli`); the one exception is `Toolbox.from_mcp`, which imports the MCP
door inside the method when called. See `maitre` for the layer rules.
"""

from .export import ExportFormat, ToolDefinitions, mcp_annotations, provider_name
from .tool import CONTEXT_TYPES, DEFAULT_MAX_RESULT_TOKENS, DEFAULT_TIMEOUT_S, OwnershipCheck, Tool
from .toolbox import Listener, Toolbox

__all__ = [
    "CONTEXT_TYPES",
    "DEFAULT_MAX_RESULT_TOKENS",
    "DEFAULT_TIMEOUT_S",
    "ExportFormat",
    "Listener",
    "OwnershipCheck",
    "Tool",
    "ToolDefinitions",
    "Toolbox",
    "mcp_annotations",
    "provider_name",
]
