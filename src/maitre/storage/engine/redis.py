"""A Redis token bucket: rate limits shared by many maitre processes without touching the database.

The whole read-refill-spend step runs as one Lua script, which Redis executes atomically (no other
command runs in between), so concurrent processes can never spend the same token twice. The bucket is
a hash `{tokens, ts}` under `<prefix><key>`; it expires once it would be full again anyway (with a
floor of a minute), so idle principals cost no memory.

`now` is passed in by the caller, as for every other backend, so the contract tests can drive time.
Callers on different hosts should have synchronised clocks; a timestamp older than the bucket's
refills nothing rather than draining it.
"""

from __future__ import annotations

import math
from typing import Any

from maitre._extras import MissingExtraError, missing_modules
from maitre.storage.base import check_bucket_args, now_or

try:
    from redis.asyncio import Redis
except ImportError:  # pragma: no cover - exercised only without the extra (tests/packaging)
    if missing_modules("redis"):
        raise MissingExtraError("redis", "The Redis rate limiter", missing_modules("redis")) from None
    raise

__all__ = ["RedisRateLimiter"]

_TOKEN_BUCKET = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local ttl_ms = tonumber(ARGV[5])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
tokens = math.min(burst, tokens + elapsed * rate)
if now > ts then ts = now end
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
else
  wait = (cost - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', ts))
redis.call('PEXPIRE', KEYS[1], ttl_ms)
return string.format('%.17g', wait)
"""


class RedisRateLimiter:
    """Token buckets in Redis, spent atomically by a Lua script.

    Args:
        url: a `redis://` URL.
        prefix: prepended to every bucket key (one prefix per deployment or test run).
        client: an existing `redis.asyncio.Redis` to use instead of `url` (not closed by `close()`).

    Example:
        >>> limiter = RedisRateLimiter("redis://127.0.0.1:6379/0", prefix="maitre:rl:")
        >>> await limiter.acquire("ann:issue_refund", rate_per_s=1, burst=5)
        0.0
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "maitre:rl:",
        client: Redis | None = None,
    ) -> None:
        self.prefix = prefix
        self._owned = client is None
        self._client: Redis = client if client is not None else Redis.from_url(url)
        self._script: Any = self._client.register_script(_TOKEN_BUCKET)

    async def acquire(
        self, key: str, *, rate_per_s: float, burst: int, cost: float = 1, now: float | None = None
    ) -> float:
        check_bucket_args(rate_per_s, burst, cost)
        ttl_ms = int(max(60.0, 2 * burst / rate_per_s) * 1000)
        wait = await self._script(
            keys=[self.prefix + key],
            args=[repr(float(rate_per_s)), repr(float(burst)), repr(float(cost)), repr(now_or(now)), ttl_ms],
        )
        seconds = float(wait)
        return 0.0 if seconds <= 0 or math.isnan(seconds) else seconds

    async def close(self) -> None:
        """Close the client if this limiter created it."""
        if self._owned:
            await self._client.aclose()
