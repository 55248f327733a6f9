"""Backends for the store contract suite: memory, SQLite (a tmp file), Postgres and Redis (real servers).

Postgres: every test gets its own schema named `<session prefix>_<n>`; all of them are dropped at the
end of the session. Redis: every test gets its own key prefix, deleted afterwards. When a server is not
reachable its tests are skipped, saying so.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from maitre.stores import MemoryStores, SQLiteStores, Stores
from maitre.stores.base import RateLimiter

PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("MAITRE_TEST_REDIS", "redis://127.0.0.1:6379/0")

_counter = itertools.count()


def _postgres_error() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable: {exc}"
    return None


def _redis_error() -> str | None:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:
        return f"Redis at {REDIS_URL} is not reachable: {exc}"
    return None


@pytest.fixture(scope="session")
def pg_prefix() -> Iterator[str]:
    """A schema-name prefix unique to this test session; every schema using it is dropped at the end."""
    error = _postgres_error()
    if error:
        pytest.skip(error)
    prefix = f"maitre_test_{uuid.uuid4().hex[:10]}"
    yield prefix
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (prefix + "%",)
        ).fetchall()
        for (name,) in rows:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture(scope="session")
def pg_dsn(pg_prefix: str) -> str:
    """The DSN of the test server (skips when it is not reachable)."""
    return PG_DSN


@pytest.fixture
def pg_schema(pg_prefix: str) -> str:
    """A fresh schema name for one test."""
    return f"{pg_prefix}_{next(_counter)}"


@pytest.fixture(scope="session")
def redis_url() -> str:
    error = _redis_error()
    if error:
        pytest.skip(error)
    return REDIS_URL


BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


async def _open(kind: str, request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Stores:
    if kind == "memory":
        return MemoryStores()
    if kind == "sqlite":
        return SQLiteStores(os.path.join(tmp_path, "maitre.db"))
    from maitre.stores.postgres import PostgresStores

    return await PostgresStores.open(PG_DSN, schema=request.getfixturevalue("pg_schema"))


@pytest.fixture(params=BACKENDS)
async def stores(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> AsyncIterator[Stores]:
    """Every store of one backend, empty."""
    opened = await _open(request.param, request, tmp_path)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(params=[*BACKENDS, pytest.param("redis", marks=pytest.mark.redis)])
async def limiter(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> AsyncIterator[RateLimiter]:
    """A rate limiter of each backend, with no buckets."""
    if request.param != "redis":
        opened = await _open(request.param, request, tmp_path)
        try:
            yield opened.rate_limits
        finally:
            await opened.close()
        return
    from maitre.stores.redis import RedisRateLimiter

    url = request.getfixturevalue("redis_url")
    prefix = f"maitre-test:{uuid.uuid4().hex}:"
    redis_limiter = RedisRateLimiter(url, prefix=prefix)
    try:
        yield redis_limiter
    finally:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(url)
        keys = [key async for key in client.scan_iter(match=prefix + "*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
        await redis_limiter.close()
