"""What one attack case found: its outcome (`blocked`, `executed`, `leaked`) and the evidence.

The outcome is measured, never assumed: `executed` means the side channel saw the tool act, or
the target answered the attack with a result (not an error, not a replay);
`leaked` means a canary - a secret the target must not give out, the red team's own token, a
credential file's signature - came back in what the target returned; `blocked` means neither.
`leaked` outranks `executed`: a leak is worse than an execution.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Attempt", "Case", "OUTCOMES", "Outcome", "worst"]

Outcome = Literal["blocked", "executed", "leaked"]
OUTCOMES: tuple[Outcome, ...] = ("blocked", "executed", "leaked")
_RANK = {"blocked": 0, "executed": 1, "leaked": 2}


def worst(outcomes: list[Outcome]) -> Outcome:
    """The worst of several outcomes (`blocked` when there are none)."""
    return max(outcomes, key=_RANK.__getitem__, default="blocked")


@dataclass(kw_only=True)
class Attempt:
    """One request the red team sent, and everything it could observe about it."""

    tool: str
    arguments: Any
    """What was sent (an oversized string is shown by its length, not in full)."""
    sent: dict[str, Any] = field(default_factory=dict)
    """What else travelled with it: an approval id, an idempotency key, a bearer token, a run."""
    response: str = ""
    """The text the target returned, cut to a readable length."""
    is_error: bool = False
    error_code: str | None = None
    """The gate's (or a maitre server's) error code, when it said one."""
    approval_id: str | None = None
    """The approval request the target opened, when it asked for one."""
    replayed: bool = False
    trust: str | None = None
    audit: dict[str, Any] | None = None
    """The gate's audit entry for this request (decision, error code, seq), when it could be read."""
    effects: list[dict[str, Any]] = field(default_factory=list)
    """What the side channel recorded while this request ran (empty: nothing executed)."""
    leaked: list[str] = field(default_factory=list)
    """Which canaries appeared in the response."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True)
class Case:
    """One attack against one target: its verdict, why, and the attempts behind it."""

    plugin: str
    id: str
    """Unique within a report: `plugin/what`."""
    title: str
    outcome: Outcome
    why: str
    """How the outcome was decided, in a sentence a reviewer can check against the attempts."""
    should_block: bool = True
    """Whether a gate should stop this attack (all of the shipped ones say yes)."""
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """The attack got through where a gate should have stopped it."""
        return self.should_block and self.outcome != "blocked"

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "id": self.id,
            "title": self.title,
            "outcome": self.outcome,
            "why": self.why,
            "should_block": self.should_block,
            "attempts": [a.to_dict() for a in self.attempts],
        }
