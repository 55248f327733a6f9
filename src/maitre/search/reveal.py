"""Which tools a run can see: a small core set, `search_tools`, and what the search revealed.

The state lives in the run itself (`RunContext.visible_tools`), because the gate's resolve stage
already refuses a tool that is not visible in the run, and because a paused run is serialised and
resumed elsewhere: what was revealed must survive that. `ToolVisibility` is the agent loop's view
of it: `definitions(format)` is what goes to the model on the next call, nothing more.

Every reveal is written to a `RevealLog` as a `RevealRecord` (query, tools shown, their scores,
which were new) so an auditor can answer "why could the model call issue_refund at step 4?".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..context import RunContext
from ..exceptions import UserError

if TYPE_CHECKING:
    from ..tools import ExportFormat, Toolbox, ToolDefinitions

__all__ = ["RevealLog", "RevealRecord", "RevealedTool", "SEARCH_TOOL_NAME", "ToolVisibility", "reveal_in_run"]

SEARCH_TOOL_NAME = "search_tools"


@dataclass(kw_only=True, frozen=True)
class RevealedTool:
    """One tool shown by a search."""

    name: str
    """Canonical tool name."""
    score: float
    """The fused search score it was shown with."""
    lexical_rank: int | None = None
    """Its BM25 rank, when a query word matched it."""
    dense_rank: int | None = None
    """Its rank by embedding similarity."""


@dataclass(kw_only=True, frozen=True)
class RevealRecord:
    """One `search_tools` call: what was asked, what was shown, what became callable."""

    query: str
    """The query as the model wrote it."""
    k: int
    """How many tools were asked for."""
    shown: tuple[RevealedTool, ...]
    """The tools returned, best first (empty: the search abstained)."""
    newly_visible: tuple[str, ...]
    """Tools that were not callable in the run before this search."""
    run_id: str | None = None
    """The run the reveal belongs to."""
    namespace: str | None = None
    """The namespace filter the search used, if any."""
    at: float = field(default_factory=time.time)
    """Unix time of the search."""

    @property
    def abstained(self) -> bool:
        return not self.shown

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for the audit log."""
        return {
            "query": self.query,
            "k": self.k,
            "shown": [
                {"name": t.name, "score": round(t.score, 4), "lexical_rank": t.lexical_rank,
                 "dense_rank": t.dense_rank}
                for t in self.shown
            ],
            "newly_visible": list(self.newly_visible),
            "run_id": self.run_id,
            "namespace": self.namespace,
            "at": self.at,
        }  # fmt: skip


class RevealLog:
    """An append-only list of `RevealRecord`s, with listeners (the host routes them to the audit log)."""

    def __init__(self) -> None:
        self._records: list[RevealRecord] = []
        self._listeners: list[Callable[[RevealRecord], None]] = []
        self._lock = threading.Lock()

    def append(self, record: RevealRecord) -> None:
        with self._lock:
            self._records.append(record)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(record)

    def subscribe(self, listener: Callable[[RevealRecord], None]) -> Callable[[], None]:
        """Call `listener(record)` for every later record; returns an unsubscribe function."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    @property
    def records(self) -> list[RevealRecord]:
        with self._lock:
            return list(self._records)

    def for_run(self, run_id: str) -> list[RevealRecord]:
        return [r for r in self.records if r.run_id == run_id]

    def __iter__(self) -> Iterator[RevealRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"RevealLog(records={len(self)})"


class ToolVisibility:
    """The tools one run may see and call: core + the search tool + whatever searches revealed.

    Args:
        toolbox: every tool the run could ever call (including the search tool).
        core: names always visible; each must be in the toolbox.
        run: the run whose `visible_tools` holds the state (a new `RunContext` if omitted).
        search_tool: the meta-tool's name, always visible when it is in the toolbox.

    Example:
        ```python
        run = gate.new_run(principal)
        view = ToolVisibility(box, core=["get_order"], run=run)
        view.definitions("anthropic")   # get_order + search_tools
        # ... the model calls search_tools("refund an order") through the gate ...
        view.definitions("anthropic")   # get_order + search_tools + issue_refund
        ```
    """

    def __init__(
        self,
        toolbox: Toolbox,
        *,
        core: Iterable[str] = (),
        run: RunContext | None = None,
        search_tool: str = SEARCH_TOOL_NAME,
    ) -> None:
        self.toolbox = toolbox
        self.run = run if run is not None else RunContext()
        core_names = []
        for name in core:
            tool = toolbox.get(name)
            if tool is None:
                raise UserError(f"core tool {name!r} is not in {toolbox!r}")
            core_names.append(tool.name)
        self.core = frozenset(core_names)
        self.search_tool = search_tool
        base = set(self.core)
        if search_tool in toolbox:
            base.add(search_tool)
        if self.run.visible_tools is None:
            self.run.visible_tools = base
        else:
            self.run.visible_tools.update(base)

    @property
    def visible(self) -> frozenset[str]:
        """Every tool name the model may call now."""
        return frozenset(self.run.visible_tools or ())

    @property
    def revealed(self) -> list[str]:
        """Tools made visible by searches (not core, not the search tool), in toolbox order."""
        visible = self.visible
        return [
            n for n in self.toolbox.names() if n in visible and n not in self.core and n != self.search_tool
        ]

    def reveal(self, names: Iterable[str]) -> list[str]:
        """Make tools visible; returns those that were not visible before (unknown names are skipped)."""
        return reveal_in_run(self.run, self.toolbox, names)

    def is_visible(self, name: str) -> bool:
        tool = self.toolbox.get(name)
        return tool is not None and tool.name in self.visible

    def definitions(self, format: ExportFormat = "anthropic") -> ToolDefinitions:
        """The definitions to send with the next model call: visible tools only, in toolbox order."""
        visible = self.visible
        return self.toolbox.definitions(format, names=[n for n in self.toolbox.names() if n in visible])

    def __repr__(self) -> str:
        return (
            f"ToolVisibility(core={len(self.core)}, revealed={len(self.revealed)}, run={self.run.run_id!r})"
        )


def reveal_in_run(run: RunContext, toolbox: Toolbox | None, names: Iterable[str]) -> list[str]:
    """Add `names` to the run's visible tools; returns the newly visible ones.

    A run without a visibility set (`visible_tools is None`) already sees everything: nothing changes.
    """
    if run.visible_tools is None:
        return []
    new = []
    for name in names:
        tool = toolbox.get(name) if toolbox is not None else None
        canonical = tool.name if tool is not None else (name if toolbox is None else None)
        if canonical is not None and canonical not in run.visible_tools:
            run.visible_tools.add(canonical)
            new.append(canonical)
    return new
