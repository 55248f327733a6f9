"""The gate: every proposed tool call passes one pipeline and comes back as a ToolResult."""

from .base import CallContext, GateLimits, Stage
from .pipeline import DEFAULT_STAGES, Gate, Recorder

__all__ = ["DEFAULT_STAGES", "CallContext", "Gate", "GateLimits", "Recorder", "Stage"]
