"""Stage 7, approval: a human decision bound to the exact arguments.

When the policy says "needs approval", the gate persists an `ApprovalRequest` bound to
sha256(tool, canonical arguments, principal, run) (`h2:...`, see `hashing`), with an expiry, and
answers APPROVAL_REQUIRED.
The call executes only when it comes back with the approval's id *and* its hash matches what was
approved; the approval is consumed atomically, so it works once. Arguments an approver edited get
a new hash, are validated again, and are what executes. A denial's message goes back to the model.

The LangGraph failure mode (a resumed node re-asks the model, which emits different arguments,
and the approval is consumed by position) cannot happen here: different arguments are a different
hash, and a different hash is a new approval request.

An approval created before the hash format changed (a bare-hex version-1 hash) is still matched,
by its own version's hash of the call, so a call approved before an upgrade runs after it, once.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
import warnings
from typing import Any

from ..audit.canonical import hash_text
from ..exceptions import UserError
from ..policy import PolicyDecision, normalise_user
from ..stores import ApprovalRequest, ApprovalStateError, ApprovalStatus, ApprovalStore, AuditEntry
from ..types import ApprovalTicket, ErrorCode, Principal, TaintSource, ToolError
from . import personal
from .authorize import validated_arguments
from .base import CallContext, Decision
from .hashing import call_hash_of, is_legacy_call_hash, legacy_call_hash, validated_text
from .idempotency import will_replay
from .validate import validate_arguments

__all__ = ["ApprovalService", "approval", "call_hash", "decision_entry", "ticket"]


def call_hash(tool: str, arguments: dict[str, Any], principal: Principal, run_id: str | None) -> str:
    """The hash an approval is bound to (the user is as authenticated, not normalised: the hash
    binds the exact principal the gate was given). `arguments` are JSON-ready validated arguments."""
    return call_hash_of(tool, hash_text(arguments), principal, run_id)


def decision_entry(request: ApprovalRequest, account: str) -> AuditEntry:
    """The audit line of a person's decision on `request`, as every door records it (the command
    line, the console): who decided (`account`, the authenticated identity; the request keeps the
    recorded label, e.g. `maria (via=console)`), on which request, bound to the hash it approved."""
    verb = "approved" if request.status == "approved" else "denied"
    edited = " with edited arguments" if request.edited_arguments is not None else ""
    return AuditEntry(
        at=time.time(),
        user=account,
        tenant=request.tenant,
        tool=request.tool,
        decision="approval_decided",
        call_hash=request.approved_hash or request.call_hash,
        approval_id=request.id,
        detail=f"{verb} by {request.approver}{edited}",
    )


def _in_scheme_of(stored: str | None, hashed: str, ctx: CallContext, tool: str) -> str:
    """This call's hash in the version of `stored`: `hashed` itself, or for an approval written
    before the version change, the call's version-1 hash (computed only then)."""
    if not is_legacy_call_hash(stored):
        return hashed
    return legacy_call_hash(tool, validated_arguments(ctx), ctx.principal, _run_scope(ctx))


def _hash(ctx: CallContext) -> str:
    """This call's hash; for a personal tool keyed (`personal.keyed_call_hash`), since the plain one
    is a hash of guessable values that the approvals table and the audit log would keep."""
    assert ctx.tool is not None
    hashed = call_hash_of(ctx.tool.name, validated_text(ctx), ctx.principal, _run_scope(ctx))
    return personal.keyed_call_hash(ctx.gate.stores, hashed) if ctx.tool.personal else hashed


def _run_scope(ctx: CallContext) -> str | None:
    """The run an approval is bound to; None for a standalone call (no run id)."""
    return None if ctx.run.ephemeral else ctx.run.run_id


def _foreign(request: ApprovalRequest, ctx: CallContext, tool: str) -> bool:
    """An approval of another tenant, user or tool is, for this caller, one that does not exist."""
    return (
        request.tenant != ctx.principal.tenant
        or normalise_user(request.user) != normalise_user(ctx.principal.user)
        or request.tool != tool
    )


