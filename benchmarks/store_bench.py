"""What the durable governance records cost per write call: idempotency begin + complete + audit append.

Runs the gate's per-call store sequence (begin, complete with a small result, one audit append) on
memory, SQLite (synchronous NORMAL and FULL) and Postgres (if reachable), and prints p50/p99 in µs.
The anchor is the floor SQLite itself sets on this machine: three bare autocommit INSERTs through
`sqlite3` into the same kind of WAL file, with no hashing, no JSON and no async layer.

The `sqlite :memory:` row runs the same SQL concerns on a private in-memory SQLite database: the
price an in-memory *engine* would add over the plain-Python `MemoryStores` (why those stay Python).

The second table compares the audit append itself, old path against new, on SQLite and Postgres
in the same run: `locked` is the old path (lock, head read and insert in one transaction, kept as
`SQLAuditStore(engine, known_head=False)`), `known head` seals after the head the store last wrote
and inserts with one guarded statement. Two sequences: a bare `append` (a read or a refusal) and a
write's `begin` + `append_after(entry, complete_in)` (the gate's path for a write with a key). The two
variants run in alternating blocks on one database, so load on the machine hits both alike; p50/p99
are wall µs per sequence, CPU is this process's CPU µs per sequence, and the ratio is new / old.

Absolute numbers are only indicative on a shared machine; compare the ratios.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from maitre.audit import AuditEntry, digest
from maitre.storage import MemoryStores, SQLiteStores, Stores
from maitre.storage.audit import SQLAuditStore
from maitre.storage.engine.base import Tx

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
            stores = SQLiteStores(os.path.join(tmp, f"{mode}.db"), synchronous=mode)
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


AB_BLOCK = 50
AB_ROUNDS = 10


def _audit_entry(i: int, args_digest: str) -> AuditEntry:
    return AuditEntry(
        at=time.time(),
        user="ann",
        tenant="acme",
        tool="issue_refund",
        decision="allow",
        run_id="run-1",
        call_id=f"c{i}",
        call_hash=args_digest,
        arguments=args_digest,
        duration_ms=0.2,
    )


def _append_step(audit: SQLAuditStore) -> Callable[[int], Awaitable[None]]:
    args_digest = digest({"order_id": "ORD-00000042"})

    async def step(i: int) -> None:
        await audit.append(_audit_entry(i, args_digest))

    return step


def _write_step(stores: Stores, audit: SQLAuditStore, tag: str) -> Callable[[int], Awaitable[None]]:
    args_digest = digest({"order_id": "ORD-00000042", "amount": "12.50"})
    result = '{"request_id":"RF-1","status":"pending_review"}'
    idem: Any = stores.idempotency

    async def step(i: int) -> None:
        key, now = f"{tag}:{i}", time.time()
        assert (
            await idem.begin(key, tenant="acme", tool="issue_refund", fingerprint=args_digest, now=now)
            is None
        )

        async def complete(tx: Tx) -> None:
            await idem.complete_in(tx, key, result, tenant="acme", now=now)

        await audit.append_after(_audit_entry(i, args_digest), complete)

    return step


async def _ab(
    make: Callable[[Stores, SQLAuditStore, str], Callable[[int], Awaitable[None]]],
    old: Any,
    new: Any,
) -> dict[str, tuple[list[float], float]]:
    """Wall samples (µs) and CPU µs per call of the old and new audit path, in alternating blocks.

    Each variant has its own database (file or schema): a store's remembered head must not be made
    stale by the other variant's appends between blocks."""
    pairs = {
        "locked": (old, SQLAuditStore(old.db, known_head=False)),
        "known head": (new, SQLAuditStore(new.db)),
    }
    steps = {name: make(stores, audit, name.replace(" ", "_")) for name, (stores, audit) in pairs.items()}
    walls: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, float] = dict.fromkeys(steps, 0.0)
    counter = 0
    for step in steps.values():  # warm-up (and the first head read of the new path)
        for _ in range(WARMUP // 4):
            counter += 1
            await step(-counter)
    for _ in range(AB_ROUNDS):
        for name, step in steps.items():
            start_cpu = time.process_time()
            for _ in range(AB_BLOCK):
                counter += 1
                start = time.perf_counter_ns()
                await step(counter)
                walls[name].append((time.perf_counter_ns() - start) / 1000)
            cpu[name] += time.process_time() - start_cpu
    stale = pairs["known head"][1].stale_heads
    assert stale == 0, f"the known-head store found its head stale {stale} times: it has no other writer"
    n = AB_BLOCK * AB_ROUNDS
    return {name: (walls[name], cpu[name] / n * 1e6) for name in steps}


def _append(stores: Stores, audit: SQLAuditStore, tag: str) -> Callable[[int], Awaitable[None]]:
    return _append_step(audit)


async def _run_ab() -> list[tuple[str, dict[str, tuple[list[float], float]]]]:
    rows: list[tuple[str, dict[str, tuple[list[float], float]]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        old, new = SQLiteStores(os.path.join(tmp, "old.db")), SQLiteStores(os.path.join(tmp, "new.db"))
        rows.append(("sqlite NORMAL: append", await _ab(_append, old, new)))
        rows.append(("sqlite NORMAL: begin+append_after", await _ab(_write_step, old, new)))
        await old.close()
        await new.close()
    schemas = [f"maitre_bench_ab_{os.getpid()}_{n}" for n in (0, 1)]
    try:
        from maitre.storage.postgres import PostgresStores

        pg_old = await PostgresStores.open(PG_DSN, schema=schemas[0])
        pg_new = await PostgresStores.open(PG_DSN, schema=schemas[1])
    except Exception as exc:  # Postgres is optional for this bench
        rows.append((f"postgres: skipped ({type(exc).__name__})", {}))
        return rows
    try:
        rows.append(("postgres: append", await _ab(_append, pg_old, pg_new)))
        rows.append(("postgres: begin+append_after", await _ab(_write_step, pg_old, pg_new)))
    finally:
        await pg_old.close()
        await pg_new.close()
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return rows


def _print_ab(rows: list[tuple[str, dict[str, tuple[list[float], float]]]]) -> None:
    print()
    print(
        f"{'audit path (old locked vs new known head)':<44} {'variant':<11} {'p50 µs':>8} {'p99 µs':>8}"
        f" {'CPU µs':>8} {'p50 new/old':>12} {'CPU new/old':>12}"
    )
    for name, result in rows:
        if not result:
            print(f"{name:<44}")
            continue
        old = result["locked"]
        old_p50 = _percentiles(old[0])[0]
        for variant, (samples, cpu) in result.items():
            p50, p99 = _percentiles(samples)
            ratio = f"{p50 / old_p50:>11.2f}x {cpu / old[1]:>11.2f}x" if variant != "locked" else ""
            print(f"{name:<44} {variant:<11} {p50:>8.1f} {p99:>8.1f} {cpu:>8.1f} {ratio}")


def main() -> None:
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    rows = anyio.run(_run)
    anchor_p50 = _percentiles(rows[0][1])[0]
    print(f"{'store sequence per write call':<46} {'p50 µs':>9} {'p99 µs':>9} {'p50 ratio':>10}")
    for name, samples in rows:
        if not samples:
            print(f"{name:<46} {'-':>9} {'-':>9} {'-':>10}")
            continue
        p50, p99 = _percentiles(samples)
        print(f"{name:<46} {p50:>9.1f} {p99:>9.1f} {p50 / anchor_p50:>9.2f}x")
    _print_ab(anyio.run(_run_ab))
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
