"""The Redis rate limiter: now `maitre.storage.engine.redis`, re-exported here."""

from __future__ import annotations

from maitre.storage.engine.redis import RedisRateLimiter

__all__ = ["RedisRateLimiter"]
