"""Malicious parameters: path traversal, SQL and shell metacharacters, oversize, wrong types.

Which parameter gets which payload is decided from its name, so no payload is wasted on free
text where it is legitimate (a message may contain a quote):

- traversal (`../../../../../../../../etc/passwd`, `/etc/passwd`) into parameters named like a
  path or file;
- SQL (`' OR '1'='1' --`) and shell (`x; cat /etc/passwd #`) into ids, queries, names, paths,
  hosts and commands;
- one string of 300,000 characters into the first string parameter (more than maitre's 256 KiB);
- a wrong JSON type into each integer, number, boolean, array or object parameter (`"100"` for
  an integer, `"true"` for a boolean: what a lax validator coerces).

Decides, per payload: `leaked` when a canary came back (the passwd signature `root:x:0:0`, a
private key, your `--secret`), `executed` when the tool acted on the payload (side channel) or
answered with a result, `blocked` when it was refused.
"""

from __future__ import annotations

import re
from typing import Any

from ..attack import Attack
from ..cases import Case
from ..tools_info import string_params, typed_params, valid_arguments
from .base import Plugin

__all__ = ["MAX_TOOLS", "OVERSIZE", "PLUGIN", "SHELL", "SQL", "TRAVERSAL", "WRONG", "run"]

MAX_TOOLS = 10
OVERSIZE = 300_000
_PATHLIKE = re.compile(r"(path|file|dir|folder|document|doc)", re.I)
_SENSITIVE = re.compile(
    r"(path|file|dir|folder|query|sql|search|filter|where|id$|_id|key|name|cmd|command|host|url|uri)", re.I
)
TRAVERSAL = ("../../../../../../../../etc/passwd", "/etc/passwd")
SQL = "' OR '1'='1' --"
SHELL = "x; cat /etc/passwd #"
WRONG: dict[str, Any] = {"integer": "100", "number": "1.5", "boolean": "true", "array": "x", "object": "x"}


def _payloads(tool: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(family, parameter, label, value) for one tool."""
    out: list[tuple[str, str, str, Any]] = []
    strings = string_params(tool)
    for param in strings:
        if _PATHLIKE.search(param):
            out += [("traversal", param, value, value) for value in TRAVERSAL]
    sensitive = [p for p in strings if _SENSITIVE.search(p)]
    if sensitive:
        out.append(("sql", sensitive[0], SQL, SQL))
        out.append(("shell", sensitive[0], SHELL, SHELL))
    if strings:
        out.append(("oversize", strings[0], f"{OVERSIZE} characters", "A" * OVERSIZE))
    for param, kind in typed_params(tool)[:2]:
        out.append(("wrong_type", param, f"{WRONG[kind]!r} for a {kind}", WRONG[kind]))
    return out


async def run(attack: Attack) -> list[Case]:
    cases: list[Case] = []
    tools = [t for t in attack.tools if valid_arguments(t) is not None][:MAX_TOOLS]
    for tool in tools:
        name = str(tool["name"])
        base = valid_arguments(tool) or {}
        for family, param, label, value in _payloads(tool):
            attempt = await attack.send(name, {**base, param: value}, run=attack.new_run("params"))
            outcome = attack.outcome([attempt])
            cases.append(
                Case(
                    plugin="malicious_parameters",
                    id=f"malicious_parameters/{family}:{name}.{param}:{len(cases)}",
                    title=f"{family}: {name}({param}={label})",
                    outcome=outcome,
                    why={
                        "leaked": f"the payload read something it must not: {', '.join(attempt.leaked)}",
                        "executed": f"the tool acted on the payload (measured by {attack.measured_by})",
                        "blocked": "refused before the tool ran"
                        + (f" ({attempt.error_code})" if attempt.error_code else ""),
                    }[outcome],
                    attempts=[attempt],
                )
            )
    return cases


PLUGIN = Plugin(
    name="malicious_parameters",
    family="seed003",
    summary="path traversal, SQL/shell metacharacters, a 300,000-character string, wrong types; executed if the tool acts",
    run=run,
)
