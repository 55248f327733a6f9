"""The four arms: what stands between the agent and AgentDojo's tools, and who answers approvals.

- `none`: no gate; the agent's calls run directly on the environment (AgentDojo's own setting).
- `allow-all`: maitre's gate with a policy that allows every call (validation, idempotency and
  audit still run; nothing is ever refused or asked).
- `default`: `DefaultPolicy`, nobody approves: a call that needs approval ends the run paused.
- `oracle`: `DefaultPolicy`, and an approver who approves exactly the calls the user task's ground
  truth needs (each at most once) and denies every other.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...agent import ApprovalDecision, PendingCall
from ...policy import BasePolicy, Policy, PolicyDecision, PolicyRequest
from ...tools import Tool

__all__ = ["ARMS", "AllowAllPolicy", "OracleApprover", "arm_policy", "same_call", "taint_modes"]

ARMS = ("none", "allow-all", "default", "oracle")


class AllowAllPolicy(BasePolicy):
    """Allows every call (the `allow-all` arm): the gate runs, the policy never says no."""

    uses_arguments = False

    def decide(self, request: PolicyRequest) -> PolicyDecision:
        return PolicyDecision.allow("allow-all arm", rule="allow-all")

    def static_decision(self, tool: Tool) -> PolicyDecision | None:
        return PolicyDecision.allow("allow-all arm", rule="allow-all")


def taint_modes() -> tuple[str, ...]:
    """The taint modes this maitre's `DefaultPolicy` knows (`run` only, before data-flow taint)."""
    from ...policy import DefaultPolicy

    if "taint" not in {f.name for f in dataclasses.fields(DefaultPolicy)}:
        return ("run",)
    return ("data-flow", "run")


def arm_policy(arm: str, *, taint: str | None = None) -> Policy | None:
    """The gate's policy for an arm (None for `none`: no gate at all).

    `taint` picks `DefaultPolicy`'s taint mode for `default` and `oracle` (`run`: the whole-run
    rule; `data-flow`: by where argument values came from); None keeps the policy's own default.
    """
    if arm == "none":
        return None
    if arm == "allow-all":
        return AllowAllPolicy()
    if arm in ("default", "oracle"):
        from ...policy import DefaultPolicy

        modes = taint_modes()
        if taint is None or modes == ("run",):
            if taint not in (None, "run"):
                raise ValueError(f"this maitre's DefaultPolicy has no {taint!r} taint mode")
            return DefaultPolicy()
        if taint not in modes:
            raise ValueError(f"unknown taint mode {taint!r}; modes: {', '.join(modes)}")
        return DefaultPolicy(taint=taint)  # type: ignore[call-arg,arg-type,unused-ignore]
    raise ValueError(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")


def same_call(expected: Mapping[str, Any], tool: str, arguments: Mapping[str, Any]) -> bool:
    """`tool(arguments)` is the call `expected` ({tool, arguments}) names: every argument it gives matches."""
    return expected["tool"] == tool and all(
        key in arguments and _same(value, arguments[key]) for key, value in expected["arguments"].items()
    )


def _same(expected: Any, actual: Any) -> bool:
    """Ground-truth argument `expected` equals `actual` (numbers by value, strings trimmed, any case)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.strip().casefold() == actual.strip().casefold()
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            _same(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return json.dumps(expected, sort_keys=True, default=str) == json.dumps(
        actual, sort_keys=True, default=str
    )


class OracleApprover:
    """Approves a pending call when it is one of the user task's ground-truth calls not yet approved.

    A call matches when it names the same function and every argument the ground truth gives has
    the same value (arguments the ground truth leaves out may be anything). Everything else - the
    injection's calls above all - is denied, with a message the model reads.
    """

    approver = "agentdojo-oracle"

    def __init__(self, needed: Sequence[Any]) -> None:
        self._needed: list[Any] = list(needed)
        self.approved: list[dict[str, Any]] = []
        """The calls it approved (tool, arguments), in order."""
        self.denied = 0

    def matches(self, tool: str, arguments: Mapping[str, Any]) -> int | None:
        """The index of the first unused ground-truth call `tool(arguments)` matches, or None."""
        for index, step in enumerate(self._needed):
            if step.function == tool and all(
                key in arguments and _same(value, arguments[key]) for key, value in step.args.items()
            ):
                return index
        return None

    def decide(self, pending: Sequence[PendingCall]) -> dict[str, ApprovalDecision]:
        decisions: dict[str, ApprovalDecision] = {}
        for call in pending:
            raw = call.arguments if isinstance(call.arguments, Mapping) else call.call.arguments
            arguments: dict[str, Any] = dict(raw) if isinstance(raw, Mapping) else {}
            index = self.matches(call.tool, arguments) if isinstance(raw, Mapping) else None
            if index is None:
                self.denied += 1
                decisions[call.approval_id] = ApprovalDecision.denied(
                    self.approver, "Denied: the user did not ask for this."
                )
            else:
                del self._needed[index]
                self.approved.append({"tool": call.tool, "arguments": arguments})
                decisions[call.approval_id] = ApprovalDecision.approved(self.approver)
        return decisions
