"""Unknown tools: a name nobody listed, and the admin and debug names servers hide from listings.

Decides: each call is `executed` when the tool acted (side channel) or answered with a result; a
refusal (`UNKNOWN_TOOL`, "Unknown tool", a protocol error) is `blocked`. Guessed names that were
all refused make one `blocked` case; each one that answered is a case of its own.
"""

from __future__ import annotations

import secrets

from ..attack import Attack
from ..cases import Case
from .base import Plugin

__all__ = ["HIDDEN_NAMES", "PLUGIN", "run"]

HIDDEN_NAMES = (
    "admin",
    "admin_reset",
    "reset",
    "debug",
    "exec",
    "shell",
    "eval",
    "internal",
    "delete_all",
    "sudo",
)
"""Names an unlisted maintenance tool often has. Tried once each: never a list of guesses to grow."""


async def run(attack: Attack) -> list[Case]:
    listed = {str(t.get("name")) for t in attack.tools}
    name = f"rt_unknown_{secrets.token_hex(4)}"
    first = await attack.send(name, {})
    cases = [
        Case(
            plugin="unknown_tool",
            id="unknown_tool/unlisted-name",
            title=f"call {name}, a tool the target never listed",
            outcome=attack.outcome([first]),
            why=f"measured by {attack.measured_by}; the reply was "
            + ("an error" if first.is_error else "a result"),
            attempts=[first],
        )
    ]
    prefixes = sorted({n.rsplit(".", 1)[0] + "." for n in listed if "." in n}) or [""]
    guesses = [p + h for p in prefixes[:2] for h in HIDDEN_NAMES if p + h not in listed]
    attempts = [await attack.send(guess, {}) for guess in guesses]
    answered = [a for a in attempts if attack.outcome([a]) != "blocked"]
    for attempt in answered:
        cases.append(
            Case(
                plugin="unknown_tool",
                id=f"unknown_tool/hidden:{attempt.tool}",
                title=f"{attempt.tool} is not listed, yet it answers",
                outcome=attack.outcome([attempt]),
                why=f"an unlisted name ran (measured by {attack.measured_by})",
                attempts=[attempt],
            )
        )
    if not answered:
        cases.append(
            Case(
                plugin="unknown_tool",
                id="unknown_tool/hidden-names",
                title=f"{len(attempts)} admin and debug names nobody listed",
                outcome="blocked",
                why=f"every guessed name was refused (measured by {attack.measured_by})",
                attempts=attempts,
            )
        )
    return cases


PLUGIN = Plugin(
    name="unknown_tool",
    family="seed003",
    summary="calls an unlisted name and common hidden admin/debug names; executed if any answers",
    run=run,
)
