"""A console decision: the signed-in account decides through the gate's own `ApprovalService`.

The account is the identity (authenticated by its password), recorded as `alice (via=console)`,
the way the command line records `alice (via=cli)`. The bare account name is checked against the
policy first, so the `(via=console)` label can never make a self-approval pass; the console also
requires its own `approver` role of the account's tenant. A request of another tenant is, for this
person, one that does not exist. Every decision is appended to the audit chain (`approval_decided`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..exceptions import UserError
from ..stores import ApprovalRequest, ApprovalStateError, AuditEntry
from ..types import Principal

if TYPE_CHECKING:
    from ..gate import Gate
    from .accounts import Account

__all__ = ["APPROVER_ROLE", "ConsoleApprover", "Refused", "decide", "visible_request", "why_undecidable"]

APPROVER_ROLE = "approver"
"""The account role the console requires to decide anything."""


class Refused(Exception):
    """A decision the console will not make; `status` is the HTTP status of the page that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ConsoleApprover:
    """The signed-in person as the approval service sees them."""

    account: Account

    @property
    def label(self) -> str:
        return f"{self.account.name} (via=console)"

    def principal(self) -> Principal:
        return Principal(user=self.label, tenant=self.account.tenant, roles=self.account.roles)

    def bare(self) -> Principal:
        return Principal(user=self.account.name, tenant=self.account.tenant, roles=self.account.roles)


async def visible_request(gate: Gate, account: Account, approval_id: str) -> ApprovalRequest | None:
    """The request if it exists *in the account's tenant*; None otherwise (another tenant's is absent)."""
    request = await gate.approvals.get(approval_id)
    if request is None or request.tenant != account.tenant:
        return None
    return request


def why_undecidable(request: ApprovalRequest) -> Refused | None:
    """A request that is no longer pending: 410 once expired, 409 once decided or used."""
    if request.status == "pending":
        return None
    if request.status == "expired":
        return Refused(
            410, f"This request expired at {_when(request.expires_at)}; it can no longer be decided."
        )
    verb = {"approved": "already approved", "denied": "already denied", "used": "already approved and used"}
    decided = verb.get(request.status, request.status)
    by = f" by {request.approver}" if request.approver else ""
    return Refused(409, f"This request was {decided}{by}; it cannot be decided again.")


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ts))


async def decide(
    gate: Gate, account: Account, approval_id: str, *, approve: bool, message: str | None
) -> ApprovalRequest:
    """Approve or deny `approval_id` as `account`; raises `Refused` with the page's status."""
    request = await visible_request(gate, account, approval_id)
    if request is None:
        raise Refused(404, "No such approval request.")
    if APPROVER_ROLE not in account.roles:
        raise Refused(403, f"Your account needs the {APPROVER_ROLE!r} role to decide requests.")
    stale = why_undecidable(request)
    if stale is not None:
        raise stale
    who = ConsoleApprover(account)
    why = gate.policy.may_approve(who.bare(), request.user, request.tenant)
    if why:
        raise Refused(403, f"You cannot decide this request: {why}.")
    message = (message or "").strip() or None
    try:
        if approve:
            decided = await gate.approvals.approve(approval_id, who.principal(), note=message)
        else:
            if message is None:
                raise Refused(400, "A denial needs a message: the model reads it to adjust its plan.")
            decided = await gate.approvals.deny(approval_id, who.principal(), message)
    except ApprovalStateError:
        fresh = await gate.approvals.get(approval_id)
        raise (fresh and why_undecidable(fresh)) or Refused(
            409, "This request cannot be decided now."
        ) from None
    except UserError as exc:
        raise Refused(403, f"You cannot decide this request: {exc}") from None
    await gate.stores.audit.append(_decision_entry(decided, account.name))
    return decided


def _decision_entry(request: ApprovalRequest, account: str) -> AuditEntry:
    verb = "approved" if request.status == "approved" else "denied"
    return AuditEntry(
        at=time.time(),
        user=account,
        tenant=request.tenant,
        tool=request.tool,
        decision="approval_decided",
        call_hash=request.approved_hash or request.call_hash,
        approval_id=request.id,
        detail=f"{verb} by {request.approver}",
    )
