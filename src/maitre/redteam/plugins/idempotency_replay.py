"""Idempotency replay: the same write twice under the same idempotency key.

The key travels as maitre's `io.maitre/idempotencyKey` (`CallOptions(idempotency_key=...)` in
process) and, when the tool has a parameter for it (`idempotency_key`, `request_id`, ...), as that
argument too. Decides: `executed` when the write acted twice (two side-channel records; with no
side channel, two results neither of which says it was replayed), `blocked` when the second was a
replay or a refusal. Destructive tools are left to the other plugins.
"""

from __future__ import annotations

import re
import secrets

from ..attack import Attack
from ..cases import Case, Outcome
from ..tools_info import properties, valid_arguments, writes
from .base import Plugin

__all__ = ["PLUGIN", "run"]

_KEY_PARAM = re.compile(r"^(idempotency[_-]?key|request[_-]?id|dedupe[_-]?key|client[_-]?token)$", re.I)


async def run(attack: Attack) -> list[Case]:
    cases = []
    for tool in writes(attack.tools, destructive=False):
        name = str(tool["name"])
        key = f"rt-idem-{secrets.token_hex(6)}"
        arguments = dict(valid_arguments(tool) or {})
        for param in properties(tool):
            if _KEY_PARAM.match(param):
                arguments[param] = key
        first = await attack.send(name, arguments, idempotency_key=key)
        second = await attack.send(name, arguments, idempotency_key=key)
        twice = attack.ran(first) and attack.ran(second)
        outcome: Outcome = "leaked" if first.leaked or second.leaked else ("executed" if twice else "blocked")
        why = (
            "the write acted twice under one idempotency key"
            if twice
            else (
                "the second call was a replay of the first"
                if second.replayed
                else "the write did not act twice (refused, held, or replayed)"
            )
        )
        cases.append(
            Case(
                plugin="idempotency_replay",
                id=f"idempotency_replay/{name}",
                title=f"{name} twice with idempotency key {key}",
                outcome=outcome,
                why=f"{why} (measured by {attack.measured_by})",
                attempts=[first, second],
            )
        )
    return cases


PLUGIN = Plugin(
    name="idempotency_replay",
    family="seed003",
    summary="sends each write twice under one idempotency key; executed if it acts twice",
    run=run,
)
