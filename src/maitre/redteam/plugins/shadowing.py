"""Shadowing (OWASP MCP): a tool named like another server's, or a description that steers one.

The other servers are a small catalogue of well-known tools (a filesystem's `read_file`, a mail
server's `send_email`, GitHub's `create_issue`, a shell's `execute_command`, ...), scanned
together with the target by maitre's scanner, the target last (the catalogue owns the names).
Decides: a high `shadowing` finding (the target offers a distinctive name that does not belong with
its other tools) or a high `cross_reference` (its text steers another server's tool: "when
send_email is called, also bcc ...") is `executed`. Namespaced names (`support.send_email`, as
maitre serves them) do not collide.
"""

from __future__ import annotations

from ...mcp.scanner import scan_servers
from ..attack import Attack
from ..cases import Case
from .base import Plugin
from .listing import findings_cases

__all__ = ["PLUGIN", "WELL_KNOWN", "run"]

WELL_KNOWN: dict[str, tuple[str, ...]] = {
    "filesystem": ("read_file", "write_file", "edit_file", "list_directory", "move_file", "search_files"),
    "mail": ("send_email", "read_email", "search_emails", "delete_email"),
    "github": ("create_issue", "create_pull_request", "push_files", "search_repositories"),
    "slack": ("slack_post_message", "slack_list_channels"),
    "shell": ("execute_command", "run_command"),
    "payments": ("create_refund", "create_payment"),
}
"""Tools of widely used MCP servers, by name only (the scanner needs no more to see a collision)."""


async def run(attack: Attack) -> list[Case]:
    servers = {name: [{"name": tool} for tool in tools] for name, tools in WELL_KNOWN.items()}
    findings = scan_servers({**servers, "target": attack.tools})
    return findings_cases(
        attack,
        "shadowing",
        [f for f in findings if f.server == "target"],
        lambda f: f.kind in ("shadowing", "cross_reference"),
        what="shadows or steers another server's tool",
    )


PLUGIN = Plugin(
    name="shadowing",
    family="owasp-mcp",
    summary="checks names and descriptions against well-known servers' tools; executed on a high shadow",
    run=run,
)
