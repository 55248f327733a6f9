"""Who decides an approval from the command line: the operating-system account, marked `via=cli`.

A decision must carry an identity someone can stand behind. The command line has one that the
machine authenticated: the OS user running it (`getpass.getuser()`). That is what is recorded,
as `alice (via=cli)`. `--approver NAME` is only a claim (anyone can type any name), so it never
replaces the account: it is recorded beside it, `ops-bob (claimed; os=alice via=cli)`, and both
the account and the claimed name must pass the policy's self-approval check.

Roles come from the configuration file (`[approvals] cli_roles`), which the operator controls,
keyed by OS account - never by a claimed name.
"""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING

from .app import settings
from .errors import CommandError

if TYPE_CHECKING:
    from ..policy import Policy
    from ..stores import ApprovalRequest
    from ..types import Principal

__all__ = ["CliApprover", "os_user"]


def os_user() -> str:
    """The operating-system account running this command."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a bare container): the numeric uid still names it
        return f"uid-{os.getuid()}" if hasattr(os, "getuid") else "unknown"


class CliApprover:
    """The person deciding from this terminal: the OS account, plus an optional claimed name."""

    def __init__(self, claimed: str | None = None, *, user: str | None = None) -> None:
        self.user = user or os_user()
        """The OS account: the identity that counts."""
        self.claimed = claimed.strip() if claimed and claimed.strip() else None
        """The `--approver` name, recorded as a claim only."""
        self.roles = frozenset(settings().config.approvals.cli_roles.get(self.user, ()))
        """Roles the configuration file grants this OS account."""

    @property
    def label(self) -> str:
        """What the decision records: `alice (via=cli)` or `ops-bob (claimed; os=alice via=cli)`."""
        if self.claimed and self.claimed != self.user:
            return f"{self.claimed} (claimed; os={self.user} via=cli)"
        return f"{self.user} (via=cli)"

    def principal(self, tenant: str) -> Principal:
        """The approver as the approval service sees it: the label, with the account's roles."""
        from ..types import Principal

        return Principal(user=self.label, tenant=tenant, roles=self.roles)

    def check(self, policy: Policy, request: ApprovalRequest) -> None:
        """Refuse (exit 1) when the policy would not let this person decide `request`.

        The account is checked as a principal of the request's tenant with its configured roles,
        and so is the claimed name: claiming another name never makes a self-approval pass, and
        claiming the requester's name is refused too.
        """
        from ..types import Principal

        account = Principal(user=self.user, tenant=request.tenant, roles=self.roles)
        why = policy.may_approve(account, request.user, request.tenant)
        if why is None and self.claimed:
            claimed = Principal(user=self.claimed, tenant=request.tenant, roles=self.roles)
            why = policy.may_approve(claimed, request.user, request.tenant)
        if why:
            raise CommandError(f"refused: {self.label} cannot decide {request.id}: {why}")
