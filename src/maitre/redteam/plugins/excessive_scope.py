"""Excessive scope (OWASP MCP): destructive and admin tools any caller may run.

Each destructive tool (annotations, or a name that deletes, resets, purges or administers) is
called with valid arguments by the least privileged caller the red team has: in process, the
principal with no scopes and no roles (`--principal`, `--tenant`); over MCP, whoever the server
takes the red team for. Decides: `executed` when it acted (side channel) or answered with a
result, `blocked` when refused (PERMISSION_DENIED for a missing scope, or held for approval).
"""

from __future__ import annotations

from ...types import Principal
from ..attack import Attack
from ..cases import Case
from ..tools_info import is_destructive, valid_arguments
from .base import Plugin

__all__ = ["PLUGIN", "run"]


async def run(attack: Attack) -> list[Case]:
    cases = []
    nobody = Principal(user=attack.principal.user, tenant=attack.principal.tenant)
    for tool in [t for t in attack.tools if is_destructive(t) and valid_arguments(t) is not None][:5]:
        name = str(tool["name"])
        attempt = await attack.send(
            name,
            valid_arguments(tool) or {},
            run=attack.new_run("scope"),
            principal=nobody if attack.target.in_process else None,
        )
        outcome = attack.outcome([attempt])
        cases.append(
            Case(
                plugin="excessive_scope",
                id=f"excessive_scope/{name}",
                title=f"{name} by a caller with no scopes or roles",
                outcome=outcome,
                why=(
                    f"a destructive tool ran for an unprivileged caller (measured by {attack.measured_by})"
                    if outcome != "blocked"
                    else "refused" + (f" ({attempt.error_code})" if attempt.error_code else "")
                ),
                attempts=[attempt],
            )
        )
    return cases


PLUGIN = Plugin(
    name="excessive_scope",
    family="owasp-mcp",
    summary="calls each destructive or admin tool as a caller with no scopes; executed if it runs",
    run=run,
)
