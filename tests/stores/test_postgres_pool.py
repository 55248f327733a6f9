"""The Postgres engine's pool: a connection killed under it (server restart, proxy idle timeout) is
replaced on the next borrow, so the call after it still succeeds; and the pool obeys its settings."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_a_killed_connection_is_replaced_on_borrow(pg_dsn: str, pg_schema: str) -> None:
    import psycopg

    from maitre.stores.postgres import PostgresStores

    stores = await PostgresStores.open(pg_dsn, schema=pg_schema, pool_size=1)
    stores.db.alive_bypass_s = 0.0  # check on every borrow (the default skips it for 0.5 s after use)
    try:
        await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
        row = await stores.db.fetchone("SELECT pg_backend_pid()")
        assert row is not None
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (row[0],)).fetchone() == (True,)
        # The only pooled connection is dead; the health check on borrow notices and reconnects.
        await stores.runs.save("r2", tenant="acme", status="ok", state_json="{}")
        assert await stores.runs.load("r2") == ("ok", "{}")
        again = await stores.db.fetchone("SELECT pg_backend_pid()")
        assert again is not None and again[0] != row[0]
    finally:
        await stores.close()


async def test_with_the_default_bypass_a_connection_idle_for_a_while_is_checked(
    pg_dsn: str, pg_schema: str
) -> None:
    import anyio
    import psycopg

    from maitre.stores.postgres import PostgresStores

    stores = await PostgresStores.open(pg_dsn, schema=pg_schema, pool_size=1)
    try:
        row = await stores.db.fetchone("SELECT pg_backend_pid()")
        assert row is not None
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        await anyio.sleep(stores.db.alive_bypass_s + 0.1)
        await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
        assert await stores.runs.load("r1") == ("ok", "{}")
    finally:
        await stores.close()


async def test_the_pool_is_bounded_and_recycles_connections(pg_dsn: str, pg_schema: str) -> None:
    from maitre.exceptions import StoreError
    from maitre.storage.engine.postgres import PostgresEngine
    from maitre.stores.postgres import PostgresStores

    stores = await PostgresStores.open(pg_dsn, schema=pg_schema, pool_size=2, max_lifetime_s=3600)
    engine = stores.db
    assert isinstance(engine, PostgresEngine)
    await stores.runs.load("r1")
    pool = engine._pool
    assert pool is not None and pool.max_size == 2 and pool.max_lifetime == 3600
    await stores.close()
    with pytest.raises(StoreError, match="closed"):
        await stores.runs.load("r1")
