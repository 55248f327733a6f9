"""The stage contract and the per-call record the stages share.

A stage is an async callable that looks at (and may fill in) a `CallContext` and returns a
`ToolError` to stop the call, or None to let it continue. The gate runs its stages in order; the
shaping and recording steps always run, so every call - refused or executed - yields exactly one
`ToolResult` and one record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ..context import RunContext
from ..tools import Tool
from ..types import Principal, ToolCall, ToolError

if TYPE_CHECKING:
    from .pipeline import Gate

__all__ = ["CallContext", "GateLimits", "Stage"]


@dataclass(kw_only=True)
class GateLimits:
    """The gate's guard rails. Every default is finite."""

    max_argument_bytes: int = 256 * 1024
    """Arguments larger than this (as JSON text) are refused before parsing."""
    invalid_calls_per_tool: int = 3
    """Invalid calls of one tool in one run before the model is told to stop retrying it."""
    repeat_limit: int = 3
    """The same (tool, canonical arguments) this many times in a run is a loop."""
    error_repeat_limit: int = 3
    """The same error this many times in a row is a loop."""
    retry_backoff_s: float = 0.1
    """First retry delay; doubles each attempt, with full jitter."""
    retry_backoff_cap_s: float = 2.0
    """Largest single retry delay."""
    page_tokens: int | None = None
    """Tokens per page of a cut result (default: the tool's own max_result_tokens)."""
    handle_ttl_s: float = 3600.0
    """How long the rest of a cut result stays readable."""


@dataclass(kw_only=True, eq=False)
class CallContext:
    """Everything known about one call as it moves through the stages."""

    gate: Gate
    call: ToolCall
    principal: Principal
    run: RunContext
    started: float = field(default_factory=time.perf_counter)
    tool: Tool | None = None
    """Set by resolve."""
    arguments: dict[str, Any] | None = None
    """Parsed JSON arguments (set by decode)."""
    canonical_arguments: str | None = None
    """Canonical JSON of the arguments: what fingerprints and hashes are computed over."""
    fingerprint: str | None = None
    validated: Any = None
    """The validated arguments (a pydantic model instance, or the dict for schema tools)."""
    decision: str = "allow"
    """What governance decided: allow, deny, approval_required, approved, replayed, ..."""
    approval_id: str | None = None
    idempotency_key: str | None = None
    output: Any = None
    executed: bool = False
    replayed: bool = False
    attempts: int = 0
    error: ToolError | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Stage: TypeAlias = Callable[[CallContext], Awaitable[ToolError | None]]
"""**Protocol:** `async stage(ctx) -> ToolError | None` - return an error to stop the call."""
