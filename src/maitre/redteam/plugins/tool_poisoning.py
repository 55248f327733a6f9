"""Tool poisoning (OWASP MCP): poison anywhere in a definition, not only the description.

Decides from the listing, with maitre's scanner: a high finding in a parameter's description, an
enum value, a default, a property name or an annotation (full-schema poisoning), or invisible or
look-alike characters anywhere (hidden text, `pаypal` with a Cyrillic a), or a request to read or
pass on a credential file, is `executed`: the target serves it. Instructions in the description
itself are `description_injection`'s.
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
        "tool_poisoning",
        findings,
        lambda f: (
            f.kind in ("invisible_unicode", "confusable")
            or (f.kind == "hidden_instruction" and f.path not in ("description", "title"))
        ),
        what="poison hidden in the definition",
    )


PLUGIN = Plugin(
    name="tool_poisoning",
    family="owasp-mcp",
    summary="scans every string of every definition for hidden instructions, invisible or look-alike text",
    run=run,
)
