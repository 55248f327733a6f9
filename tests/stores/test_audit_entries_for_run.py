"""`SQLAuditStore.entries_for_run`: one run's entries read by the database, on SQLite and Postgres."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from maitre.audit import AuditEntry, verify
from maitre.stores import SQLiteStores, Stores

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> AsyncIterator[Stores]:
    if request.param == "sqlite":
        opened: Stores = SQLiteStores(os.path.join(tmp_path, "maitre.db"))
    else:
        from maitre.stores.postgres import PostgresStores

        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        opened = await PostgresStores.open(dsn, schema=schema)
    try:
        yield opened
    finally:
        await opened.close()


async def test_only_that_runs_entries_of_that_tenant_in_the_range_in_seq_order(stores):
    plan = [("acme", "r1"), ("acme", "r2"), ("evil", "r1"), ("acme", None), ("acme", "r1"), ("acme", "r1")]
    for n, (tenant, run_id) in enumerate(plan):
        await stores.audit.append(
            AuditEntry(at=float(n), user="u", tenant=tenant, tool="t", decision="allow", run_id=run_id)
        )
    read = stores.audit.entries_for_run
    assert [e.seq for e in await read("r1")] == [1, 3, 5, 6]
    assert [e.seq for e in await read("r1", tenant="acme")] == [1, 5, 6]
    assert [e.seq for e in await read("r1", tenant="acme", since_seq=1, until_seq=5)] == [5]
    assert [e.seq for e in await read("r1", tenant="acme", limit=2)] == [1, 5]
    assert await read("r1", tenant="nobody") == [] and await read("r3") == []
    found = await read("r1", tenant="acme")
    assert found == [e for e in await stores.audit.entries() if e.seq in (1, 5, 6)]  # whole entries
    assert verify(await stores.audit.entries()).ok  # reading changed nothing
