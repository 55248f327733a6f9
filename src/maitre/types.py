"""The data that crosses the gate: what a model proposes and what it gets back.

These types are pure and serialisable. Every door of maitre (agent loop, MCP server, memory tools,
tool search) speaks them, so nothing here imports anything else of ours.

Static tool metadata (`Effect`, `Risk`, `Trust`) is declared by the developer, never by the model.
`ErrorCode` values are `StrEnum` members, so `error.code == "INVALID_ARGUMENTS"` holds.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ApprovalTicket",
    "Effect",
    "ErrorCode",
    "Principal",
    "Provenance",
    "Risk",
    "TaintSource",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Trust",
]


class Effect(StrEnum):
    """What a tool does to the world."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class Risk(StrEnum):
    """How bad a wrong call would be (seed 003's risk matrix)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class Trust(StrEnum):
    """Whether a tool's output may be read as instructions. Untrusted output is data only."""

    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"


class ErrorCode(StrEnum):
    """Machine-readable error codes (seed 003). Compare them with plain strings."""

    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    NOT_FOUND = "NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    APPROVAL_DENIED = "APPROVAL_DENIED"
    INPUT_REQUIRED = "INPUT_REQUIRED"
    """Someone must answer a question first (an upstream MCP server asked for input the host did not
    give: an elicitation, a sampling request, its roots); not retryable as it is."""
    AUTH_REQUIRED = "AUTH_REQUIRED"
    """Someone must sign in first: an upstream MCP server needs a person's sign-in
    (`maitre mcp login NAME`), or the caller's own token is missing or was refused where it is
    exchanged for the upstream's; not retryable as it is."""
    INVALID_STATE = "INVALID_STATE"
    CONFLICT = "CONFLICT"
    RATE_LIMITED = "RATE_LIMITED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    TIMEOUT = "TIMEOUT"
    TEMPORARY_UNAVAILABLE = "TEMPORARY_UNAVAILABLE"
    LOOP_DETECTED = "LOOP_DETECTED"
    INTERNAL = "INTERNAL"


# Seed 003: the runtime reads `retryable` for backoff and `user_fixable` to ask the user.
_DEFAULT_FLAGS: dict[ErrorCode, tuple[bool, bool]] = {
    ErrorCode.UNKNOWN_TOOL: (False, False),
    ErrorCode.INVALID_ARGUMENTS: (False, True),
    ErrorCode.NOT_FOUND: (False, True),
    ErrorCode.PERMISSION_DENIED: (False, False),
    ErrorCode.APPROVAL_REQUIRED: (False, False),
    ErrorCode.APPROVAL_DENIED: (False, True),
    ErrorCode.INPUT_REQUIRED: (False, True),
    ErrorCode.AUTH_REQUIRED: (False, True),
    ErrorCode.INVALID_STATE: (False, False),
    ErrorCode.CONFLICT: (True, False),
    ErrorCode.RATE_LIMITED: (True, False),
    ErrorCode.BUDGET_EXCEEDED: (False, False),
    ErrorCode.TIMEOUT: (True, False),
    ErrorCode.TEMPORARY_UNAVAILABLE: (True, False),
    ErrorCode.LOOP_DETECTED: (False, False),
    ErrorCode.INTERNAL: (False, False),
}


