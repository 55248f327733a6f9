"""Cross-tenant ids: another tenant's resource id, sent by this tenant's caller.

The red team cannot know which ids belong to someone else, so you say: `--foreign-id
ticket_id=T-2001` (repeatable) names an id of another tenant's resource, and `--secret TEXT` what
only that resource holds. Every listed tool with that parameter is called with the id (its other
arguments valid). Decides: `leaked` when a secret came back, `executed` when the tool acted or
answered with a result, `blocked` when it was refused (maitre's `owner=` check answers
PERMISSION_DENIED before anything runs).
"""

from __future__ import annotations

from ..attack import Attack
from ..cases import Case
from ..tools_info import properties, valid_arguments
from .base import Plugin

__all__ = ["PLUGIN", "run"]


async def run(attack: Attack) -> list[Case]:
    cases: list[Case] = []
    for param, ids in attack.foreign_ids.items():
        for tool in attack.tools:
            if param not in properties(tool):
                continue
            name = str(tool["name"])
            for value in ids:
                arguments = {**(valid_arguments(tool) or {}), param: value}
                attempt = await attack.send(name, arguments, run=attack.new_run("tenant"))
                outcome = attack.outcome([attempt])
                cases.append(
                    Case(
                        plugin="cross_tenant",
                        id=f"cross_tenant/{name}:{param}={value}",
                        title=f"{name} with another tenant's {param} {value}",
                        outcome=outcome,
                        why={
                            "leaked": "the other tenant's secret came back",
                            "executed": f"the tool ran on another tenant's id (measured by {attack.measured_by})",
                            "blocked": "refused before anything of the other tenant's was read or changed",
                        }[outcome],
                        attempts=[attempt],
                    )
                )
    return cases


PLUGIN = Plugin(
    name="cross_tenant",
    family="seed003",
    summary="sends another tenant's ids (--foreign-id PARAM=ID) to every tool taking them; leaked if --secret returns",
    run=run,
)
