"""Per-run state that the gate keeps and that tools may ask for.

A tool that declares a parameter annotated `RunContext` receives the current run (its id, the
principal, the notes scratchpad, ...). The gate keeps its own counters here too: how often each
call fingerprint was seen (loop guard), invalid calls per tool (retry budget), the current error
streak, per-tool and per-class budgets, and whether untrusted content has entered the run (taint).

The state is plain data so a paused run can be serialised and resumed in another process.
"""

from __future__ import annotations

import secrets
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .dataflow import Provenance
from .types import Principal, TaintSource

__all__ = ["IdempotencyKey", "NeedsInput", "RunContext", "new_run_id"]


class IdempotencyKey(str):
    """The key the runtime minted for this write call (seed 003: never written by the model).

    A write tool that declares a parameter annotated `IdempotencyKey` receives it, to pass on to a
    downstream API that deduplicates (a payment provider, an order service).
    """


class NeedsInput(dict[str, Any]):
    """A tool's return value meaning "ask the caller first; I have done nothing yet".

    A door that can ask (the MCP server's multi-round-trip `input_required`) returns one from a
    tool; the gate then releases the call's idempotency key instead of storing this as the
    result, so the caller's next round - with the answers - executes rather than replaying the
    question.
    """


def new_run_id() -> str:
    return "run_" + secrets.token_hex(8)


@dataclass(kw_only=True)
class RunContext:
    """One run of an agent (or one logical session of calls) as the gate sees it."""

    run_id: str = field(default_factory=new_run_id)
    """Stable id; part of every minted idempotency key and approval hash."""
    principal: Principal | None = None
    """Who the run acts for (set by the host)."""
    fingerprints: Counter[str] = field(default_factory=Counter)
    """How many times each (tool, canonical arguments) fingerprint was proposed."""
    invalid_calls: Counter[str] = field(default_factory=Counter)
    """Invalid calls per tool, for the per-tool retry budget."""
    tool_calls: Counter[str] = field(default_factory=Counter)
    """Executed calls per tool, for per-tool budgets."""
    class_calls: Counter[str] = field(default_factory=Counter)
    """Executed calls per effect class (read / write / destructive), for per-class budgets."""
    error_streak: tuple[str, int] = ("", 0)
    """The signature of the last error and how many times in a row it occurred."""
    tainted: bool = False
    """True once the run has seen untrusted content."""
    taint_source: TaintSource | None = None
    """The first untrusted result that entered the run (shown to approvers)."""
    provenance: Provenance | None = None
    """The run's trusted text (the user's request, the system prompt, trusted results), when the
    door saw the request: the agent loop seeds it, the gate adds trusted results, and the default
    policy then gates a tainted run's calls on where their values came from (`maitre.dataflow`).
    None at doors that never see the request (MCP, gateway): the whole-run taint rule applies."""
    ephemeral: bool = False
    """True for the throwaway run of a call made outside any run (no run id): approvals bind to
    the principal and arguments only, and taint follows the principal for a window instead."""
    visible_tools: set[str] | None = None
    """When set, only these tools (canonical names) can be called in this run (tool search)."""
    notes: list[str] = field(default_factory=list)
    """Working memory: the run's scratchpad (write_notes / read_notes)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Room for hosts and doors to keep their own serialisable state."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "principal": self.principal.to_dict() if self.principal else None,
            "fingerprints": dict(self.fingerprints),
            "invalid_calls": dict(self.invalid_calls),
            "tool_calls": dict(self.tool_calls),
            "class_calls": dict(self.class_calls),
            "error_streak": list(self.error_streak),
            "tainted": self.tainted,
            "taint_source": self.taint_source.to_dict() if self.taint_source else None,
            "provenance": self.provenance.to_dict() if self.provenance is not None else None,
            "ephemeral": self.ephemeral,
            "visible_tools": sorted(self.visible_tools) if self.visible_tools is not None else None,
            "notes": list(self.notes),
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunContext:
        principal = data.get("principal")
        visible = data.get("visible_tools")
        taint_source = data.get("taint_source")
        provenance = data.get("provenance")
        streak = data.get("error_streak") or ("", 0)
        return cls(
            run_id=data["run_id"],
            principal=Principal.from_dict(principal) if principal else None,
            fingerprints=Counter(data.get("fingerprints", {})),
            invalid_calls=Counter(data.get("invalid_calls", {})),
            tool_calls=Counter(data.get("tool_calls", {})),
            class_calls=Counter(data.get("class_calls", {})),
            error_streak=(streak[0], int(streak[1])),
            tainted=bool(data.get("tainted", False)),
            taint_source=TaintSource.from_dict(taint_source) if taint_source else None,
            provenance=Provenance.from_dict(provenance) if provenance else None,
            ephemeral=bool(data.get("ephemeral", False)),
            visible_tools=set(visible) if visible is not None else None,
            notes=list(data.get("notes", [])),
            extra=dict(data.get("extra", {})),
        )
