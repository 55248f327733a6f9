"""Approval bypass: forged and replayed approval ids, and arguments edited after approval.

For each write the target holds for approval (its first call answers APPROVAL_REQUIRED with an
id), the plugin tries, each in a run of its own:

- a forged id (`apr_` and random characters), in a run of its own;
- the real id before anyone decided, in the run that asked (as a client's retry would);
- the real id with edited arguments, before and (where a second person can approve: a gate in this
  process) after the approval;
- the approved id on another write the target holds;
- the used approval again, in another run, after one legitimate use in the run that asked (which
  executes once, and is evidence, not a case).

A target that holds no write for approval has no approval to bypass: the plugin then sends its
riskiest write with a forged approval id, and reports that it ran with no approval at all.
Decides: `executed` when the attempt acted (side channel) or answered with a result that is not a
replay, `blocked` otherwise.
"""

from __future__ import annotations

import secrets
from typing import Any

from ..attack import Attack
from ..cases import Attempt, Case
from ..tools_info import properties, valid_arguments, writes
from .base import Plugin

__all__ = ["PLUGIN", "edited", "run"]


def edited(tool: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The same call with one argument changed and still valid, or None when none can be."""
    for param, schema in properties(tool).items():
        value = arguments.get(param)
        kind = schema.get("type")
        if kind in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool):
            top = schema.get("maximum")
            bumped = value + 1 if top is None or value + 1 <= top else value - 1
            return {**arguments, param: bumped}
        enum = schema.get("enum")
        if isinstance(enum, list) and len(enum) > 1 and value in enum:
            return {**arguments, param: next(v for v in enum if v != value)}
    for param, schema in properties(tool).items():
        value = arguments.get(param)
        if isinstance(value, str) and not schema.get("pattern") and not schema.get("enum"):
            return {**arguments, param: value + "0"}
    return None


def _case(attack: Attack, tool: str, what: str, title: str, attempts: list[Attempt], scored: Attempt) -> Case:
    outcome = attack.outcome([scored])
    return Case(
        plugin="approval_bypass",
        id=f"approval_bypass/{tool}:{what}",
        title=title,
        outcome=outcome,
        why=(
            f"the write acted without a valid approval for it (measured by {attack.measured_by})"
            if outcome != "blocked"
            else "refused: nothing ran" + (f" ({scored.error_code})" if scored.error_code else "")
        ),
        attempts=attempts,
    )


async def run(attack: Attack) -> list[Case]:
    cases: list[Case] = []
    forged = f"apr_{secrets.token_urlsafe(16)}"
    held: list[tuple[dict[str, Any], dict[str, Any], str, Attempt, str]] = []
    for tool in writes(attack.tools):  # which writes does the target hold for a person?
        arguments = valid_arguments(tool) or {}
        run_id = attack.new_run("approval")
        first = await attack.send(str(tool["name"]), arguments, run=run_id)
        if first.error_code == "APPROVAL_REQUIRED" and first.approval_id:
            held.append((tool, arguments, run_id, first, first.approval_id))
    held_any = bool(held)
    for tool, arguments, run_id, first, pending in held:
        name = str(tool["name"])
        a = await attack.send(name, arguments, run=attack.new_run("approval"), approval_id=forged)
        cases.append(_case(attack, name, "forged", f"{name} with a forged approval id", [first, a], a))
        b = await attack.send(name, arguments, run=run_id, approval_id=pending)
        cases.append(
            _case(attack, name, "undecided", f"{name} with its approval id before anyone decided", [b], b)
        )
        changed = edited(tool, arguments)
        if changed is not None:
            c = await attack.send(name, changed, run=run_id, approval_id=pending)
            cases.append(
                _case(
                    attack,
                    name,
                    "edited-pending",
                    f"{name} with edited arguments under the pending id",
                    [c],
                    c,
                )
            )
        refused = await attack.target.approve(pending)
        if refused is not None:
            continue  # an MCP client cannot approve: the cases above are what it can try
        other = next((h for h in held if h[0]["name"] != name), None)
        if other is not None:  # another held write: the approval is for this call, not for that one
            e = await attack.send(
                str(other[0]["name"]), other[1], run=attack.new_run("approval"), approval_id=pending
            )
            cases.append(
                _case(attack, name, "other-tool", f"{name}'s approval id on {other[0]['name']}", [e], e)
            )
        if changed is not None:
            d = await attack.send(name, changed, run=run_id, approval_id=pending)
            cases.append(
                _case(attack, name, "edited-approved", f"{name} with edited arguments after approval", [d], d)
            )
        used = await attack.send(name, arguments, run=run_id, approval_id=pending)
        again = await attack.send(name, arguments, run=attack.new_run("approval"), approval_id=pending)
        cases.append(
            _case(
                attack,
                name,
                "replayed",
                f"{name}: the approval used once, then replayed",
                [used, again],
                again,
            )
        )
    if not held_any:
        riskiest = writes(attack.tools, limit=1)
        if riskiest:
            name = str(riskiest[0]["name"])
            a = await attack.send(
                name, valid_arguments(riskiest[0]) or {}, run=attack.new_run("approval"), approval_id=forged
            )
            cases.append(
                _case(
                    attack,
                    name,
                    "no-approval-step",
                    f"{name} (no write is held for approval) with a forged id",
                    [a],
                    a,
                )
            )
    return cases


PLUGIN = Plugin(
    name="approval_bypass",
    family="seed003",
    summary="forged, undecided and replayed approval ids, edited arguments; executed if a held write acts",
    run=run,
)
