"""Token buckets in the `rate_limits` table: one atomic upsert per `acquire`, for every SQL engine.

The refill is computed in SQL, in the statement that writes it: every SET expression reads the old
row, which the upsert holds locked (Postgres row lock, SQLite write lock), so two processes can never
spend the same token. A clock that goes backwards refills nothing. (Redis has its own limiter, a Lua
script: `maitre.storage.engine.redis`.)
"""

from __future__ import annotations

from maitre.storage._rows import bucket_wait
from maitre.storage.base import StoreError, check_bucket_args, now_or
from maitre.storage.engine.base import Engine

__all__ = ["SQLRateLimiter"]

_REFILL = "{least}(?, b.tokens + {greatest}(0.0, ? - b.updated_at) * ?)"
_BUCKET = (
    "INSERT INTO {s}.rate_limits AS b (bucket_key, tokens, updated_at, allowed) VALUES (?, ? - ?, ?, TRUE) "
    f"ON CONFLICT (bucket_key) DO UPDATE SET tokens = CASE WHEN {_REFILL} >= ? THEN {_REFILL} - ? "
    f"ELSE {_REFILL} END, allowed = {_REFILL} >= ?, updated_at = {{greatest}}(b.updated_at, ?) "
    "RETURNING tokens, allowed"
)


class SQLRateLimiter:
    """`RateLimiter` over an engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def acquire(
        self, key: str, *, rate_per_s: float, burst: int, cost: float = 1, now: float | None = None
    ) -> float:
        check_bucket_args(rate_per_s, burst, cost)
        at, full, spend, rate = now_or(now), float(burst), float(cost), float(rate_per_s)
        refill = (full, at, rate)
        params = (key, full, spend, at, *refill, spend, *refill, spend, *refill, *refill, spend, at)
        row = await self._engine.fetchone(_BUCKET, params)
        if row is None:  # RETURNING always yields the upserted row
            raise StoreError(f"rate limit upsert for {key!r} returned nothing")
        tokens, allowed = row
        return bucket_wait(tokens, allowed, rate_per_s=rate_per_s, cost=cost)
