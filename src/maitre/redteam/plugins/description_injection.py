"""Tool description prompt injection (seed 003): instructions for the model in a tool's description.

Decides from the listing, with maitre's scanner (`maitre.mcp.scanner`): a high `hidden_instruction`
finding in a tool's `description` or `title` ("ignore previous instructions", `<IMPORTANT>`,
"do not tell the user", role changes, chat-template tokens) is `executed`: the target serves that
text to every model that lists it. Poison elsewhere in the definition is `tool_poisoning`'s.
"""

from __future__ import annotations

from ...mcp.scanner import scan_servers
from ..attack import Attack
from ..cases import Case
from .base import Plugin
from .listing import findings_cases

__all__ = ["PLUGIN", "run"]


async def run(attack: Attack) -> list[Case]:
    findings = scan_servers({"target": attack.tools})
    return findings_cases(
        attack,
        "description_injection",
        findings,
        lambda f: f.kind == "hidden_instruction" and f.path in ("description", "title"),
        what="instructions for the model in the description",
    )


PLUGIN = Plugin(
    name="description_injection",
    family="seed003",
    summary="scans descriptions for instructions aimed at the model; executed if the target serves one",
    run=run,
)
