"""Durable state for the gate: approvals, idempotency, audit, result handles, runs and rate limits.

`open_stores(url)` picks the backend from a URL:

| url                                     | backend                                              |
|-----------------------------------------|------------------------------------------------------|
| `memory://`                             | `MemoryStores` (one process, nothing persisted)      |
| `/path/to/maitre.db`, `maitre.db`       | `SQLiteStores` (the default: one file, WAL)          |
| `sqlite:///abs/path.db`                 | `SQLiteStores("/abs/path.db")` (file-URL style)      |
| `sqlite://rel/path.db?synchronous=FULL` | `SQLiteStores("rel/path.db", synchronous="FULL")`    |
| `postgresql://user@host/db?schema=x`    | `PostgresStores` in schema `x` (default `maitre`)    |

`rate_limits_url="redis://host:6379/0"` swaps the rate limiter for `RedisRateLimiter`.
The Postgres and Redis modules are imported only when asked for, so their drivers stay optional.

From synchronous code (the CLI), run the whole job in one `anyio.run`:

    async def main() -> None:
        async with await open_stores(path) as stores:
            print(await stores.approvals.list(status="pending"))

    anyio.run(main)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from maitre.stores.base import (
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
    RateLimiter,
    RunState,
    RunStore,
    RunSummary,
    StoreBusyError,
    StoreError,
    Stores,
)
from maitre.stores.memory import MemoryStores
from maitre.stores.sqlite import SQLiteStores

if TYPE_CHECKING:
    from maitre.stores.postgres import PostgresStores
    from maitre.stores.redis import RedisRateLimiter

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
        from maitre.stores.postgres import PostgresStores

        return PostgresStores
    if name == "RedisRateLimiter":
        from maitre.stores.redis import RedisRateLimiter

        return RedisRateLimiter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def open_stores(
    url: str,
    *,
    schema: str | None = None,
    rate_limits_url: str | None = None,
    rate_limits_prefix: str = "maitre:rl:",
) -> Stores:
    """Open every store from one URL (see the module docstring for the forms).

    Args:
        url: where the stores live.
        schema: Postgres schema (overrides `?schema=` in the URL; default `maitre`).
        rate_limits_url: a `redis://` URL to keep rate limits in Redis instead.
        rate_limits_prefix: key prefix for the Redis buckets.

    Example:
        >>> stores = await open_stores("sqlite:///var/lib/maitre/maitre.db")
        >>> await stores.close()
    """
    stores = await _open_backend(url, schema=schema)
    if rate_limits_url is not None:
        if not rate_limits_url.startswith(("redis://", "rediss://", "unix://")):
            await stores.close()
            raise ValueError(f"rate_limits_url must be a redis:// URL, not {rate_limits_url!r}")
        from maitre.stores.redis import RedisRateLimiter

        limiter = RedisRateLimiter(rate_limits_url, prefix=rate_limits_prefix)
        stores.rate_limits = limiter
        stores.closers.append(limiter.close)
    return stores


async def _open_backend(url: str, *, schema: str | None) -> Stores:
    if url in ("memory://", "memory:", ":memory:"):
        return MemoryStores()
    if url.startswith(("postgresql://", "postgres://")):
        from maitre.stores.postgres import PostgresStores

        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        url_schema = next((value for key, value in query if key == "schema"), None)
        dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
        return await PostgresStores.open(dsn, schema=schema or url_schema or "maitre")
    if url.startswith("sqlite://"):
        parts = urlsplit(url)
        path = parts.netloc + parts.path
        options = dict(parse_qsl(parts.query))
        if not path:
            raise ValueError(f"no file path in {url!r}: use sqlite:///abs/path.db or sqlite://rel/path.db")
        synchronous = options.get("synchronous", "NORMAL").upper()
        return SQLiteStores(path, synchronous=synchronous)  # type: ignore[arg-type]
    if "://" in url:
        raise ValueError(
            f"unknown store URL {url!r}: use memory://, a file path, sqlite:///path.db or postgresql://..."
        )
    return SQLiteStores(url)
