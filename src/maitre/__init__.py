"""maitre: a governed runtime between language models and the real world.

A model can only write text; a tool call is a proposal. maitre turns proposals into safe actions:
typed tools behind one gate (validation that teaches, loop guards, timeouts, bounded retries,
size caps, trust labels), and the rest of the runtime built on it.
"""

from .context import IdempotencyKey, RunContext
from .exceptions import DuplicateToolError, MaitreError, StoreError, ToolDefinitionError, UserError
from .gate import CallOptions, Decision, Gate, GateLimits
from .gate.budget import Budgets, RateLimit
from .policy import BasePolicy, DefaultPolicy, Policy, PolicyDecision
from .tools import Tool, Toolbox, ToolDefinitions
from .types import (
    ApprovalTicket,
    Effect,
    ErrorCode,
    Principal,
    Provenance,
    Risk,
    TaintSource,
    ToolCall,
    ToolError,
    ToolResult,
    Trust,
)

__version__ = "0.1.0"

__all__ = [
    "ApprovalTicket",
    "BasePolicy",
    "Budgets",
    "CallOptions",
    "Decision",
    "DefaultPolicy",
    "DuplicateToolError",
    "Effect",
    "ErrorCode",
    "Gate",
    "GateLimits",
    "IdempotencyKey",
    "MaitreError",
    "Policy",
    "PolicyDecision",
    "Principal",
    "Provenance",
    "RateLimit",
    "Risk",
    "RunContext",
    "StoreError",
    "TaintSource",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolDefinitions",
    "ToolError",
    "ToolResult",
    "Toolbox",
    "Trust",
    "UserError",
]
