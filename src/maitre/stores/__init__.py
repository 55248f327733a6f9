"""Durable state for the gate: the older import path of `maitre.storage`, which it re-exports.

Layer: core. The stores import `maitre.audit` (to seal entries) and the core's data types, never
a door; `maitre.audit` does not import them. See `maitre` for the layer rules.
`PostgresStores` and `RedisRateLimiter` are imported only when asked for, so their drivers stay
optional. See `maitre.storage` for the URL forms `open_stores` takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from maitre.storage import (
    AlreadyExistsError,
    ApprovalRequest,
    ApprovalStateError,
    ApprovalStatus,
    ApprovalStore,
    AuditEntry,
    AuditStore,
    HandleData,
    HandleStore,
    IdempotencyRecord,
    IdempotencyState,
    IdempotencyStateError,
    IdempotencyStore,
    MemoryStores,
    RateLimiter,
    RunState,
    RunStore,
    RunSummary,
    SQLiteStores,
    StoreBusyError,
    StoreError,
    Stores,
    open_stores,
)

if TYPE_CHECKING:
    from maitre.storage.engine.redis import RedisRateLimiter
    from maitre.storage.postgres import PostgresStores

__all__ = [
    "AlreadyExistsError",
    "ApprovalRequest",
    "ApprovalStateError",
    "ApprovalStatus",
    "ApprovalStore",
    "AuditEntry",
    "AuditStore",
    "HandleData",
    "HandleStore",
    "IdempotencyRecord",
    "IdempotencyState",
    "IdempotencyStateError",
    "IdempotencyStore",
    "MemoryStores",
    "PostgresStores",
    "RateLimiter",
    "RedisRateLimiter",
    "RunState",
    "RunStore",
    "RunSummary",
    "SQLiteStores",
    "StoreBusyError",
    "StoreError",
    "Stores",
    "open_stores",
]


def __getattr__(name: str) -> Any:
    # Optional drivers: importing maitre.stores must not require psycopg or redis.
    if name == "PostgresStores":
        from maitre.storage.postgres import PostgresStores

        return PostgresStores
    if name == "RedisRateLimiter":
        from maitre.storage.engine.redis import RedisRateLimiter

        return RedisRateLimiter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
