"""The `search_tools` meta-tool (seed 000): the model searches, the run gains the tools it found.

It is an ordinary read-only, low-risk tool in its own `Toolbox`, so it goes through the same gate
as every other call (validation, loop guard, budgets, audit). What it does:

1. searches the `ToolIndex` (hybrid, local, any model), leaving out tools whose required scopes
   the calling principal lacks (the gate would refuse them anyway, and their names are not the
   caller's business);
2. makes the hits callable in the calling run from the next step on (`RunContext.visible_tools`,
   which the gate's resolve stage enforces);
3. appends a `RevealRecord` (query, tools shown with scores, which were new) to the `RevealLog`;
4. returns names, descriptions and scores - not schemas: the revealed tools' definitions travel
   with the next model call anyway, and sending them twice would pay for them twice.

An empty result is an answer ("no tool fits"), with a note saying what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from ..context import RunContext
from ..tools import Toolbox
from ..types import Principal
from .index import ToolIndex
from .reveal import SEARCH_TOOL_NAME, RevealedTool, RevealLog, RevealRecord, reveal_in_run

__all__ = ["MAX_SEARCH_K", "SEARCH_TOOLS_DESCRIPTION", "search_tools_toolbox"]

MAX_SEARCH_K = 10
"""The model may ask for at most this many tools per search."""

SEARCH_TOOLS_DESCRIPTION = (
    "Find tools for the task at hand among tools that are not loaded yet. Use it when none of your "
    "current tools fits the next step: describe what you need to do in a few words (for example "
    "'refund a damaged order'). Returns the best-matching tools with descriptions and scores; they "
    "become callable from your next step. An empty list means no tool fits: do not use it to browse, "
    "answer without a tool, rephrase once, or ask the user."
)

_NO_MATCH = (
    "No tool matches this query. Answer without a tool, rephrase the search once with other words, "
    "or ask the user."
)
_FOUND = "These tools are now callable. Call the one that fits; do not search again for the same need."


def search_tools_toolbox(
    index: ToolIndex,
    *,
    log: RevealLog | None = None,
    namespace: str | Sequence[str] | None = None,
    name: str = SEARCH_TOOL_NAME,
    default_k: int = 5,
    toolbox: Toolbox | None = None,
) -> Toolbox:
    """A `Toolbox` holding the `search_tools(query, k)` meta-tool over `index`.

    Args:
        index: the tools to search (usually `ToolIndex(toolbox)`, following the run's toolbox).
        log: where each reveal is recorded; the host routes it to the audit log.
        namespace: restrict every search to this namespace (or these).
        name: the tool's name (`search_tools`; `ToolVisibility` keeps it always visible).
        default_k: tools returned when the model does not say.
        toolbox: where to read each tool's required scopes (default: the toolbox the index follows);
            tools the calling principal lacks scopes for are never shown.

    Example:
        ```python
        index = ToolIndex(shop)
        log = RevealLog()
        box = Toolbox().include(shop).include(search_tools_toolbox(index, log=log))
        ```
    """
    if not 1 <= default_k <= MAX_SEARCH_K:
        raise ValueError(f"default_k must be between 1 and {MAX_SEARCH_K}")

    def search_tools(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=500,
                description="What you need to do, in a few words, e.g. 'refund a damaged order'",
            ),
        ],
        run: RunContext,
        principal: Principal,
        k: Annotated[int, Field(ge=1, le=MAX_SEARCH_K, description="How many tools to return")] = default_k,
    ) -> dict[str, Any]:
        hits = index.search(query, k, namespace=namespace, exclude=_hidden_from(principal) | {name})
        newly = reveal_in_run(run, None, [h.name for h in hits])
        if log is not None:
            log.append(
                RevealRecord(
                    query=query,
                    k=k,
                    shown=tuple(
                        RevealedTool(
                            name=h.name, score=h.score, lexical_rank=h.lexical_rank, dense_rank=h.dense_rank
                        )
                        for h in hits
                    ),
                    newly_visible=tuple(newly),
                    run_id=run.run_id,
                    namespace=namespace
                    if isinstance(namespace, str) or namespace is None
                    else ",".join(namespace),
                )
            )
        return {
            "tools": [
                {"name": h.name, "description": h.description, "score": round(h.score, 3)} for h in hits
            ],
            "note": _FOUND if hits else _NO_MATCH,
        }

    def _hidden_from(principal: Principal) -> set[str]:
        source = toolbox if toolbox is not None else index.toolbox
        if source is None:
            return set()
        return {t.name for t in source if t.scopes and not t.scopes <= principal.scopes}

    box = Toolbox()
    box.add_tool(
        search_tools,
        name=name,
        description=SEARCH_TOOLS_DESCRIPTION,
        effect="read",
        risk="low",
        tags=("search", "meta"),
    )
    return box
