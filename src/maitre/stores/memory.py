"""In-process stores: now `maitre.storage.memory`, re-exported here."""

from __future__ import annotations

from maitre.storage.memory import (
    MemoryApprovalStore,
    MemoryAuditStore,
    MemoryHandleStore,
    MemoryIdempotencyStore,
    MemoryRateLimiter,
    MemoryRunStore,
    MemoryStores,
)

__all__ = [
    "MemoryApprovalStore",
    "MemoryAuditStore",
    "MemoryHandleStore",
    "MemoryIdempotencyStore",
    "MemoryRateLimiter",
    "MemoryRunStore",
    "MemoryStores",
]
