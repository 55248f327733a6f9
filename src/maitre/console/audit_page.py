"""(being written: see issue 13)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .web import Console

__all__ = ["routes"]


def routes(console: Console) -> list[Any]:
    return []
