"""Result handles: where the rest of a cut result waits, and the built-in tool that pages through it.

A handle is bound to the tenant and user that produced it: anyone else asking for it gets
NOT_FOUND, the same answer as for a handle that never existed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..storage.subject_keys import MemorySubjectKeys, SubjectKeys, is_sealed
from ..tools import Tool, Toolbox
from ..types import ErrorCode, Principal, ToolError
from .personal import open_page

__all__ = ["builtin_toolbox"]


def builtin_toolbox(handles: Any, subject_keys: SubjectKeys | None = None) -> Toolbox:
    """The gate's own tools: `read_result` pages through a cut result (`subject_keys` opens the
    sealed pages of a personal tool's result)."""
    box = Toolbox()
    if subject_keys is None:
        subject_keys = MemorySubjectKeys()

    async def read_result(
        handle: Annotated[
            str,
            Field(pattern=r"^res_[A-Za-z0-9_\-]{8,64}$", description="The handle from a cut result"),
        ],
        principal: Principal,
        page: Annotated[int, Field(ge=1, le=10_000, description="Page number, starting at 1")] = 2,
    ) -> str:
        """Read one page of a tool result that was cut because it was too long.

        Use it only with a handle that a cut result gave you. Do not use it to re-run a tool.
        """
        found = await handles.get(handle, tenant=principal.tenant, user=principal.user)
        if found is None:
            raise ToolError(
                ErrorCode.NOT_FOUND, f"No result is stored under handle {handle} (or it expired)."
            )
        pages, meta = found
        if page > len(pages):
            raise ToolError(
                ErrorCode.INVALID_ARGUMENTS,
                f"Handle {handle} has {len(pages)} pages; page {page} does not exist.",
            )
        tail = f"\n[page {page} of {len(pages)} of the result of {meta.get('tool', 'a tool')}"
        tail += f'; next: read_result(handle="{handle}", page={page + 1})]' if page < len(pages) else "]"
        shown: str = pages[page - 1]
        if is_sealed(shown):  # a personal tool's page: readable only while its user's key lives
            shown = await open_page(subject_keys, principal.tenant, principal.user, shown)
        return shown + tail

    box.add(
        Tool.from_function(
            read_result,
            max_result_tokens=100_000,
            tags=("builtin",),
            idempotent=True,
            effect="read",
            # A page may come from an untrusted tool's output; the page does not know, so it is
            # labelled untrusted (fenced as data, and it taints the run) rather than risk the reverse.
            trust="untrusted",
        )
    )
    return box
