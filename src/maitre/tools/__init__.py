"""Typed tools: functions become strict JSON-Schema tools in a `Toolbox`."""

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
