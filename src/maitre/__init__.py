"""maitre: a governed runtime between language models and the real world.

A model can only write text; a tool call is a proposal. maitre turns proposals into safe actions:
typed tools behind one gate (validation that teaches, loop guards, timeouts, bounded retries,
size caps, trust labels), and the rest of the runtime built on it.

The core names below are imported eagerly. The doors' main names - `Agent` (the agent loop),
`ScriptedModel`, `MCPApp` (which needs the `mcp` extra) and `Router` (CONTEXT / RETRIEVE / ACT,
seed 002) - are loaded on first attribute access,
so `import maitre` stays the gate and its data types: it never imports the MCP SDK, and the core
never depends on a door. `maitre.testing` holds the test doubles (`TestModel`, `capture_calls`,
an in-memory MCP client).

Layers (arrows point inward; `tests/test_layers.py` fails on one that points outward):

- The core: `maitre.types`, `maitre.messages` (the provider-neutral conversation), `maitre.fence`,
  `maitre.exceptions`, `maitre.context`, `maitre.policy`, `maitre.jsonutil`, `maitre.tokens`,
  `maitre.embeddings`, `maitre.tools`, `maitre.gate`, `maitre.stores` / `maitre.storage`,
  `maitre.audit`, `maitre.config` (the `maitre.toml` file), `maitre.tracing` (OpenTelemetry GenAI
  spans), `maitre.progress`, and the private helpers `maitre._extras` (which `pip install` a
  missing extra needs) and `maitre._sync` (`Gate.call_sync`, `Agent.run_sync`). The core never imports a door; inside it `maitre.audit` sits below the stores,
  which import it to seal entries.
- The doors: `maitre.agent`, `maitre.models`, `maitre.mcp`, `maitre.memory`, `maitre.search`,
  `maitre.routing`, `maitre.evals` (`maitre eval`), `maitre.testing`, `maitre.demo` and `maitre.cli`. A door imports the core, and another door only
  through its public names. The model adapters sit below the loop (`maitre.models` never imports
  `maitre.agent`), and `maitre.cli` is the outermost: nothing imports it.
- One documented exception: `Toolbox.from_mcp` imports `maitre.mcp.client` inside the method,
  when it is called, so importing the core still loads no door.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .agent import Agent
    from .mcp.app import MCPApp
    from .models import ScriptedModel
    from .routing import Router

__version__ = "0.1.0"

__all__ = [
    "Agent",
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
    "MCPApp",
    "MaitreError",
    "Policy",
    "PolicyDecision",
    "Principal",
    "Provenance",
    "RateLimit",
    "Risk",
    "Router",
    "RunContext",
    "ScriptedModel",
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

_LAZY = {
    "Agent": "maitre.agent",
    "MCPApp": "maitre.mcp.app",
    "Router": "maitre.routing",
    "ScriptedModel": "maitre.models",
}
"""Names loaded on first use: a door, or a name that needs an optional extra."""
_EXTRAS = {"MCPApp": "mcp"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'maitre' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        if name not in _EXTRAS or (exc.name or "").startswith("maitre"):
            raise
        extra = _EXTRAS[name]
        raise ImportError(f"maitre.{name} needs the {extra} extra: pip install 'maitre[{extra}]'") from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