class ToolError(Exception):
    """A structured error the model can act on.

    Tools raise it to report a business failure (`raise ToolError("NOT_FOUND", "No order A1042")`);
    the gate returns it inside a `ToolResult` for every failure of its own. It is never raised out
    of the gate.

    `retryable` and `user_fixable` default from the code (PERMISSION_DENIED is never retryable,
    TIMEOUT is, ...); a tool may override them, except that PERMISSION_DENIED stays non-retryable.
    """

    code: ErrorCode
    message: str
    retryable: bool
    user_fixable: bool
    details: dict[str, Any]
    missing_fields: list[str]
    suggestions: list[str]
    retry_after_s: float | None

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool | None = None,
        user_fixable: bool | None = None,
        details: dict[str, Any] | None = None,
        missing_fields: list[str] | None = None,
        suggestions: list[str] | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        default_retryable, default_fixable = _DEFAULT_FLAGS[self.code]
        self.message = message
        self.retryable = default_retryable if retryable is None else retryable
        if self.code is ErrorCode.PERMISSION_DENIED:
            self.retryable = False
        self.user_fixable = default_fixable if user_fixable is None else user_fixable
        self.details = details or {}
        self.missing_fields = missing_fields or []
        self.suggestions = suggestions or []
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, Any]:
        """The structured envelope, as JSON-ready data (empty fields left out)."""
        data: dict[str, Any] = {
            "code": str(self.code),
            "message": self.message,
            "retryable": self.retryable,
            "user_fixable": self.user_fixable,
        }
        if self.details:
            data["details"] = self.details
        if self.missing_fields:
            data["missing_fields"] = self.missing_fields
        if self.suggestions:
            data["suggestions"] = self.suggestions
        if self.retry_after_s is not None:
            data["retry_after_s"] = self.retry_after_s
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolError:
        return cls(
            data["code"],
            data["message"],
            retryable=data.get("retryable"),
            user_fixable=data.get("user_fixable"),
            details=data.get("details"),
            missing_fields=data.get("missing_fields"),
            suggestions=data.get("suggestions"),
            retry_after_s=data.get("retry_after_s"),
        )

    def __repr__(self) -> str:
        return f"ToolError({str(self.code)!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolError):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = Exception.__hash__


@dataclass(kw_only=True)
class ToolCall:
    """A call as the model proposed it."""

    id: str
    """The id the model gave the call; results are matched back by it."""
    name: str
    """The tool name as written by the model (canonical or provider-mapped)."""
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """Arguments as received: a dict, or JSON text that may be broken."""
    run_id: str | None = None
    """The run this call belongs to, when the caller has one."""


@dataclass(kw_only=True, frozen=True)
class Principal:
    """Who is asking. Set by the host or the authenticated transport, never by the model."""

    user: str
    """The end user the call acts for."""
    tenant: str = "default"
    """Isolation boundary: nothing crosses tenants."""
    scopes: frozenset[str] = frozenset()
    """Permissions granted to this principal (compared with a tool's required scopes)."""
    roles: frozenset[str] = frozenset()
    """Roles, for policies that reason about them (for example `approver`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", frozenset(self.scopes))
        object.__setattr__(self, "roles", frozenset(self.roles))

    def to_dict(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "tenant": self.tenant,
            "scopes": sorted(self.scopes),
            "roles": sorted(self.roles),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Principal:
        return cls(
            user=data["user"],
            tenant=data.get("tenant", "default"),
            scopes=frozenset(data.get("scopes", ())),
            roles=frozenset(data.get("roles", ())),
        )


@dataclass(kw_only=True)
class Provenance:
    """Where a result came from, so the reader can judge it."""

    tool: str
    """Canonical name of the tool that produced the result."""
    call_id: str
    """The call the result answers."""
    source: str = "local"
    """`local` for a Python function, `mcp:<server>` for an imported tool, `gate` for gate errors."""
    run_id: str | None = None
    at: float = field(default_factory=time.time)
    """Unix time the result was produced."""


@dataclass(kw_only=True, frozen=True)
class TaintSource:
    """The untrusted result that tainted a run: what a reviewer needs to judge the risk."""

    tool: str
    """Canonical name of the untrusted tool whose output entered the run."""
    call_id: str
    """The call that returned it."""
    at: float
    """Unix time it was returned."""
    untraced: tuple[str, ...] = ()
    """On an approval asked by data-flow taint: the paths of the call's argument values that could
    not be traced to the user's request or trusted results (`maitre.dataflow`), for the approver
    to check first. Empty for the whole-run rule."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tool": self.tool, "call_id": self.call_id, "at": self.at}
        if self.untraced:
            data["untraced"] = list(self.untraced)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaintSource:
        untraced = data.get("untraced") or ()
        return cls(
            tool=str(data["tool"]),
            call_id=str(data["call_id"]),
            at=float(data["at"]),
            untraced=tuple(str(path) for path in untraced),
        )


