"""Working memory (seed 001's sticky note): `write_notes` / `read_notes` give a run its scratchpad.

Notes live in the run's state, survive trimming of the conversation and a pause/resume, and never
leave the run.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..context import RunContext
from ..tools import Toolbox

__all__ = ["notes_toolbox"]

_MAX_NOTES_CHARS = 8_000


def notes_toolbox() -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write", idempotent=True, tags=("memory", "working"))
    def write_notes(
        text: Annotated[
            str, Field(min_length=1, max_length=2_000, description="What to remember for this task")
        ],
        run: RunContext,
        mode: Literal["append", "replace"] = "append",
    ) -> str:
        """Write to this task's scratchpad (plan, to-do list, what was tried). Use it to keep track of a long
        task. Do not use it for facts about the user that should outlive the task."""
        if mode == "replace":
            run.notes.clear()
        run.notes.append(text)
        while sum(len(n) for n in run.notes) > _MAX_NOTES_CHARS and len(run.notes) > 1:
            run.notes.pop(0)
        return f"Saved. The scratchpad has {len(run.notes)} notes."

    @box.tool(tags=("memory", "working"))
    def read_notes(run: RunContext) -> str:
        """Read this task's scratchpad. Use it when you need your plan or earlier findings. Do not use it to
        look up user facts."""
        if not run.notes:
            return "The scratchpad is empty."
        return "\n".join(f"{i}. {note}" for i, note in enumerate(run.notes, start=1))

    return box
