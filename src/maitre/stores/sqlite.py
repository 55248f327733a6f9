"""The SQLite stores: now `maitre.storage.sqlite` (the bundle) over `maitre.storage.engine.sqlite`.

The per-concern names of the earlier backend stay as aliases of the SQL concerns, which are one
implementation for every engine.
"""

from __future__ import annotations

from maitre.storage.approvals import SQLApprovalStore as SQLiteApprovalStore
from maitre.storage.audit import SQLAuditStore as SQLiteAuditStore
from maitre.storage.engine.sqlite import SQLiteEngine as SQLiteDatabase
from maitre.storage.engine.sqlite import Synchronous
from maitre.storage.handles import SQLHandleStore as SQLiteHandleStore
from maitre.storage.idempotency import SQLIdempotencyStore as SQLiteIdempotencyStore
from maitre.storage.rate_limits import SQLRateLimiter as SQLiteRateLimiter
from maitre.storage.runs import SQLRunStore as SQLiteRunStore
from maitre.storage.schema import SCHEMA_VERSION
from maitre.storage.sqlite import SQLiteStores

__all__ = [
    "SCHEMA_VERSION",
    "SQLiteApprovalStore",
    "SQLiteAuditStore",
    "SQLiteDatabase",
    "SQLiteHandleStore",
    "SQLiteIdempotencyStore",
    "SQLiteRateLimiter",
    "SQLiteRunStore",
    "SQLiteStores",
    "Synchronous",
]