@dataclass(kw_only=True, frozen=True)
class ApprovalTicket:
    """A call that waits for a human, as every door (agent loop, MCP server, console) reads it.

    It rides on the APPROVAL_REQUIRED `ToolResult` (`result.approval`), so no door parses
    `error.details`. The call executes only when it comes back with `approval_id` after a person
    other than the requester approved exactly these arguments (`call_hash`).
    """

    approval_id: str
    """Pass it back (`CallOptions(approval_id=...)`) once a person decided."""
    tool: str
    """Canonical name of the tool."""
    arguments: dict[str, Any]
    """The validated arguments the approver sees and approves."""
    call_hash: str
    """sha256 over (tool, canonical arguments, principal, run): what the approval is bound to."""
    rule: str
    """The policy rule that asked (`risk-matrix`, `taint`, `tool`, ...)."""
    reason: str
    """Why, in words, for the approver."""
    expires_at: float
    """Unix time after which the request can no longer be decided or used."""
    principal: Principal
    """Who asked (the principal the call acts for)."""
    run_id: str | None = None
    """The run the approval is bound to; None for a call outside any run."""
    taint: TaintSource | None = None
    """When the reason is taint: which untrusted result, from which tool, caused it."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "approval_id": self.approval_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "call_hash": self.call_hash,
            "rule": self.rule,
            "reason": self.reason,
            "expires_at": self.expires_at,
            "principal": self.principal.to_dict(),
            "run_id": self.run_id,
            "taint": self.taint.to_dict() if self.taint else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalTicket:
        taint = data.get("taint")
        return cls(
            approval_id=data["approval_id"],
            tool=data["tool"],
            arguments=dict(data.get("arguments") or {}),
            call_hash=data["call_hash"],
            rule=data.get("rule", ""),
            reason=data.get("reason", ""),
            expires_at=float(data["expires_at"]),
            principal=Principal.from_dict(data["principal"]),
            run_id=data.get("run_id"),
            taint=TaintSource.from_dict(taint) if taint else None,
        )


@dataclass(kw_only=True)
class ToolResult:
    """What goes back to the model. The gate always returns one; it never raises."""

    call_id: str
    """The id of the call this answers."""
    name: str
    """The tool name as the model wrote it."""
    is_error: bool
    content: str
    """Text for the model: concise JSON for data, the teaching message for errors."""
    structured: Any = None
    """The JSON-ready value behind `content` (None for errors)."""
    error: ToolError | None = None
    trust: Trust = Trust.TRUSTED
    provenance: Provenance | None = None
    replayed: bool = False
    """True when an idempotency key replayed a stored result instead of executing."""
    handle: str | None = None
    """Set when the content was cut: the rest is paged with `read_result(handle, page)`."""
    usage: dict[str, Any] = field(default_factory=dict)
    """Measurements: `tokens` of content, `duration_ms`, `attempts`, ..."""
    approval: ApprovalTicket | None = None
    """Set on an APPROVAL_REQUIRED result: the request a human must decide."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for logs, MCP structured errors and the demo's JSON lines)."""
        return {
            "call_id": self.call_id,
            "name": self.name,
            "is_error": self.is_error,
            "content": self.content,
            "structured": self.structured,
            "error": self.error.to_dict() if self.error else None,
            "trust": str(self.trust),
            "provenance": asdict(self.provenance) if self.provenance else None,
            "replayed": self.replayed,
            "handle": self.handle,
            "usage": dict(self.usage),
            "approval": self.approval.to_dict() if self.approval else None,
        }
