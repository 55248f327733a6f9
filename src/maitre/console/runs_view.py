"""A saved agent run as the console reads it: only the signed-in person's tenant, parsed once.

The request page (what the user asked, the last turns) and the runs pages (list, timeline) both
read runs through here, so a run of another tenant is, for the person, a run that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..messages import AssistantMessage, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from ..agent.run import Run
    from ..stores import Stores

__all__ = ["Turn", "goal", "last_turns", "load_run"]


@dataclass(frozen=True)
class Turn:
    """One message of a run, as a line a person reads: who spoke and what they said."""

    role: str
    """`user`, `assistant` or `tool`."""
    text: str
    """The words (an assistant turn that only called tools names the tools)."""


async def load_run(stores: Stores, tenant: str, run_id: str) -> Run | None:
    """The run `run_id` of `tenant`, or None (unknown, another tenant's, or unreadable)."""
    from ..agent.run import Run

    saved = await stores.runs.load(run_id, tenant=tenant)
    if saved is None:
        return None
    try:
        run = Run.from_json(saved.state_json)
    except (ValueError, KeyError, TypeError):
        return None
    return run if run.principal.tenant == tenant else None


def goal(run: Run) -> str:
    """What the user asked: the first user message of the run ('' if there is none)."""
    for message in run.messages:
        if isinstance(message, UserMessage):
            return message.content
    return ""


def last_turns(run: Run, count: int = 6) -> list[Turn]:
    """The run's last `count` messages as turns, oldest first."""
    turns: list[Turn] = []
    for message in run.messages[-count:]:
        if isinstance(message, UserMessage):
            turns.append(Turn("user", message.content))
        elif isinstance(message, AssistantMessage):
            called = ", ".join(call.name for call in message.tool_calls)
            text = message.text or (f"(calls {called})" if called else "")
            turns.append(Turn("assistant", text))
        elif isinstance(message, ToolResultMessage):
            turns.append(Turn("tool", message.content))
    return turns
