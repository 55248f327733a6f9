"""Labelled requests and the tool catalogue, as plain data files.

A labelled request is one JSON object per line: `{"request": "...", "label": "ACT"}` (other keys
are kept in `extra`, e.g. the seed's own router output). The development set the router is tuned
on ships inside the package (`data/dev_requests.jsonl`, 90 requests written for it, 30 per route,
across support, finance, travel, HR, engineering and writing); seed 002's 18 questions are *not*
in it and live in `examples/router/seed002_heldout.jsonl`, held out (and, as `maitre eval`
routing cases, in `examples/router/questions.jsonl`).

The catalogue (`data/catalogue.json`) is a general assistant's 23 tools: two that look up stored
facts (`kind: "stored"`, evidence for RETRIEVE) and 21 that ask a live system or change something
(`kind: "live"`, evidence for ACT), each with maitre's effect (read, write, destructive).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ..search import ToolEntry
from .labels import Route

__all__ = [
    "CatalogueTool",
    "LabelledRequest",
    "RETRIEVAL_TAG",
    "default_catalogue",
    "dev_requests",
    "load_requests",
    "parse_requests",
]

RETRIEVAL_TAG = "retrieval"
"""A maitre tool tagged with this looks up stored facts (memory, a document index): RETRIEVE evidence."""


@dataclass(frozen=True, kw_only=True)
class LabelledRequest:
    """One request and the route it should take."""

    request: str
    label: Route
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CatalogueTool:
    """A tool as routing evidence: what the tool index knows, and which route calling it means."""

    entry: ToolEntry
    kind: Literal["stored", "live"]
    """`stored`: looks up a stored fact (RETRIEVE); `live`: asks a live system or has effects (ACT)."""
    effect: str = "read"
    """maitre's effect (read, write, destructive), for the decision's reason."""

    @property
    def route(self) -> Route:
        return Route.RETRIEVE if self.kind == "stored" else Route.ACT


def parse_requests(lines: Iterable[str], *, source: str = "<lines>") -> list[LabelledRequest]:
    """Labelled requests from JSON Lines text (blank lines and `#` comments skipped)."""
    out: list[LabelledRequest] = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            data = json.loads(line)
            request, label = str(data["request"]), Route(str(data["label"]).upper())
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{source}:{number}: not a labelled request ({exc})") from exc
        rest = {k: v for k, v in data.items() if k not in ("request", "label")}
        out.append(LabelledRequest(request=request, label=label, extra=rest))
    return out


def load_requests(path: str | Path) -> list[LabelledRequest]:
    """Labelled requests from a JSON Lines file."""
    path = Path(path)
    return parse_requests(path.read_text(encoding="utf-8").splitlines(), source=str(path))


def _data_text(name: str) -> str:
    return resources.files("maitre.routing").joinpath("data", name).read_text(encoding="utf-8")


def dev_requests() -> list[LabelledRequest]:
    """The shipped development set (90 requests) the default router is tuned on."""
    return parse_requests(_data_text("dev_requests.jsonl").splitlines(), source="dev_requests.jsonl")


def default_catalogue() -> list[CatalogueTool]:
    """The shipped catalogue of 23 tools (see the module docstring)."""
    data = json.loads(_data_text("catalogue.json"))
    return [
        CatalogueTool(
            entry=ToolEntry.from_mapping(tool),
            kind="stored" if tool["kind"] == "stored" else "live",
            effect=str(tool.get("effect", "read")),
        )
        for tool in data["tools"]
    ]
