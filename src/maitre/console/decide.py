"""A console decision: the signed-in account decides through the gate's own `ApprovalService`.

The account is the identity (authenticated by its password), recorded as `alice (via=console)`,
the way the command line records `alice (via=cli)`. The bare account name is checked against the
policy first, so the `(via=console)` label can never make a self-approval pass; the console also
requires its own `approver` role of the account's tenant. A request of another tenant is, for this
person, one that does not exist. Every decision is appended to the audit chain (`approval_decided`).

An approval with edited arguments goes through the gate's own validation twice: `check_edit`
validates the edit (the teaching error of an invalid one is an `InvalidEdit`, 422) and gives the
diff and the new call hash the person confirms; `decide(..., edited_arguments=...)` checks it again
and approves through `ApprovalService.approve`, which validates once more and binds the approval
to that hash. Without the tool (a console started without a toolbox) no edit is approved: an
unvalidated edit would run unchecked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..gate.approval import call_hash, decision_entry
from ..gate.validate import validate_arguments
from ..stores import ApprovalRequest, ApprovalStateError
from ..types import Principal, ToolError
from .forms import Change, diff_arguments

if TYPE_CHECKING:
    from ..gate import Gate
    from .accounts import Account

__all__ = [
    "APPROVER_ROLE",
    "ConsoleApprover",
    "EditCheck",
    "HASH_SHOWN",
    "InvalidEdit",
    "NO_TOOL",
    "Refused",
    "check_edit",
    "decidable",
    "decide",
    "visible_request",
    "why_undecidable",
]

APPROVER_ROLE = "approver"
"""The account role the console requires to decide anything."""
HASH_SHOWN = 15
"""How much of a call hash a page shows (`h2:` and 12 hex digits): enough to recognise, not the digest."""


class Refused(Exception):
    """A decision the console will not make; `status` is the HTTP status of the page that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class InvalidEdit(Refused):
    """Edited arguments the gate's validation refused (422); `error` is its teaching error."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(422, error.message)
        self.error = error


@dataclass(frozen=True)
class EditCheck:
    """Edited arguments the gate accepted: as they will run, their diff, the hash they bind to."""

    request: ApprovalRequest
    arguments: dict[str, Any]
    """The edit as the gate stores and executes it (validated, JSON-ready)."""
    call_hash: str
    """The hash the approval will be bound to."""
    changes: list[Change]
    """What differs from the model's arguments (empty: the edit changes nothing)."""

    @property
    def hash_shown(self) -> str:
        return self.call_hash[:HASH_SHOWN]


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


async def decidable(gate: Gate, account: Account, approval_id: str) -> ApprovalRequest:
    """The request if `account` may decide it now; raises `Refused` (404, 403, 409, 410) if not."""
    request = await visible_request(gate, account, approval_id)
    if request is None:
        raise Refused(404, "No such approval request.")
    if APPROVER_ROLE not in account.roles:
        raise Refused(403, f"Your account needs the {APPROVER_ROLE!r} role to decide requests.")
    stale = why_undecidable(request)
    if stale is not None:
        raise stale
    why = gate.policy.may_approve(ConsoleApprover(account).bare(), request.user, request.tenant)
    if why:
        raise Refused(403, f"You cannot decide this request: {why}.")
    return request


NO_TOOL = (
    "The console does not have the tool {tool!r} (it was started without it), so the gate cannot "
    "validate edited arguments; an edit is never approved unvalidated. Approve or deny the arguments "
    "as proposed, or open the console with the tool's toolbox."
)


async def check_edit(
    gate: Gate, account: Account, approval_id: str, edited_arguments: dict[str, Any]
) -> EditCheck:
    """Validate an edit as the gate will (raises `InvalidEdit` with the teaching error, or `Refused`)."""
    request = await decidable(gate, account, approval_id)
    tool = gate.find_tool(request.tool)
    if tool is None:
        raise Refused(422, NO_TOOL.format(tool=request.tool))
    validated, invalid = validate_arguments(tool, edited_arguments)
    if invalid is not None:
        raise InvalidEdit(invalid)
    arguments = validated.model_dump(mode="json") if tool.input_model is not None else edited_arguments
    # the same hash ApprovalService.approve binds the approval to
    hashed = call_hash(
        request.tool, arguments, Principal(user=request.user, tenant=request.tenant), request.run_id
    )
    return EditCheck(
        request=request,
        arguments=arguments,
        call_hash=hashed,
        changes=diff_arguments(request.arguments, arguments),
    )


async def decide(
    gate: Gate,
    account: Account,
    approval_id: str,
    *,
    approve: bool,
    message: str | None,
    edited_arguments: dict[str, Any] | None = None,
    confirmed_hash: str | None = None,
) -> ApprovalRequest:
    """Approve or deny `approval_id` as `account`; raises `Refused` with the page's status.

    `edited_arguments` approves those arguments instead (validated by the gate; an edit that
    changes nothing approves the proposed call). `confirmed_hash` is the hash prefix the person
    confirmed: if the edit no longer gives that hash, nothing is approved (409).
    """
    request = await decidable(gate, account, approval_id)
    edits: dict[str, Any] | None = None
    if edited_arguments is not None:
        if not approve:
            raise Refused(400, "Edited arguments go with an approval; a denial keeps the proposed call.")
        check = await check_edit(gate, account, approval_id, edited_arguments)
        if confirmed_hash is not None and not (
            len(confirmed_hash) >= HASH_SHOWN and check.call_hash.startswith(confirmed_hash)
        ):
            raise Refused(
                409, "These arguments no longer give the call you confirmed; review the edit again."
            )
        edits = check.arguments if check.changes else None
    who = ConsoleApprover(account)
    message = (message or "").strip() or None
    try:
        if approve:
            decided = await gate.approvals.approve(
                request.id, who.principal(), edited_arguments=edits, note=message
            )
        else:
            if message is None:
                raise Refused(400, "A denial needs a message: the model reads it to adjust its plan.")
            decided = await gate.approvals.deny(request.id, who.principal(), message)
    except ApprovalStateError:
        fresh = await gate.approvals.get(approval_id)
        raise (fresh and why_undecidable(fresh)) or Refused(
            409, "This request cannot be decided now."
        ) from None
    except UserError as exc:
        raise Refused(403, f"You cannot decide this request: {exc}") from None
    await gate.stores.audit.append(decision_entry(decided, account.name))
    return decided
