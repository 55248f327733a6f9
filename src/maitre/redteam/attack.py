"""What a plugin is handed: the target, its first listing, and one way to send a request that
records everything observable about it (the reply, the side channel's lines, the canaries seen).

Every plugin decides its outcome through `Attack.outcome`, so one rule holds everywhere:
`leaked` when a canary came back; `executed` when the side channel recorded the tool acting or
the target answered with a result (not an error, not a replay); `blocked` otherwise.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import Principal
from .cases import Attempt, Outcome
from .effects import EffectLog
from .targets import Target

__all__ = ["Attack", "DEFAULT_CANARIES", "shown"]

DEFAULT_CANARIES = ("root:x:0:0", "BEGIN OPENSSH PRIVATE KEY", "BEGIN RSA PRIVATE KEY")
"""Signatures of files no tool should ever return: /etc/passwd and private keys."""
_SHOWN = 300


def shown(value: Any) -> Any:
    """`value` as a report shows it: a long string becomes its length and its start."""
    if isinstance(value, str) and len(value) > _SHOWN:
        return f"<{len(value)} characters: {value[:40]!r}...>"
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value


@dataclass(kw_only=True)
class Attack:
    """The red team's side of one target."""

    target: Target
    tools: list[dict[str, Any]]
    """The target's listing when the red team started (what a client would have pinned)."""
    effects: EffectLog | None = None
    canaries: Sequence[str] = ()
    """Texts that must never come back (`--secret`), besides the token and `DEFAULT_CANARIES`."""
    foreign_ids: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """`{parameter: ids of another tenant's resources}` (`--foreign-id`)."""
    principal: Principal = field(default_factory=lambda: Principal(user="redteam", tenant="local"))
    token: str = field(default_factory=lambda: f"rt-canary-{secrets.token_hex(12)}")
    """The bearer token the token-passthrough plugin sends: it must never come back."""
    _runs: itertools.count[int] = field(default_factory=itertools.count)

    def new_run(self, purpose: str) -> str:
        """A run id of its own for one attack (so attacks never share a loop guard or a taint)."""
        return f"redteam-{purpose}-{next(self._runs)}-{secrets.token_hex(3)}"

    def by_name(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tools if t.get("name") == name), None)

    async def send(
        self,
        tool: str,
        arguments: Any,
        *,
        run: str | None = None,
        approval_id: str | None = None,
        idempotency_key: str | None = None,
        token: str | None = None,
        principal: Principal | None = None,
    ) -> Attempt:
        """Send one request and record what came back and what the side channel saw."""
        mark = self.effects.mark() if self.effects is not None else 0
        reply = await self.target.call(
            tool,
            arguments,
            run=run,
            approval_id=approval_id,
            idempotency_key=idempotency_key,
            token=token,
            principal=principal,
        )
        effects = self.effects.since(mark) if self.effects is not None else []
        sent: dict[str, Any] = {}
        if run is not None:
            sent["run"] = run
        if approval_id is not None:
            sent["approval_id"] = approval_id
        if idempotency_key is not None:
            sent["idempotency_key"] = idempotency_key
        if token is not None:
            sent["bearer_token"] = token
        if principal is not None:
            sent["principal"] = principal.to_dict()
        watched = [*self.canaries, *DEFAULT_CANARIES, self.token]
        leaked = [c for c in watched if c and c in reply.text]
        if token is not None and any(token in str(e) for e in effects):
            leaked.append(f"{token} (in what the tool received)")
        return Attempt(
            tool=tool,
            arguments=shown(arguments),
            sent=sent,
            response=reply.text,
            is_error=reply.is_error,
            error_code=reply.error_code,
            approval_id=reply.approval_id,
            replayed=reply.replayed,
            trust=reply.trust,
            audit=reply.audit,
            effects=[shown(e) for e in effects],
            leaked=leaked,
        )

    def ran(self, attempt: Attempt) -> bool:
        """Whether the tool acted: the side channel saw it, or the reply was a result (not a replay).

        Either is enough. The side channel catches a tool that acted and then answered with an
        error; the reply covers a target that does not write to the side channel (an outside
        server). A server that answers "done" without acting is counted as executed: the red team
        errs towards reporting an attack as getting through.
        """
        return bool(attempt.effects) or (not attempt.is_error and not attempt.replayed)

    def outcome(self, attempts: Sequence[Attempt]) -> Outcome:
        """Leaked if any attempt leaked, executed if any ran, blocked otherwise."""
        if any(a.leaked for a in attempts):
            return "leaked"
        if any(self.ran(a) for a in attempts):
            return "executed"
        return "blocked"

    @property
    def measured_by(self) -> str:
        return (
            "the side channel and the replies"
            if self.effects is not None
            else "the replies (no side channel)"
        )
