"""Erasing freed bytes after a deletion, in the background (moved to `maitre.storage.erasure`).

Memory and the gate's stores share one `BackgroundEraser` (the gate erases a subject's keys with it
after a forget); this name stays for the callers that had it.
"""

from __future__ import annotations

from ..storage.erasure import BackgroundEraser

__all__ = ["BackgroundEraser"]
