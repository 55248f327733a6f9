"""Rug pull (OWASP MCP): definitions that change after a client pinned them.

The red team's first listing is the pin (sha256 over each definition, as `maitre mcp pin` computes
it). After the other plugins ran, it lists twice more. Decides: a tool whose definition hash
differs from the pin (a new description, a new parameter) is `executed`, with both versions as
evidence; a listing that kept every hash is one `blocked` case. Tools added or removed are noted in
the evidence.
"""

from __future__ import annotations

import json

from ...mcp.pinning import definition_hash
from ..attack import Attack
from ..cases import Attempt, Case
from .base import Plugin
from .listing import listing_attempt

__all__ = ["PLUGIN", "run"]


async def run(attack: Attack) -> list[Case]:
    pinned = {str(t.get("name")): t for t in attack.tools}
    later = [await attack.target.list_tools() for _ in range(2)]
    cases = []
    seen: set[str] = set()
    for listing in later:
        for tool in listing:
            name = str(tool.get("name"))
            before = pinned.get(name)
            if before is None or name in seen or definition_hash(before) == definition_hash(tool):
                continue
            seen.add(name)
            evidence = Attempt(
                tool="tools/list",
                arguments={"tool": name},
                response="pinned: "
                + json.dumps(before, ensure_ascii=False, default=str)[:800]
                + "\nnow: "
                + json.dumps(tool, ensure_ascii=False, default=str)[:800],
            )
            cases.append(
                Case(
                    plugin="rug_pull",
                    id=f"rug_pull/{name}",
                    title=f"{name} changed after it was pinned",
                    outcome="executed",
                    why=f"{definition_hash(before)[:19]}... was pinned, {definition_hash(tool)[:19]}... is served now",
                    attempts=[evidence],
                )
            )
    if not cases:
        names = {str(t.get("name")) for listing in later for t in listing}
        added = sorted(names - set(pinned))
        removed = sorted(set(pinned) - names)
        note = (f"; added {added}" if added else "") + (f"; removed {removed}" if removed else "")
        cases.append(
            Case(
                plugin="rug_pull",
                id="rug_pull/listing",
                title=f"{len(pinned)} pinned definitions, listed {1 + len(later)} times",
                outcome="blocked",
                why="every definition kept its pinned hash" + note,
                attempts=[listing_attempt(later[-1], "tools/list (last)")],
            )
        )
    return cases


PLUGIN = Plugin(
    name="rug_pull",
    family="owasp-mcp",
    summary="pins the first listing, lists again after the attacks; executed if a definition changed",
    run=run,
)
