"""Shared by the plugins that inspect listings: scan with maitre's scanner, one case per tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...mcp.scanner import Finding
from ..attack import Attack
from ..cases import Attempt, Case

__all__ = ["findings_cases", "listing_attempt"]


def listing_attempt(tools: list[dict[str, Any]], label: str = "tools/list") -> Attempt:
    """The listing as an attempt's evidence: what was asked and the names that came back."""
    return Attempt(tool=label, arguments={}, response=", ".join(str(t.get("name")) for t in tools))


def findings_cases(
    attack: Attack,
    plugin: str,
    findings: list[Finding],
    keep: Callable[[Finding], bool],
    *,
    what: str,
) -> list[Case]:
    """A case per tool with a kept high finding (`executed`: the target served it), or one clean case."""
    by_tool: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.severity == "high" and keep(finding):
            by_tool.setdefault(finding.tool, []).append(finding)
    cases = []
    for tool, found in sorted(by_tool.items()):
        evidence = Attempt(
            tool="tools/list",
            arguments={"tool": tool},
            response="\n".join(f.render() for f in found),
        )
        cases.append(
            Case(
                plugin=plugin,
                id=f"{plugin}/{tool}",
                title=f"{tool}: {what}",
                outcome="executed",
                why=f"the target serves this definition to every client: {found[0].message} at {found[0].path}",
                attempts=[evidence],
            )
        )
    if not cases:
        cases.append(
            Case(
                plugin=plugin,
                id=f"{plugin}/listing",
                title=f"{len(attack.tools)} listed definitions: no {what}",
                outcome="blocked",
                why="maitre's scanner found no high finding of this kind in any string of any listed definition",
                attempts=[listing_attempt(attack.tools)],
            )
        )
    return cases
