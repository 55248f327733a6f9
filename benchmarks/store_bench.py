"""What the durable governance records cost per write call: idempotency begin + complete + audit append.

Runs the gate's per-call store sequence (begin, complete with a small result, one audit append) on
memory, SQLite (synchronous NORMAL and FULL) and Postgres (if reachable), and prints p50/p99 in µs.
The anchor is the floor SQLite itself sets on this machine: three bare autocommit INSERTs through
`sqlite3` into the same kind of WAL file, with no hashing, no JSON and no async layer.

The `sqlite :memory:` row runs the same SQL concerns on a private in-memory SQLite database: the
price an in-memory *engine* would add over the plain-Python `MemoryStores` (why those stay Python).

Absolute numbers are only indicative on a shared machine; compare the ratios.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

import anyio

from maitre.audit import AuditEntry, digest
from maitre.storage import MemoryStores, SQLiteStores, Stores

__all__ = ["main"]

N = 2000
WARMUP = 200
PG_DSN = os.environ.get("MAITRE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99) - 1]


async def _measure(step: Callable[[int], Awaitable[None]], n: int) -> list[float]:
    for i in range(WARMUP):
        await step(-1 - i)
    samples = []
    for i in range(n):
        start = time.perf_counter_ns()
        await step(i)
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def _gate_step(stores: Stores) -> Callable[[int], Awaitable[None]]:
    args_digest = digest({"order_id": "ORD-00000042", "amount": "12.50", "reason": "duplicate_charge"})
    result = '{"request_id":"RF-1","status":"pending_review","message":"Refund queued"}'

    async def step(i: int) -> None:
        key = f"run-1:{i}"
        now = time.time()
        owned = await stores.idempotency.begin(
            key, tenant="acme", tool="issue_refund", fingerprint=args_digest, now=now
        )
        assert owned is None
        await stores.idempotency.complete(key, result, tenant="acme", now=now)
        await stores.audit.append(
            AuditEntry(
                at=now,
                user="ann",
                tenant="acme",
                tool="issue_refund",
                decision="allow",
                run_id="run-1",
                call_id=f"c{i}",
                call_hash=args_digest,
                arguments=args_digest,
                result_digest=digest(result),
                duration_ms=0.2,
            )
        )

    return step


def _anchor(path: str) -> list[float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
    samples = []
    for i in range(-WARMUP, N):
        start = time.perf_counter_ns()
        for j in range(3):
            conn.execute("INSERT INTO t VALUES (?, ?)", (f"{i}:{j}", "x" * 64))
        if i >= 0:
            samples.append((time.perf_counter_ns() - start) / 1000)
    conn.close()
    return samples


async def _run() -> list[tuple[str, list[float]]]:
    rows: list[tuple[str, list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(("sqlite3 floor: 3 bare INSERTs (anchor)", _anchor(os.path.join(tmp, "anchor.db"))))
        memory = MemoryStores()
        rows.append(("memory: begin+complete+append", await _measure(_gate_step(memory), N)))
        in_memory = SQLiteStores(":memory:")
        rows.append(
            ("sqlite :memory: engine: begin+complete+append", await _measure(_gate_step(in_memory), N))
        )
        await in_memory.close()
        for mode in ("NORMAL", "FULL"):
            stores = SQLiteStores(os.path.join(tmp, f"{mode}.db"), synchronous=mode)  # type: ignore[arg-type]
            rows.append((f"sqlite {mode}: begin+complete+append", await _measure(_gate_step(stores), N)))
            await stores.close()
        try:
            from maitre.storage.postgres import PostgresStores

            schema = f"maitre_bench_{os.getpid()}"
            pg = await PostgresStores.open(PG_DSN, schema=schema)
        except Exception as exc:  # Postgres is optional for this bench
            rows.append((f"postgres: skipped ({type(exc).__name__})", []))
        else:
            try:
                rows.append(("postgres: begin+complete+append", await _measure(_gate_step(pg), N // 4)))
            finally:
                await pg.close()
                import psycopg

                with psycopg.connect(PG_DSN, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return rows


def main() -> None:
    rows = anyio.run(_run)
    anchor_p50 = _percentiles(rows[0][1])[0]
    print(f"{'store sequence per write call':<46} {'p50 µs':>9} {'p99 µs':>9} {'p50 ratio':>10}")
    for name, samples in rows:
        if not samples:
            print(f"{name:<46} {'-':>9} {'-':>9} {'-':>10}")
            continue
        p50, p99 = _percentiles(samples)
        print(f"{name:<46} {p50:>9.1f} {p99:>9.1f} {p50 / anchor_p50:>9.2f}x")


if __name__ == "__main__":
    main()
