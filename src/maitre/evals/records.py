"""What one trial of one case produced: the calls as the model proposed them and what the gate did.

These records are the seam between the runner (which fills them from a `Run` and the gate's
captured calls) and the matching and metrics modules (which read nothing else), so cases can be
scored - and tested - without running an agent at all. They are plain, JSON-ready dataclasses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CallRecord", "Check", "RUNTIME_TOOLS", "RouteRecord", "TrialRecord", "tool_matches"]

RUNTIME_TOOLS = frozenset({"write_notes", "read_notes", "search_tools", "read_result"})
"""Tools maitre itself gives a run (working notes, tool search, paging a cut result). They count as
calls for efficiency and reliability, but not as a tool *choice* for selection precision and
recall - unless a case names one in `expected_tools` or `forbidden_tools`."""


def tool_matches(name: str, wanted: str) -> bool:
    """`name` is `wanted`, or ends with `.wanted` (`shop.get_order` matches `get_order`)."""
    return name == wanted or name.endswith("." + wanted)


@dataclass(kw_only=True)
class CallRecord:
    """One tool call the model proposed, with its final outcome at the gate."""

    call_id: str
    tool: str
    """The canonical name the gate resolved it to (the name as written when it is unknown)."""
    arguments: dict[str, Any] | None
    """The arguments as the model wrote them, parsed; None when they were not a JSON object."""
    step: int
    """The model step (1-based) that proposed it."""
    known: bool = True
    """False when the gate found no such tool."""
    schema_valid: bool = True
    """The arguments passed the gate's validation (False for INVALID_ARGUMENTS, broken JSON, an
    unknown tool)."""
    decision: str = "allow"
    """What governance decided last, as the audit log records it (`allow`, `approval_required`,
    `refused`, `error`, `replayed`, ...)."""
    executed: bool = False
    """The tool's code ran (or an idempotency key replayed a stored result)."""
    error_code: str | None = None
    """The final result's error code; None for a success or a call still waiting for approval."""
    approval_requested: bool = False
    """The gate asked a person to approve this call."""
    replayed: bool = False
    attempts: int = 0
    """How many times the gate ran the tool (retries of a retryable error included)."""

    @property
    def retries(self) -> int:
        return max(0, self.attempts - 1)


@dataclass(kw_only=True)
class Check:
    """One expectation of a case, against one trial."""

    name: str
    """`selection`, `order`, `arguments`, `forbidden`, `max_tool_calls`, `stop_reason`, `approval`,
    `constraints`, `route`."""
    ok: bool
    detail: str = ""
    """What was expected and what happened, in words (shown in the reports)."""


@dataclass(kw_only=True)
class RouteRecord:
    """What the router decided for a case that sets `expected_route`, and what that cost."""

    expected: str
    chosen: str
    cost: float
    """`cost[expected][chosen]` under the cost matrix the evaluation scored with."""
    under_call: bool = False
    """Fewer calls than needed (CONTEXT for RETRIEVE or ACT, RETRIEVE for ACT): a wrong answer."""
    over_call: bool = False
    """More calls than needed: wasted latency and money, the answer still right."""
    probabilities: dict[str, float] = field(default_factory=dict)
    """The router's probability of each route (empty for a router without any, such as keywords)."""
    reason: str = ""


@dataclass(kw_only=True)
class TrialRecord:
    """One run of one case."""

    case_id: str
    trial: int
    """0-based."""
    run_id: str = ""
    status: str = ""
    stop_reason: str | None = None
    final_text: str = ""
    steps: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    error: str | None = None
    """Set when the trial could not run at all (the agent factory raised): the trial fails."""
    checks: list[Check] = field(default_factory=list)
    """Filled by `maitre.evals.matching.check_trial` (and `route` for a routed case)."""
    route: RouteRecord | None = None
    """The router's decision, for a case that sets `expected_route`."""
    ran_agent: bool = True
    """An agent ran this trial (False for a routing case: no calls, steps or tokens to count)."""

    @property
    def passed(self) -> bool:
        return self.error is None and all(check.ok for check in self.checks)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRecord:
        fields = {k: v for k, v in data.items() if k not in ("passed", "calls", "checks", "route")}
        route = data.get("route")
        return cls(
            **fields,
            calls=[CallRecord(**c) for c in data.get("calls", [])],
            checks=[Check(**c) for c in data.get("checks", [])],
            route=RouteRecord(**route) if isinstance(route, dict) else None,
        )