async def approval(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    approval_id = ctx.options.approval_id
    if ctx.decision is not Decision.APPROVAL_REQUIRED:
        return None  # policy allowed it; an approval id, if any, is left unused (no exemption)
    if tool.personal:  # its keys first: without a master secret no request is stored
        refused = await personal.prepare(ctx)
        if refused is not None:
            return refused
    arguments = validated_arguments(ctx)
    hashed = _hash(ctx)
    ctx.call_hash = hashed
    store = ctx.gate.stores.approvals
    now = time.time()
    if await will_replay(ctx):  # a stored result (within its dedupe window) will replay: no one need approve
        # The idempotency stage will replay the stored result; nothing executes. A repeated call
        # is exempt from the loop guard only under the genuine approval of this exact call.
        if ctx.loop_refusal is not None and approval_id:
            request = await store.get(approval_id, now=now)
            if (
                request is not None
                and not _foreign(request, ctx, tool.name)
                and request.call_hash == _in_scheme_of(request.call_hash, hashed, ctx, tool.name)
                and request.status in ("approved", "used")
            ):
                ctx.approval_id = request.id
                ctx.loop_refusal = None
        return None
    if not approval_id:
        return await _request(ctx, hashed, arguments, now)
    request = await store.get(approval_id, now=now)
    if request is None or _foreign(request, ctx, tool.name):
        ctx.decision = Decision.APPROVAL_INVALID
        return ToolError(
            ErrorCode.INVALID_STATE,
            "That approval does not exist for this call. Call the tool again without an approval id to "
            "ask for a new approval.",
        )
    ctx.approval_id = request.id
    matched = _in_scheme_of(request.call_hash, hashed, ctx, tool.name)
    if request.call_hash != matched:
        ctx.decision = Decision.APPROVAL_MISMATCH
        if ctx.loop_refusal is not None:
            return ctx.loop_refusal  # a repeated call does not get to open new requests
        if request.run_id != _run_scope(ctx):
            # An approval is for one run. Said as it is (not "other arguments", which would send a
            # model changing its arguments), and no new request: replaying an id from run to run
            # must not fill the approvers' queue.
            return ToolError(
                ErrorCode.INVALID_STATE,
                f"The approval {request.id} was given in another run and does not carry over to this "
                "one. Call the tool again without an approval id to ask for approval here.",
                details={"approval_id": request.id, "reason": "other_run"},
            )
        return await _request(
            ctx, hashed, arguments, now, note="the earlier approval covers different arguments"
        )
    if request.status == "pending":
        return _required(ctx, request, "It is still waiting for a human decision.")
    if request.status == "denied":
        ctx.decision = Decision.APPROVAL_DENIED
        message = request.message or "no reason given"
        return ToolError(
            ErrorCode.APPROVAL_DENIED,
            f"A human denied this call to {tool.name}: {message}. Do not retry it; adjust your plan or ask "
            "the user.",
            details={"approval_id": request.id, "approver": request.approver},
        )
    if request.status in ("expired", "used"):
        ctx.decision = Decision(f"approval_{request.status}")
        return ToolError(
            ErrorCode.INVALID_STATE,
            f"The approval {request.id} is {request.status}; it cannot be used again. Call the tool again "
            "without an approval id to ask for a new approval.",
            details={"approval_id": request.id, "status": request.status},
        )
    # approved: execute exactly what was approved (the edited arguments, if any)
    execute_hash = matched
    if request.edited_arguments is not None:
        validated, invalid = validate_arguments(tool, request.edited_arguments)
        if invalid is not None:  # edits are validated when approved; the tool may have changed since
            return invalid
        # Everything derived from the arguments is derived again from the edited ones.
        ctx.validated = validated
        ctx.validated_json = ctx.canonical_validated = None
        ctx.idempotency_key = ctx.idempotency_basis = None
        edited_hash = _hash(ctx)
        execute_hash = _in_scheme_of(request.approved_hash or request.call_hash, edited_hash, ctx, tool.name)
    if not await store.consume(request.id, call_hash=execute_hash, now=time.time()):
        ctx.decision = Decision.APPROVAL_REFUSED
        return ToolError(
            ErrorCode.INVALID_STATE,
            f"The approval {request.id} cannot be used for this call (already used, expired or for other "
            "arguments). Call the tool again without an approval id to ask for a new approval.",
            details={"approval_id": request.id},
        )
    ctx.decision = Decision.APPROVED
    ctx.call_hash = execute_hash
    ctx.loop_refusal = None  # verified and consumed: the approved call coming back is the same call
    return None


async def _request(
    ctx: CallContext, hashed: str, arguments: dict[str, Any], now: float, note: str | None = None
) -> ToolError:
    tool = ctx.tool
    assert tool is not None
    policy = ctx.policy
    reason = (policy.reason if policy is not None else "") or "policy requires approval"
    run = ctx.run
    request = ApprovalRequest(
        id="apr_" + secrets.token_urlsafe(16),
        tool=tool.name,
        arguments=arguments,
        call_hash=hashed,
        user=ctx.principal.user,
        tenant=ctx.principal.tenant,
        run_id=_run_scope(ctx),
        reason=reason + (f" ({note})" if note else ""),
        created_at=now,
        expires_at=now + ctx.gate.approval_ttl_s,
        rule=policy.rule if policy is not None else "",
        taint=_taint_of(run.taint_source if run.tainted else None, policy),
        effect=tool.effect.value,
        risk=tool.risk.value,
        personal=tool.personal,
    )
    await ctx.gate.stores.approvals.create(request)
    ctx.approval_id = request.id
    if ctx.decision is not Decision.APPROVAL_MISMATCH:
        ctx.decision = Decision.APPROVAL_REQUIRED
    return _required(ctx, request, "A human has been asked to approve it.")


def _taint_of(source: TaintSource | None, policy: PolicyDecision | None) -> TaintSource | None:
    """The run's taint source, naming the untraced argument paths when data-flow taint asked."""
    if source is None or policy is None or not policy.untraced:
        return source
    return dataclasses.replace(source, untraced=policy.untraced)


def ticket(ctx: CallContext, request: ApprovalRequest) -> ApprovalTicket:
    """The typed ticket a door reads from an APPROVAL_REQUIRED result, told by the stored request.

    Its rule is the one stored with the request, and its taint the request's taint source when that
    rule is `taint` (the ticket names taint only when it is why). A request stored before the rule
    was kept falls back to this call's policy decision and run.
    """
    if request.rule:
        rule, taint = request.rule, request.taint
    else:
        policy = ctx.policy
        rule, taint = (policy.rule if policy is not None else ""), ctx.run.taint_source
    return ApprovalTicket(
        approval_id=request.id,
        tool=request.tool,
        arguments=request.arguments,
        call_hash=request.call_hash,
        rule=rule,
        reason=request.reason,
        expires_at=request.expires_at,
        principal=ctx.principal,
        run_id=request.run_id,
        taint=taint if rule == "taint" else None,
    )


def _required(ctx: CallContext, request: ApprovalRequest, status: str) -> ToolError:
    ctx.ticket = ticket(ctx, request)
    return ToolError(
        ErrorCode.APPROVAL_REQUIRED,
        f"{request.tool} needs a human approval before it runs ({request.reason}). {status} Do not call it "
        "again with other arguments to get around this; wait for the decision.",
        details={
            "approval_id": request.id,
            "call_hash": request.call_hash,
            "expires_at": request.expires_at,
            "tool": request.tool,
            "arguments": request.arguments,
        },
    )


class ApprovalService:
    """Decide approval requests: `gate.approvals.approve(...)` / `.deny(...)` / `.list()`."""

    def __init__(self, gate: Any) -> None:
        self._gate = gate

    @property
    def _store(self) -> ApprovalStore:
        store: ApprovalStore = self._gate.stores.approvals
        return store

    async def list(
        self, *, status: ApprovalStatus | None = "pending", tenant: str | None = None
    ) -> list[ApprovalRequest]:
        return await self._store.list(status=status, tenant=tenant, now=time.time())

    async def get(self, approval_id: str) -> ApprovalRequest | None:
        return await self._store.get(approval_id, now=time.time())

    async def approve(
        self,
        approval_id: str,
        approver: Principal | str,
        edited_arguments: dict[str, Any] | None = None,
        *,
        note: str | None = None,
        edited_args: dict[str, Any] | None = None,
    ) -> ApprovalRequest:
        """Approve a pending request, optionally with edited arguments (validated, newly hashed).

        `edited_arguments` is the name the stored request uses; the old keyword `edited_args` still
        works and warns (DeprecationWarning). Raises `UserError` when the approver may not decide it
        (self-approval, another tenant, a missing role) or the edited arguments are invalid, and
        `ApprovalStateError` when the request is not pending any more.
        """
        if edited_args is not None:
            warnings.warn(
                "approve(edited_args=...) is deprecated; pass edited_arguments=...",
                DeprecationWarning,
                stacklevel=2,
            )
            if edited_arguments is not None:
                raise UserError("approve() got both edited_arguments= and its deprecated name edited_args=")
            edited_arguments = edited_args
        edited_args = edited_arguments
        request = await self._decidable(approval_id, approver)
        approved_hash = None
        if edited_args is not None:
            tool = self._gate.find_tool(request.tool)
            if tool is None:
                raise UserError(
                    f"the tool {request.tool!r} is not in this gate's toolbox; cannot validate edits"
                )
            validated, invalid = validate_arguments(tool, edited_args)
            if invalid is not None:
                raise UserError(invalid.message)
            if tool.input_model is not None:
                edited_args = validated.model_dump(mode="json")
            principal = Principal(user=request.user, tenant=request.tenant)
            approved_hash = call_hash(request.tool, edited_args, principal, request.run_id)
            if tool.personal:
                approved_hash = personal.keyed_call_hash(self._gate.stores, approved_hash)
        return await self._store.decide(
            approval_id,
            approve=True,
            approver=_name(approver),
            message=note,
            edited_arguments=edited_args,
            approved_hash=approved_hash,
            now=time.time(),
        )

    async def deny(self, approval_id: str, approver: Principal | str, message: str) -> ApprovalRequest:
        """Deny a pending request; `message` is what the model will read."""
        await self._decidable(approval_id, approver)
        return await self._store.decide(
            approval_id, approve=False, approver=_name(approver), message=message, now=time.time()
        )

    async def _decidable(self, approval_id: str, approver: Principal | str) -> ApprovalRequest:
        request = await self._store.get(approval_id, now=time.time())
        if request is None:
            raise ApprovalStateError(
                f"no approval request {approval_id}", approval_id=approval_id, status=None
            )
        why = self._gate.policy.may_approve(approver, request.user, request.tenant)
        if why:
            raise UserError(f"{_name(approver)} cannot decide {approval_id}: {why}")
        return request


def _name(approver: Principal | str) -> str:
    return approver.user if isinstance(approver, Principal) else str(approver)
