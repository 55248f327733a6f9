"""The console's account table on Postgres: created by the engine's migration, in the store's schema."""

from __future__ import annotations

import os
import uuid

import pytest

from maitre.console.accounts import Account, SQLAccountStore, account_store
from maitre.stores import open_stores

pytestmark = pytest.mark.anyio

PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _reachable() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable: {exc}"
    return None


async def test_accounts_round_trip_on_postgres():
    why = _reachable()
    if why:
        pytest.skip(why)
    import psycopg

    schema = f"maitre_console_{uuid.uuid4().hex[:10]}"
    try:
        async with await open_stores(f"{PG_DSN}?schema={schema}") as stores:
            accounts = account_store(stores)
            assert isinstance(accounts, SQLAccountStore)
            assert await accounts.get("bob") is None
            await accounts.put(
                Account(name="bob", tenant="acme", roles=frozenset({"approver"}), password_hash="h1")
            )
            await accounts.put(Account(name="bob", tenant="acme", roles=frozenset(), password_hash="h2"))
            bob = await accounts.get("bob")
            assert bob is not None and bob.password_hash == "h2" and bob.roles == frozenset()
        with psycopg.connect(PG_DSN) as conn:
            found = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                (schema, "maitre_console_accounts"),
            ).fetchone()
        assert found == (1,)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
