"""Policy: the model proposes, policy decides (seeds 003 and 004).

A `Policy` looks at who asks (`Principal`), what tool (its static metadata), with which validated
arguments, in which run (taint), and answers allow, deny, or needs-approval. It is pure decision
logic with no I/O, so it is cheap to run on every call and easy to test.

`DefaultPolicy` reads seed 003's risk matrix from static metadata:

| effect      | low      | medium   | high     | critical |
|-------------|----------|----------|----------|----------|
| read        | allow    | allow    | approval | approval |
| write       | allow*   | allow*   | approval | approval |
| destructive | approval | approval | approval | approval |

(* writes are allowed because the runtime mints their idempotency keys.) A pair missing from a
custom matrix is denied. On top of the matrix: required scopes (PERMISSION_DENIED when missing),
`requires_approval=True/False` on a tool, and taint - once a run has seen untrusted content, a
write or destructive tool marked `open_world=True`, or a read marked `egress=True` (its arguments
leave: a fetch, a third-party query), needs approval, so an injected instruction can never send
the email, the money or the data on its own.

Taint comes in two modes (`DefaultPolicy(taint=...)`):

- `"data-flow"` (the default): when the run carries a `Provenance` (the agent loop seeds one with
  the user's request), such a call needs approval only when some argument value cannot be traced
  to the request or to trusted results (`maitre.dataflow`); the reason names those values' paths.
  A run without provenance (the MCP and gateway doors, which never see the request) falls back to
  the whole-run rule.
- `"run"`: the whole-run rule everywhere - after untrusted content, every such call asks.

Destructive tools need approval by the risk matrix either way.

A policy is anything with `decide(request)`. The other members of the `Policy` protocol -
`uses_arguments`, `static_decision(tool)`, `may_approve(...)` - have defaults in `BasePolicy`;
subclass it to override one of them, or pass a bare object with `decide` and the gate adapts it
(`as_policy`) with the defaults: arguments are serialised for it, nothing is cached, and the
approver must be another person of the same tenant.

Approvers are compared on normalised identity (`same_person`): user names case-folded and
Unicode-normalised (NFKC), within one tenant, so `ASHA` cannot approve `asha`'s request.
"""

from __future__ import annotations

import inspect
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .types import Effect, Principal, Risk

if TYPE_CHECKING:
    from .context import RunContext
    from .tools import Tool

__all__ = [
    "Action",
    "BasePolicy",
    "DEFAULT_RISK_MATRIX",
    "DefaultPolicy",
    "Policy",
    "PolicyDecision",
    "PolicyRequest",
    "TaintMode",
    "as_policy",
    "decide",
    "normalise_user",
    "same_person",
]


