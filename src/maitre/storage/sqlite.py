"""The default durable backend: every store in ONE SQLite file, safe for several processes.

The engine (`maitre.storage.engine.sqlite`) says why: WAL, `synchronous=NORMAL`, busy handling that
never blocks the event loop. Each concern is the SQL one, shared with Postgres.
"""

from __future__ import annotations

import os

from maitre.storage.approvals import SQLApprovalStore
from maitre.storage.audit import SQLAuditStore
from maitre.storage.base import Stores
from maitre.storage.engine.sqlite import SQLiteEngine, Synchronous
from maitre.storage.handles import SQLHandleStore
from maitre.storage.idempotency import HASH_V1_SQL, SQLIdempotencyStore
from maitre.storage.rate_limits import SQLRateLimiter
from maitre.storage.runs import SQLRunStore
from maitre.storage.schema import GATE_SCHEMA, HASH_V1_MARK
from maitre.storage.subject_keys import SQLSubjectKeys, master_secret

__all__ = ["SQLiteStores"]


class SQLiteStores(Stores):
    """Every store in one SQLite file (WAL; safe for several processes on one machine).

    Opening creates or migrates the file (see `maitre.storage.schema`); a file written by a newer
    maitre, or one that is not a maitre database, is refused with a `StoreError`. `secret` /
    `secret_file` is the master secret personal tools' data is sealed under (default: the
    environment, else a key file `<path>.key` beside the database made on first use; see
    `maitre.storage.subject_keys`).

    Example:
        >>> stores = SQLiteStores("maitre.db")
        >>> await stores.audit.append(AuditEntry(at=time.time(), user="ann", tenant="t", tool="x",
        ...                                      decision="allow"))
        >>> await stores.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_s: float = 10.0,
        secret: bytes | str | None = None,
        secret_file: str | os.PathLike[str] | None = None,
    ) -> None:
        engine = SQLiteEngine(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
        try:
            engine.migrate_now(GATE_SCHEMA)
        except BaseException:
            engine.close_now()
            raise
        self.db = engine
        """The engine (its `path` and `conn`, for tools and tests that look at the file)."""
        idempotency = SQLIdempotencyStore(engine)
        idempotency.legacy_hashes = engine.fetchone_now(HASH_V1_SQL, (HASH_V1_MARK,)) is not None
        keys = SQLSubjectKeys(engine, master_secret(secret, secret_file, database=engine.path))
        super().__init__(
            approvals=SQLApprovalStore(engine, keys),
            idempotency=idempotency,
            audit=SQLAuditStore(engine),
            handles=SQLHandleStore(engine),
            runs=SQLRunStore(engine, keys),
            rate_limits=SQLRateLimiter(engine),
            backend="sqlite",
            closers=[engine.close, keys.close],
            subject_keys=keys,
        )

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout_s: float = 10.0,
        secret: bytes | str | None = None,
        secret_file: str | os.PathLike[str] | None = None,
    ) -> SQLiteStores:
        """Same as the constructor (opening a file is quick); here for symmetry with Postgres."""
        return cls(
            path,
            synchronous=synchronous,
            busy_timeout_s=busy_timeout_s,
            secret=secret,
            secret_file=secret_file,
        )
