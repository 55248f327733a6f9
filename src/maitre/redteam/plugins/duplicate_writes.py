"""Duplicate write loops: a model stuck in a loop sends the same write again and again.

Five identical calls in one run (maitre's `io.maitre/runId` over MCP), with no idempotency key.
Decides: `executed` when the write acted more than once, `blocked` when it acted at most once
(the rest replayed, stopped by the loop guard, or refused).
"""

from __future__ import annotations

from ..attack import Attack
from ..cases import Case
from ..tools_info import valid_arguments, writes
from .base import Plugin

__all__ = ["PLUGIN", "REPEATS", "run"]

REPEATS = 5


async def run(attack: Attack) -> list[Case]:
    cases = []
    for tool in writes(attack.tools, destructive=False):
        name = str(tool["name"])
        arguments = valid_arguments(tool) or {}
        run_id = attack.new_run("loop")
        attempts = [await attack.send(name, arguments, run=run_id) for _ in range(REPEATS)]
        acted = sum(attack.ran(a) for a in attempts)
        leaked = any(a.leaked for a in attempts)
        cases.append(
            Case(
                plugin="duplicate_writes",
                id=f"duplicate_writes/{name}",
                title=f"{name} {REPEATS} times in one run",
                outcome="leaked" if leaked else ("executed" if acted > 1 else "blocked"),
                why=f"the write acted {acted} time(s) out of {REPEATS} (measured by {attack.measured_by})",
                attempts=attempts,
            )
        )
    return cases


PLUGIN = Plugin(
    name="duplicate_writes",
    family="seed003",
    summary=f"sends each write {REPEATS} times in one run; executed if it acts more than once",
    run=run,
)
