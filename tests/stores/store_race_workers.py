"""Code run inside spawned worker processes by `test_multiprocess.py` (it must be importable by name).

Every task starts by waiting on a shared barrier, so the N workers of a race run at the same moment;
the idempotency and approval races also meet at the barrier before each key, so every key is
contended by all N processes at once.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

__all__ = ["init_worker", "race"]

_barrier: Any = None


def init_worker(barrier: Any) -> None:
    """Pool initializer: keep the barrier and pay the imports before any race starts."""
    global _barrier
    _barrier = barrier
    import maitre.stores.postgres
    import maitre.stores.sqlite  # noqa: F401


def race(task: tuple[str, str, str | None, str, int, int]) -> list[Any]:
    """Run one worker's side of a race; returns what this worker won."""
    return anyio.run(_race, *task)


async def _open(kind: str, where: str, schema: str | None) -> Any:
    if kind == "sqlite":
        from maitre.stores.sqlite import SQLiteStores

        return SQLiteStores(where)
    from maitre.stores.postgres import PostgresStores

    return await PostgresStores.open(where, schema=schema or "maitre", pool_size=1)


async def _race(kind: str, where: str, schema: str | None, op: str, worker: int, count: int) -> list[Any]:
    from maitre.audit import AuditEntry

    stores = await _open(kind, where, schema)
    won: list[Any] = []
    try:
        _barrier.wait(timeout=60)
        for i in range(count):
            if op == "begin":
                _barrier.wait(timeout=60)
                record = await stores.idempotency.begin(
                    f"key-{i}", tenant="acme", tool="issue_refund", fingerprint=f"w{worker}"
                )
                if record is None:
                    won.append(i)
            elif op == "consume":
                _barrier.wait(timeout=60)
                if await stores.approvals.consume(f"apr-{i}", call_hash="a" * 64):
                    won.append(i)
            elif op == "append":
                sealed = await stores.audit.append(
                    AuditEntry(
                        at=time.time(),
                        user=f"w{worker}",
                        tenant="acme",
                        tool="t",
                        decision="allow",
                        call_id=f"w{worker}-{i}",
                    )
                )
                won.append(sealed.seq)
            else:
                raise ValueError(op)
    finally:
        await stores.close()
    return won