class Action(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    APPROVAL = "needs_approval"


@dataclass(kw_only=True, frozen=True)
class PolicyDecision:
    """What a policy answered, and why (the reason is shown to approvers and kept in the audit)."""

    action: Action
    reason: str = ""
    """Shown to the approver; for a denial, kept in the audit only (the model sees no detail)."""
    rule: str = ""
    """A short identifier of the rule that fired (`risk-matrix`, `scope`, `taint`, ...)."""
    untraced: tuple[str, ...] = ()
    """For a data-flow taint decision: the paths of the argument values that could not be traced
    to the user's request or trusted results (what the approver should check)."""

    @classmethod
    def allow(cls, reason: str = "", rule: str = "") -> PolicyDecision:
        return cls(action=Action.ALLOW, reason=reason, rule=rule)

    @classmethod
    def deny(cls, reason: str = "", rule: str = "") -> PolicyDecision:
        return cls(action=Action.DENY, reason=reason, rule=rule)

    @classmethod
    def needs_approval(cls, reason: str, rule: str = "", untraced: tuple[str, ...] = ()) -> PolicyDecision:
        return cls(action=Action.APPROVAL, reason=reason, rule=rule, untraced=tuple(untraced))


@dataclass(kw_only=True, frozen=True)
class PolicyRequest:
    """Everything a policy may look at."""

    tool: Tool
    arguments: dict[str, Any]
    """Validated arguments, as JSON-ready data."""
    principal: Principal
    run: RunContext


@runtime_checkable
class Policy(Protocol):
    """**Protocol:** what the gate asks a policy. `BasePolicy` supplies every member but `decide`."""

    uses_arguments: bool
    """Whether `decide` reads `request.arguments`; when False the gate skips serialising them."""

    def decide(self, request: PolicyRequest) -> Any:
        """Allow, deny or needs approval for one call (a `PolicyDecision`, or an awaitable of one)."""
        ...

    def static_decision(self, tool: Tool) -> PolicyDecision | None:
        """The decision for `tool` when it cannot depend on the call (cached per tool), else None."""
        ...

    def may_approve(self, approver: Principal | str, requester_user: str, tenant: str) -> str | None:
        """None when `approver` may decide a request of `requester_user` in `tenant`; else why not."""
        ...


def normalise_user(user: str) -> str:
    """A user name as compared for identity: NFKC-normalised and case-folded."""
    return unicodedata.normalize("NFKC", user).casefold().strip()


def same_person(approver: Principal | str, requester_user: str) -> bool:
    """True when `approver` names the requester (compared on normalised identity)."""
    user = approver.user if isinstance(approver, Principal) else str(approver)
    return normalise_user(user) == normalise_user(requester_user)


class BasePolicy:
    """Defaults for every `Policy` member except `decide`: subclass and write `decide`."""

    uses_arguments: bool = True
    allow_self_approval: bool = False
    approver_role: str | None = None

    def decide(self, request: PolicyRequest) -> Any:  # pragma: no cover - subclasses define it
        raise NotImplementedError

    def static_decision(self, tool: Tool) -> PolicyDecision | None:
        return None

    def may_approve(self, approver: Principal | str, requester_user: str, tenant: str) -> str | None:
        if isinstance(approver, Principal) and approver.tenant != tenant:
            return "approver belongs to another tenant"
        if not self.allow_self_approval and same_person(approver, requester_user):
            return "self-approval is not allowed: another person must approve this call"
        if self.approver_role and not (
            isinstance(approver, Principal) and self.approver_role in approver.roles
        ):
            return f"approver needs the role {self.approver_role!r}"
        return None


class _AdaptedPolicy(BasePolicy):
    """A bare object with `decide`, given the protocol's defaults."""

    def __init__(self, policy: Any) -> None:
        self._policy = policy
        self._decide = policy.decide

    def decide(self, request: PolicyRequest) -> Any:
        return self._decide(request)

    def __repr__(self) -> str:
        return f"as_policy({self._policy!r})"


def as_policy(policy: Any) -> Policy:
    """`policy` itself when it implements the whole protocol, else wrapped with `BasePolicy` defaults."""
    if isinstance(policy, Policy):
        return policy
    if not callable(getattr(policy, "decide", None)):
        from .exceptions import UserError

        raise UserError(f"a policy needs a decide(request) method; got {type(policy).__name__}")
    return _AdaptedPolicy(policy)


DEFAULT_RISK_MATRIX: Mapping[tuple[Effect, Risk], Action] = {
    (Effect.READ, Risk.LOW): Action.ALLOW,
    (Effect.READ, Risk.MEDIUM): Action.ALLOW,
    (Effect.READ, Risk.HIGH): Action.APPROVAL,
    (Effect.READ, Risk.CRITICAL): Action.APPROVAL,
    (Effect.WRITE, Risk.LOW): Action.ALLOW,
    (Effect.WRITE, Risk.MEDIUM): Action.ALLOW,
    (Effect.WRITE, Risk.HIGH): Action.APPROVAL,
    (Effect.WRITE, Risk.CRITICAL): Action.APPROVAL,
    (Effect.DESTRUCTIVE, Risk.LOW): Action.APPROVAL,
    (Effect.DESTRUCTIVE, Risk.MEDIUM): Action.APPROVAL,
    (Effect.DESTRUCTIVE, Risk.HIGH): Action.APPROVAL,
    (Effect.DESTRUCTIVE, Risk.CRITICAL): Action.APPROVAL,
}


TaintMode = Literal["data-flow", "run"]
"""How `DefaultPolicy` applies taint: by where argument values came from, or to the whole run."""

_REPORTED_PATHS = 8
"""Untraced paths named in an approval's reason (all of them are in `PolicyDecision.untraced`)."""


@dataclass(kw_only=True)
class DefaultPolicy(BasePolicy):
    """Seed 003's risk matrix, scopes and taint. See the module docstring."""

    matrix: Mapping[tuple[Effect, Risk], Action] = field(default_factory=lambda: dict(DEFAULT_RISK_MATRIX))
    """(effect, risk) -> action; a pair missing here is denied."""
    allow_self_approval: bool = False
    """Whether the principal who made a call may approve it."""
    approver_role: str | None = None
    """When set, only principals with this role may approve."""
    taint_requires_approval: bool = True
    """Untrusted content in the run makes open-world writes and egress reads need approval."""
    taint: TaintMode = "data-flow"
    """`data-flow`: in a run with provenance, ask only when an argument value cannot be traced to
    trusted text; `run`: ask for every such call once the run is tainted (see the module docstring)."""
    uses_arguments: bool = False
    """Whether the gate must serialise the validated arguments for `decide`. The matrix reads
    metadata only; data-flow taint reads arguments, so it is turned on with `taint="data-flow"`
    (only calls the policy cannot decide from the tool alone pay for it: see `static_decision`)."""

    def __post_init__(self) -> None:
        if self.taint not in ("data-flow", "run"):
            raise ValueError(f"taint must be 'data-flow' or 'run', not {self.taint!r}")
        if self.taint_requires_approval and self.taint == "data-flow":
            self.uses_arguments = True

    def decide(self, request: PolicyRequest) -> PolicyDecision:
        tool, principal = request.tool, request.principal
        missing = tool.scopes - principal.scopes
        if missing:
            return PolicyDecision.deny(f"missing scopes: {', '.join(sorted(missing))}", rule="scope")
        if tool.requires_approval is True:
            return PolicyDecision.needs_approval(f"{tool.name} always needs a human approval", rule="tool")
        run = request.run
        if self.taint_requires_approval and run.tainted and _taint_gated(tool):
            taint = self._taint_decision(tool, request.arguments, run)
            if taint is not None:
                return taint
        action = self.matrix.get((tool.effect, tool.risk))
        if action is None:
            return PolicyDecision.deny(
                f"no rule for effect={tool.effect} risk={tool.risk}", rule="risk-matrix"
            )
        if action is Action.APPROVAL and tool.requires_approval is False:
            return PolicyDecision.allow("approval waived by the tool's declaration", rule="tool")
        if action is Action.APPROVAL:
            return PolicyDecision.needs_approval(
                f"{tool.effect.value} tool with {tool.risk.value} risk needs a human approval",
                rule="risk-matrix",
            )
        return _MATRIX_DECISIONS[action]

    def static_decision(self, tool: Tool) -> PolicyDecision | None:
        """The decision for `tool` when it cannot depend on who asks, the arguments or the run.

        True for a tool with no scopes whose matrix answer is allow and that taint cannot touch (not
        an open-world write). The gate caches it per tool and skips building a request on every call.
        """
        if tool.scopes or tool.requires_approval is True:
            return None
        if self.taint_requires_approval and _taint_gated(tool):
            return None
        action = self.matrix.get((tool.effect, tool.risk))
        if action is Action.ALLOW:
            return _MATRIX_DECISIONS[Action.ALLOW]
        return None

    def _taint_decision(
        self, tool: Tool, arguments: dict[str, Any], run: RunContext
    ) -> PolicyDecision | None:
        """Needs approval for a tainted run's gated call, or None when data flow clears it."""
        what = "sends data out" if tool.egress and tool.effect is Effect.READ else "acts on the outside world"
        provenance = run.provenance
        if self.taint == "run" or provenance is None:
            return PolicyDecision.needs_approval(
                f"{tool.name} {what} and this run has read untrusted content", rule="taint"
            )
        paths = tuple(provenance.untraced(arguments, tool.input_schema))
        if not paths:
            return None
        named = ", ".join(paths[:_REPORTED_PATHS])
        if len(paths) > _REPORTED_PATHS:
            named += f" and {len(paths) - _REPORTED_PATHS} more"
        return PolicyDecision.needs_approval(
            f"{tool.name} {what}, this run has read untrusted content, and these values are not in "
            f"the user's request or trusted results: {named}",
            rule="taint",
            untraced=paths,
        )


def _taint_gated(tool: Tool) -> bool:
    """Whether taint can make `tool` need approval: an open-world write or destructive tool, or an
    egress tool (a read whose arguments leave)."""
    return tool.egress or (tool.open_world and tool.effect in (Effect.WRITE, Effect.DESTRUCTIVE))


async def decide(policy: Policy, request: PolicyRequest) -> PolicyDecision:
    """Run a policy that may be sync or async; anything but a PolicyDecision is a deny."""
    result = policy.decide(request)
    if type(result) is PolicyDecision:
        return result
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, PolicyDecision):
        return PolicyDecision.deny(f"policy returned {type(result).__name__}", rule="policy-error")
    return result


_MATRIX_DECISIONS = {action: PolicyDecision(action=action, rule="risk-matrix") for action in Action}
