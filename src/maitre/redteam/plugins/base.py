"""The plugin shape: a name, the family it belongs to, what it checks, and one coroutine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from ..attack import Attack
from ..cases import Case

__all__ = ["Family", "Plugin", "RunFn"]

Family = Literal["seed003", "owasp-mcp"]
RunFn = Callable[[Attack], Awaitable[list[Case]]]


@dataclass(frozen=True, kw_only=True)
class Plugin:
    name: str
    family: Family
    """`seed003` (seed 003, exercise C) or `owasp-mcp` (the OWASP MCP Top 10 families)."""
    summary: str
    """What it attacks and how it decides, in one line (`maitre redteam --help` lists them)."""
    run: RunFn
