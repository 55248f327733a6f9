"""The Postgres stores: now `maitre.storage.postgres` (the bundle) over `maitre.storage.engine.postgres`.

The per-concern names of the earlier backend stay as aliases of the SQL concerns, which are one
implementation for every engine. Importing this module needs psycopg 3 and psycopg-pool.
"""

from __future__ import annotations

from maitre.storage.approvals import SQLApprovalStore as PostgresApprovalStore
from maitre.storage.audit import SQLAuditStore as PostgresAuditStore
from maitre.storage.engine.postgres import PostgresEngine as PostgresDatabase
from maitre.storage.handles import SQLHandleStore as PostgresHandleStore
from maitre.storage.idempotency import SQLIdempotencyStore as PostgresIdempotencyStore
from maitre.storage.postgres import PostgresStores
from maitre.storage.rate_limits import SQLRateLimiter as PostgresRateLimiter
from maitre.storage.runs import SQLRunStore as PostgresRunStore
from maitre.storage.schema import SCHEMA_VERSION

__all__ = [
    "PostgresApprovalStore",
    "PostgresAuditStore",
    "PostgresDatabase",
    "PostgresHandleStore",
    "PostgresIdempotencyStore",
    "PostgresRateLimiter",
    "PostgresRunStore",
    "PostgresStores",
    "SCHEMA_VERSION",
]
