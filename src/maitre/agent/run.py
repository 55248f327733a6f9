"""A run: the state of one agent task, serialisable so it can pause and resume in another process."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..context import RunContext
from ..messages import Message, message_from_dict
from ..models.base import Usage
from ..types import ApprovalTicket, Principal, ToolCall
from .limits import StopReason

__all__ = ["PendingCall", "Run", "RunStatus"]


def _message_json(message: Any) -> str:
    cached: str | None = message.__dict__.get("_json")
    if cached is None:
        cached = message.__dict__["_json"] = json.dumps(message.to_dict(), default=str)
    return cached


class RunStatus(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    """Waiting for a human decision; resume with `Agent.resume`."""
    FINISHED = "finished"
    """The model gave its answer."""
    STOPPED = "stopped"
    """A brake ended the run; `stop_reason` says which."""


@dataclass(kw_only=True)
class PendingCall:
    """A call the gate answered with APPROVAL_REQUIRED; it runs (once) when the run resumes."""

    call: ToolCall
    approval_id: str
    tool: str
    arguments: Any
    reason: str = ""
    ticket: ApprovalTicket | None = None
    """What the gate said about it: the rule that asked, who asked, expiry, the taint source."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "call": {"id": self.call.id, "name": self.call.name, "arguments": self.call.arguments},
            "approval_id": self.approval_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "reason": self.reason,
            "ticket": self.ticket.to_dict() if self.ticket else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingCall:
        c = data["call"]
        return cls(
            call=ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]),
            approval_id=data["approval_id"],
            tool=data["tool"],
            arguments=data["arguments"],
            reason=data.get("reason", ""),
            ticket=ApprovalTicket.from_dict(data["ticket"]) if data.get("ticket") else None,
        )


@dataclass(kw_only=True)
class Run:
    """What `Agent.run` and `Agent.resume` return. Never an exception: read `status` and `stop_reason`."""

    id: str
    principal: Principal
    status: RunStatus = RunStatus.RUNNING
    stop_reason: StopReason | None = None
    final_text: str = ""
    """The answer, or - when a brake stopped the run - what was found and why it stopped."""
    messages: list[Message] = field(default_factory=list)
    context: RunContext = field(default_factory=RunContext)
    """The gate's state for this run (loop guard, budgets, taint, notes)."""
    pending: list[PendingCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    steps: int = 0
    tool_calls: int = 0
    elapsed_s: float = 0.0
    """Active time so far (pauses do not count)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """What happened, in order (tool calls and results, approvals, pauses); JSON-ready."""
    tool_definition_tokens: int = 0
    """Tokens spent on tool definitions across all model calls of the run."""
    created_at: float = field(default_factory=time.time)

    @property
    def paused(self) -> bool:
        return self.status is RunStatus.PAUSED

    def to_json(self) -> str:
        """The whole run as JSON. Messages and events never change once added, so each is serialised
        once and kept: saving after every step costs the new messages, not the whole history."""
        head = json.dumps(
            {
                "id": self.id,
                "principal": self.principal.to_dict(),
                "status": str(self.status),
                "stop_reason": str(self.stop_reason) if self.stop_reason else None,
                "final_text": self.final_text,
                "context": self.context.to_dict(),
                "pending": [p.to_dict() for p in self.pending],
                "usage": self.usage.to_dict(),
                "cost_usd": self.cost_usd,
                "steps": self.steps,
                "tool_calls": self.tool_calls,
                "elapsed_s": self.elapsed_s,
                "tool_definition_tokens": self.tool_definition_tokens,
                "created_at": self.created_at,
            },
            default=str,
        )
        messages = ",".join(_message_json(m) for m in self.messages)
        cache: list[str] = self.__dict__.setdefault("_events_json", [])
        if len(cache) > len(self.events):
            cache.clear()
        cache.extend(json.dumps(e, default=str) for e in self.events[len(cache) :])
        return f'{head[:-1]},"messages":[{messages}],"events":[{",".join(cache)}]}}'

    @classmethod
    def from_json(cls, text: str) -> Run:
        data = json.loads(text)
        return cls(
            id=data["id"],
            principal=Principal.from_dict(data["principal"]),
            status=RunStatus(data["status"]),
            stop_reason=StopReason(data["stop_reason"]) if data.get("stop_reason") else None,
            final_text=data.get("final_text", ""),
            messages=[message_from_dict(m) for m in data.get("messages", [])],
            context=RunContext.from_dict(data["context"]),
            pending=[PendingCall.from_dict(p) for p in data.get("pending", [])],
            usage=Usage(**data.get("usage", {})),
            cost_usd=float(data.get("cost_usd", 0.0)),
            steps=int(data.get("steps", 0)),
            tool_calls=int(data.get("tool_calls", 0)),
            elapsed_s=float(data.get("elapsed_s", 0.0)),
            events=list(data.get("events", [])),
            tool_definition_tokens=int(data.get("tool_definition_tokens", 0)),
            created_at=float(data.get("created_at", time.time())),
        )
