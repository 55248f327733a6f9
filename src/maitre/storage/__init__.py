"""The storage layer: one engine per backend, and each of the gate's concerns written once over it.

Concerns: approvals, idempotency, audit, result handles, runs, rate limits (and MCP tasks,
`maitre.storage.tasks`). Layout:

- `base`: the records, one Protocol per concern, the errors (the guarantees every backend keeps);
- `engine/`: `base` (the `Engine` seam: unit of work, dialect, schema versions), `sqlite`,
  `postgres` (`psycopg_pool`), `redis` (rate limits), `migrations` (forward steps, written once);
- `approvals`, `idempotency`, `audit`, `handles`, `runs`, `rate_limits`, `tasks`: each concern once,
  in portable SQL over any engine; `schema`: the gate's tables as versioned migrations;
- `memory`: the in-process stores, plain Python (no engine; see its docstring for why);
- `sqlite`, `postgres`: the `Stores` bundles on one file / one schema;
- `claims`: leases on runs for resume workers (`claim_store(stores)`), beside the gate's tables.

`maitre.stores` is the older import path and re-exports this package.

`open_stores(url)` picks the backend from a URL:

| url                                     | backend                                              |
|-----------------------------------------|------------------------------------------------------|
| `memory://`                             | `MemoryStores` (one process, nothing persisted)      |
| `/path/to/maitre.db`, `maitre.db`       | `SQLiteStores` (the default: one file, WAL)          |
| `sqlite:///abs/path.db`                 | `SQLiteStores("/abs/path.db")` (file-URL style)      |
| `sqlite://rel/path.db?synchronous=FULL` | `SQLiteStores("rel/path.db", synchronous="FULL")`    |
| `postgresql://user@host/db?schema=x`    | `PostgresStores` in schema `x` (default `maitre`)    |

`rate_limits_url="redis://host:6379/0"` swaps the rate limiter for `RedisRateLimiter`.

Personal tools' data (`Tool.personal`) is sealed under per-subject keys kept in the same database
(`subject_keys`: AES-GCM, wrapped under a master secret from `secret=`, `$MAITRE_GATE_SECRET`, memory's
`$MAITRE_MEMORY_SECRET`, or a 0600 key file beside a SQLite database); `await
stores.erase_subject(tenant, user)` crypto-shreds everything the stores hold for that user.

Layer: core. The stores import `maitre.audit` (to seal entries) and the core's data types, never
a door (`agent`, `models`, `mcp`, `memory`, `search`, `cli`) nor the gate. The dead-owner rule
(`owners`) lives here, so the gate's idempotency and the resume worker's run claims share it;
`maitre.audit` does not import them. See `maitre` for the layer rules. The Postgres and Redis modules are imported only
when asked for, so their drivers stay optional.

From synchronous code (the CLI), run the whole job in one `anyio.run`:

    async def main() -> None:
        async with await open_stores(path) as stores:
            print(await stores.approvals.list(status="pending"))

    anyio.run(main)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from maitre.storage.base import (
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
from maitre.storage.claims import Claim, ClaimStore, claim_store
from maitre.storage.engine.sqlite import Synchronous
from maitre.storage.memory import MemoryStores
from maitre.storage.sqlite import SQLiteStores

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
    "Claim",
    "ClaimStore",
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
    "claim_store",
    "open_stores",
]


def __getattr__(name: str) -> Any:
    # Optional drivers: importing maitre.storage must not require psycopg or redis.
    if name == "PostgresStores":
        from maitre.storage.postgres import PostgresStores

        return PostgresStores
    if name == "RedisRateLimiter":
        from maitre.storage.engine.redis import RedisRateLimiter

        return RedisRateLimiter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def open_stores(
    url: str,
    *,
    schema: str | None = None,
    rate_limits_url: str | None = None,
    rate_limits_prefix: str = "maitre:rl:",
    secret: bytes | str | None = None,
) -> Stores:
    """Open every store from one URL (see the module docstring for the forms).

    Args:
        url: where the stores live.
        schema: Postgres schema (overrides `?schema=` in the URL; default `maitre`).
        rate_limits_url: a `redis://` URL to keep rate limits in Redis instead.
        rate_limits_prefix: key prefix for the Redis buckets.
        secret: the master secret personal tools' data is sealed under (default: the environment,
            else a key file beside a SQLite database; see `maitre.storage.subject_keys`).

    Example:
        >>> stores = await open_stores("sqlite:///var/lib/maitre/maitre.db")
        >>> await stores.close()
    """
    stores = await _open_backend(url, schema=schema, secret=secret)
    if rate_limits_url is not None:
        if not rate_limits_url.startswith(("redis://", "rediss://", "unix://")):
            await stores.close()
            raise ValueError(f"rate_limits_url must be a redis:// URL, not {rate_limits_url!r}")
        from maitre.storage.engine.redis import RedisRateLimiter

        limiter = RedisRateLimiter(rate_limits_url, prefix=rate_limits_prefix)
        stores.rate_limits = limiter
        stores.closers.append(limiter.close)
    return stores


async def _open_backend(url: str, *, schema: str | None, secret: bytes | str | None = None) -> Stores:
    if url in ("memory://", "memory:", ":memory:"):
        return MemoryStores(secret=secret)
    if url.startswith(("postgresql://", "postgres://")):
        from maitre.storage.postgres import PostgresStores

        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        url_schema = next((value for key, value in query if key == "schema"), None)
        dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
        return await PostgresStores.open(dsn, schema=schema or url_schema or "maitre", secret=secret)
    if url.startswith("sqlite://"):
        parts = urlsplit(url)
        path = parts.netloc + parts.path
        options = dict(parse_qsl(parts.query))
        if not path:
            raise ValueError(f"no file path in {url!r}: use sqlite:///abs/path.db or sqlite://rel/path.db")
        synchronous = options.get("synchronous", "NORMAL").upper()
        return SQLiteStores(path, synchronous=cast(Synchronous, synchronous), secret=secret)
    if "://" in url:
        raise ValueError(
            f"unknown store URL {url!r}: use memory://, a file path, sqlite:///path.db or postgresql://..."
        )
    return SQLiteStores(url, secret=secret)
