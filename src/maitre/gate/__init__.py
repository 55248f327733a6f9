"""The gate: every proposed tool call passes one pipeline and comes back as a ToolResult.

Layer: core. The gate imports `maitre.tools`, `maitre.stores`, `maitre.audit`, `maitre.policy` and
the core's data types, never a door (`agent`, `models`, `mcp`, `memory`, `search`, `cli`): the
doors bring calls to it. See `maitre` for the layer rules.
"""

from .base import ApplicableStage, CallContext, CallOptions, Decision, GateLimits, SettlingStage, Stage
from .pipeline import DEFAULT_STAGES, Gate, Recorder

__all__ = [
    "ApplicableStage",
    "CallContext",
    "CallOptions",
    "DEFAULT_STAGES",
    "Decision",
    "Gate",
    "GateLimits",
    "Recorder",
    "SettlingStage",
    "Stage",
]
