"""Read a Google-style docstring: the summary becomes the tool description, `Args:` the parameter docs."""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return (description, {parameter: description}) from a docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for raw in lines:
        line = raw.rstrip()
        match = _SECTION.match(line.strip()) if not raw.startswith((" ", "\t")) else None
        if match:
            section = match.group(1)
            current = None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            stripped = line.strip()
            arg = _ARG.match(stripped)
            indent = len(line) - len(line.lstrip())
            if arg and indent <= 4:
                current = arg.group(1).lstrip("*")
                params[current] = arg.group(3).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
    description = "\n".join(summary).strip()
    description = re.sub(r"\n{3,}", "\n\n", description)
    return description, params
