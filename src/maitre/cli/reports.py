"""What `maitre eval` and `maitre redteam` do with a finished report: write its files, and exit 1
naming every threshold it missed (the exit status CI reads; usage errors are 2, elsewhere)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .app import err

if TYPE_CHECKING:
    from ..evals.thresholds import ThresholdResult

__all__ = ["exit_if_missed", "write_report"]


def write_report(path: Path, text: str) -> None:
    """Write one report file (its folder made if needed) and say so on stderr."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    err.print(f"wrote {path}", highlight=False, markup=False)


def exit_if_missed(outcomes: Sequence[ThresholdResult]) -> None:
    """Exit 1 with one stderr line naming each missed threshold; return when all were met."""
    missed = [o for o in outcomes if not o.ok]
    if not missed:
        return
    err.print(
        "threshold missed: "
        + ", ".join(f"{o.metric} {o.actual} (needs {o.threshold.op} {o.threshold.value:g})" for o in missed),
        highlight=False,
        markup=False,
    )
    sys.stderr.flush()
    raise typer.Exit(1)
