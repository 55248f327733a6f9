"""Progress of long work (index builds, re-embedding memory, benchmarks): a callback, and a bar.

The library reports through a plain callback, `progress(done, total)`, that any caller can pass
(`ToolIndex.add_many(tools, progress=...)`, `MemoryStore.reindex(progress=...)`); it never draws
anything itself. What draws is `progress_bar`, a rich progress bar on **stderr** for the command
line and scripts: stdout stays the program's own (JSON output, the MCP stdio transport), and on a
stderr that is not a terminal (CI logs, a pipe) the bar is not drawn at all.

Example:
    >>> with progress_bar("Embedding tools") as progress:
    ...     index.add_many(tools, progress=progress)
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Progress", "progress_bar", "report"]

Progress = Callable[[int, int], None]
"""`progress(done, total)`: called as work advances, `done` from 0 up to `total`."""

log = logging.getLogger(__name__)


def report(progress: Progress | None, done: int, total: int) -> None:
    """Call `progress(done, total)` if given; a callback that raises is logged once, not fatal:
    a broken display must never abort the work it displays."""
    if progress is None:
        return
    try:
        progress(done, total)
    except Exception:
        log.warning("a progress callback raised; the work goes on", exc_info=True)


@contextmanager
def progress_bar(description: str, *, enabled: bool | None = None) -> Iterator[Progress]:
    """A rich progress bar on stderr, as a `Progress` callback.

    Args:
        description: what is being done ("Embedding 2,000 tools").
        enabled: draw it (default: only when stderr is a terminal).
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield _silent
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    with Bar(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def _silent(done: int, total: int) -> None:
    """The callback of a bar that is not drawn."""
