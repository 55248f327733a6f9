"""The typed seam between a door and the gate, and the per-call record the stages share.

A door (agent loop, MCP server, memory tools, ...) hands the gate a `ToolCall`, the verified
`Principal` and `CallOptions`; it reads back a `ToolResult` (with an `ApprovalTicket` when a human
must decide). Nothing travels through string-keyed dicts: an option the gate does not know is a
type error, not a silently ignored key.

A stage is an async callable that looks at (and may fill in) a `CallContext` and returns a
`ToolError` to stop the call, or None to let it continue. A stage object may also define
`settle(ctx, result)`, called after shaping (idempotency completes its key there, budgets charge).
The gate runs its stages in order; the shaping and recording steps always run, so every call -
refused or executed - yields exactly one `ToolResult` and one record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..context import RunContext
from ..tools import Tool
from ..types import ApprovalTicket, Principal, ToolCall, ToolError, ToolResult

if TYPE_CHECKING:
    from ..policy import PolicyDecision
    from .pipeline import Gate

__all__ = [
    "ApplicableStage",
    "CallContext",
    "CallOptions",
    "Decision",
    "GateLimits",
    "SettlingStage",
    "Stage",
]


@dataclass(kw_only=True, frozen=True)
class CallOptions:
    """What a door (never the model) may tell the gate about one call, besides who is asking.

    Every field is optional; `CallOptions()` is a plain call. The run a call belongs to travels as
    `ToolCall.run_id` (or the `run` argument of `Gate.call`).
    """

    approval_id: str | None = None
    """An approval the caller says covers this call. It is only a claim: the gate executes under
    it only after checking it is this principal's, for this exact call, decided and unused - and
    consumes it. Until then it changes nothing (no loop-guard exemption, no policy bypass)."""
    idempotency_key: str | None = None
    """A key chosen by the host application for this logical operation (for example one per user
    click). It replaces the minted key's basis: the same host key with the same tool and principal
    replays the first result. The model never supplies it; the gate still scopes it by tenant,
    user and tool, so one principal's key cannot reach another's result."""
    deadline_s: float | None = None
    """At most this many seconds for the tool to run (the tool's own timeout still applies,
    whichever is shorter)."""


class Decision(StrEnum):
    """What governance decided for one call, as recorded in the audit log."""

    ALLOW = "allow"
    DENY = "deny"
    APPROVAL_REQUIRED = "approval_required"
    APPROVED = "approved"
    APPROVAL_INVALID = "approval_invalid"
    APPROVAL_MISMATCH = "approval_mismatch"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_USED = "approval_used"
    APPROVAL_REFUSED = "approval_refused"
    REPLAYED = "replayed"
    CONFLICT = "conflict"
    UNCERTAIN = "uncertain"
    RATE_LIMITED = "rate_limited"
    BUDGET_EXCEEDED = "budget_exceeded"
    ERROR = "error"
    """Allowed, executed, and the tool failed."""
    REFUSED = "refused"
    """Allowed by policy, but a stage refused it before it ran (validation, loop guard, ...)."""


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
    dedupe_window_s: float = 600.0
    """A runless write (no run id, no host key, no business key) retried with the same arguments
    by the same principal within this window replays instead of executing again; after it, a
    completed record no longer blocks a new execution."""
    taint_window_s: float = 3600.0
    """After a call outside any run (no run id) reads untrusted content, its principal's later
    runless calls count as tainted for this long (0 turns it off). Without it a client could shed
    taint by leaving the run id out."""


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
    arguments_json: str | None = None
    """The JSON text validation reads for arguments that came as a dict (set by decode)."""
    canonical_arguments: str | None = None
    """RFC 8785 text of the decoded arguments: what the loop guard's fingerprint is taken over."""
    fingerprint: str | None = None
    """The loop guard's hash of (tool, canonical arguments)."""
    validated: Any = None
    """The validated arguments (a pydantic model instance, or the dict for schema tools)."""
    validated_json: dict[str, Any] | None = None
    """The validated arguments as JSON-ready data (what policies, hashes and approvers see)."""
    canonical_validated: str | None = None
    """RFC 8785 text of `validated_json`, computed once when a hash needs it (`validated_text`):
    the call hash, the idempotency key and the audit digest are all taken over it."""
    decision: Decision = Decision.ALLOW
    """What governance decided (recorded in the audit log)."""
    policy: PolicyDecision | None = None
    """The policy's answer, with the rule that fired (set by authorize)."""
    detail: str | None = None
    """Audit-only detail (the real rule behind a denial, a tool-search reveal, ...)."""
    options: CallOptions = field(default_factory=CallOptions)
    """What the door said about this call."""
    approval_id: str | None = None
    """The approval this call asked for or executed under."""
    call_hash: str | None = None
    """The hash an approval is bound to (tool, canonical arguments, principal, run)."""
    ticket: ApprovalTicket | None = None
    """Set when the call waits for a human: returned on the result as `result.approval`."""
    loop_refusal: ToolError | None = None
    """A LOOP_DETECTED error held back until the approval stage has checked whether a verified,
    consumed approval covers the call (only that exempts a repeated call)."""
    idempotency_key: str | None = None
    """The key this call's write runs under (minted once per call, see `idempotency.mint_key`)."""
    idempotency_basis: str | None = None
    """What the key was minted from: `host`, `business_key`, `run` or `arguments`."""
    owns_key: bool = False
    completion: str | None = None
    """The stored-result JSON of the key this call owns, left for the audit recorder to complete
    in its own append transaction (set by `idempotency.settle` only when the stores allow it)."""
    """True when this call claimed its idempotency key and must settle it."""
    replay: dict[str, Any] | None = None
    """The stored result an idempotency key replays instead of executing."""
    output: Any = None
    executed: bool = False
    tool_raised: bool = False
    """True when the error came from the tool itself (its own ToolError): its text is the tool's,
    labelled with the tool's trust (an untrusted tool's error is fenced like its results)."""
    replayed: bool = False
    attempts: int = 0
    error: ToolError | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Room for stages a host adds; the gate's own stages use the typed fields above."""


@runtime_checkable
class Stage(Protocol):
    """**Protocol:** `async stage(ctx) -> ToolError | None` - return an error to stop the call.

    Plain async functions are stages.
    """

    def __call__(self, ctx: CallContext, /) -> Awaitable[ToolError | None]: ...


@runtime_checkable
class ApplicableStage(Stage, Protocol):
    """**Protocol:** a stage that says, once per tool, whether it can act on that tool's calls.

    The gate builds a plan per tool (`maitre.gate.plan`); a stage whose `applies(tool, gate)` is
    False is not in it, so it costs nothing on that tool's calls. Asked again when the toolbox,
    the policy, the budgets or the stages change. A stage without `applies` is in every plan.
    """

    def applies(self, tool: Tool, gate: Gate, /) -> bool: ...


@runtime_checkable
class SettlingStage(Stage, Protocol):
    """**Protocol:** a stage that also settles after the result is shaped (idempotency, budgets)."""

    def settle(self, ctx: CallContext, result: ToolResult, /) -> Awaitable[None]: ...
