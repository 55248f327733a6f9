"""The gate: every proposed tool call passes one pipeline and comes back as a ToolResult."""

from .base import CallContext, CallOptions, Decision, GateLimits, SettlingStage, Stage
from .pipeline import DEFAULT_STAGES, Gate, Recorder

__all__ = [
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
