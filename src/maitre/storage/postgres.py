"""PostgreSQL stores: for many maitre processes on many hosts sharing one database.

The engine (`maitre.storage.engine.postgres`) holds the `psycopg_pool` pool and the schema; each
concern is the SQL one, shared with SQLite.
"""

from __future__ import annotations

import os

from maitre.storage.approvals import SQLApprovalStore
from maitre.storage.audit import SQLAuditStore
from maitre.storage.base import Stores
from maitre.storage.engine.postgres import PostgresEngine
from maitre.storage.handles import SQLHandleStore
from maitre.storage.idempotency import SQLIdempotencyStore
from maitre.storage.rate_limits import SQLRateLimiter
from maitre.storage.runs import SQLRunStore
from maitre.storage.schema import GATE_SCHEMA
from maitre.storage.subject_keys import SQLSubjectKeys, master_secret

__all__ = ["PostgresStores"]


class PostgresStores(Stores):
    """Every store in one Postgres schema, shared by any number of processes and hosts.

    The constructor does no I/O (the schema is created or migrated by the first operation); prefer
    `await PostgresStores.open(dsn)`, which connects and migrates up front so a wrong DSN fails at
    start-up.

    Example:
        >>> stores = await PostgresStores.open("postgresql://postgres@127.0.0.1:5432/test", schema="maitre")
        >>> await stores.runs.save("r1", tenant="t", status="paused", state_json="{}")
        >>> await stores.close()
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "maitre",
        pool_size: int = 4,
        max_lifetime_s: float = 1800.0,
        secret: bytes | str | None = None,
        secret_file: str | os.PathLike[str] | None = None,
    ) -> None:
        engine = PostgresEngine(dsn, schema=schema, pool_size=pool_size, max_lifetime_s=max_lifetime_s)
        engine.require(GATE_SCHEMA)
        self.db = engine
        """The engine (its `dsn`, `schema` and `q()`, for tools and tests)."""
        # Until `open` (or a caller) has read the schema table, keys are also looked up in version 1.
        self._sql_idempotency = idempotency = SQLIdempotencyStore(engine)
        keys = SQLSubjectKeys(engine, master_secret(secret, secret_file))
        super().__init__(
            approvals=SQLApprovalStore(engine, keys),
            idempotency=idempotency,
            audit=SQLAuditStore(engine),
            handles=SQLHandleStore(engine),
            runs=SQLRunStore(engine, keys),
            rate_limits=SQLRateLimiter(engine),
            backend="postgres",
            closers=[engine.close],
            subject_keys=keys,
        )

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        schema: str = "maitre",
        pool_size: int = 4,
        max_lifetime_s: float = 1800.0,
        secret: bytes | str | None = None,
        secret_file: str | os.PathLike[str] | None = None,
    ) -> PostgresStores:
        """Connect, create or migrate the schema, and return the stores. `secret` / `secret_file`
        (or `$MAITRE_GATE_SECRET`): the master secret personal tools' data is sealed under, needed
        only once a personal tool is called (`maitre.storage.subject_keys`)."""
        stores = cls(
            dsn,
            schema=schema,
            pool_size=pool_size,
            max_lifetime_s=max_lifetime_s,
            secret=secret,
            secret_file=secret_file,
        )
        try:
            await stores.db.migrate(GATE_SCHEMA)
            await stores._sql_idempotency.load_hash_generation()
        except BaseException:
            await stores.close()
            raise
        return stores
