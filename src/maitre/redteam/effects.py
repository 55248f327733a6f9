"""The side channel: a JSON Lines file the target's tools append to each time they act.

A server's answer can lie (a "refused" that ran anyway, a "done" that did nothing), so where the
red team controls the target - its own examples, a server you run for the test - each acting tool
writes one line `{"tool": NAME, "arguments": {...}}` to a file named by `$MAITRE_REDTEAM_EFFECTS`,
and `maitre redteam --effects FILE` reads what was appended while each attack ran. Attacks run one
at a time, so the lines written during one attack are that attack's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["EFFECTS_ENV", "EffectLog"]

EFFECTS_ENV = "MAITRE_REDTEAM_EFFECTS"
"""The environment variable a target's tools read to find the effects file."""


class EffectLog:
    """Reads what a target appended to its effects file since a mark."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def mark(self) -> int:
        """The file's current end (0 when it does not exist yet)."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, mark: int) -> list[dict[str, Any]]:
        """The records appended after `mark` (a line that is not JSON is kept as text)."""
        try:
            with self.path.open("rb") as file:
                file.seek(mark)
                data = file.read()
        except FileNotFoundError:
            return []
        records: list[dict[str, Any]] = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                value = {"line": line}
            records.append(value if isinstance(value, dict) else {"value": value})
        return records
