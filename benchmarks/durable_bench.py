"""Durable runs: what recording each step in DBOS costs, on SQLite and on Postgres.

Rows, per backend (maitre's stores and DBOS's system database on the same backend):

- `step, plain`: one agent step as the loop makes it without durability - a model call (a scripted
  model: no network) and one governed write through the gate (idempotency key, audit entry).
- `step, durable`: the same step inside a DBOS workflow, through `DurableModel` and `DurableGate`
  (two recorded steps). The difference is the per-step overhead (goal: <= 2 ms p50 on SQLite).
- `gate call outside a step` / `gate call inside a DBOS step`: the governed call alone, plain and
  as `DurableGate.call` inside a workflow.
- `bare DBOS step`: an async step that does nothing - DBOS's own cost of recording one step.
- `maitre's record/restore`: encoding the result and the run's gate state, and applying it back
  (what `DurableGate` adds on top of DBOS's step).

Rows are interleaved in rounds so drift on a shared machine lands on each alike; the load average
is printed. Usage: `python benchmarks/durable_bench.py [--quick] [--no-postgres]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["main"]

RECORD = "maitre's record/restore"
PG = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _row(name: str, samples: list[float]) -> str:
    samples = sorted(samples)
    p50 = statistics.median(samples)
    p90 = samples[int(len(samples) * 0.9) - 1]
    return f"  {name:<42} p50 {p50 * 1000:8.3f} ms   p90 {p90 * 1000:8.3f} ms   n={len(samples)}"


async def _backend(label: str, stores_url: str, system_db: str, rounds: int) -> dict[str, float]:
    from dbos import DBOS, SetWorkflowID
    from dbos._dbos import _get_dbos_instance

    from maitre import Principal, Toolbox
    from maitre.context import RunContext
    from maitre.durable import DurableGate, DurableModel, launch, shutdown
    from maitre.durable._codec import apply_context, decode_result, encode_result
    from maitre.gate import Gate
    from maitre.messages import UserMessage
    from maitre.models.base import ModelRequest, ModelResponse
    from maitre.stores import open_stores
    from maitre.types import ToolCall

    alice = Principal(user="alice", tenant="acme")
    box = Toolbox("bench")
    counter = {"n": 0}

    @box.tool(effect="write")
    def note(n: int) -> str:
        """Write a note."""
        counter["n"] += 1
        return f"noted {n}"

    class Model:
        name = "scripted"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(
                tool_calls=[ToolCall(id="c", name="bench.note", arguments={"n": 1})], model="scripted"
            )

    samples: dict[str, list[float]] = {
        "step, plain": [],
        "step, durable": [],
        "gate call outside a step": [],
        "gate call inside a DBOS step": [],
        "bare DBOS step": [],
        "maitre's record/restore": [],
        "a thread hop (asyncio.to_thread, no-op)": [],
        "DBOS's step bookkeeping, called inline": [],
    }

    async with await open_stores(stores_url) as stores:
        gate = Gate(box, stores=stores)
        model = Model()
        durable_gate = DurableGate(gate)
        durable_model = DurableModel(model)  # type: ignore[arg-type]
        request = ModelRequest(messages=[UserMessage(content="note it")], tools=list(box))

        async def nothing() -> str:
            return "ok"

        async def timed(name: str, fn: Callable[[], Awaitable[Any]]) -> None:
            started = time.perf_counter()
            await fn()
            samples[name].append(time.perf_counter() - started)

        @DBOS.workflow(name=f"bench.{label}")
        async def workflow(tag: str) -> str:
            run = RunContext(run_id=f"wf-{tag}", principal=alice)
            plain_run = RunContext(run_id=f"plain-{tag}", principal=alice)
            sys_db = _get_dbos_instance()._sys_db
            workflow_id = DBOS.workflow_id
            for i in range(rounds):
                call = ToolCall(id=f"c{i}", name="bench.note", arguments={"n": i})

                async def plain_step(i: int = i, call: ToolCall = call) -> None:
                    await model.complete(request)
                    await gate.call(call, alice, plain_run)

                async def durable_step(call: ToolCall = call) -> None:
                    await durable_model.complete(request)
                    await durable_gate.call(call, alice, run)

                await timed("step, plain", plain_step)
                await timed("step, durable", durable_step)
                other = ToolCall(id=f"d{i}", name="bench.note", arguments={"n": 10_000 + i})
                await timed(
                    "gate call outside a step", lambda other=other: gate.call(other, alice, plain_run)
                )
                again = ToolCall(id=f"e{i}", name="bench.note", arguments={"n": 20_000 + i})
                await timed(
                    "gate call inside a DBOS step", lambda again=again: durable_gate.call(again, alice, run)
                )
                await timed("bare DBOS step", lambda: DBOS.run_step_async({"name": "bench.nothing"}, nothing))
                await timed("a thread hop (asyncio.to_thread, no-op)", lambda: asyncio.to_thread(int))
                step = 1_000_000 + i

                async def bookkeeping(step: int = step) -> None:
                    # What a step does around its function: look for a recorded output, record one.
                    sys_db.check_operation_execution(workflow_id, step, "bench.inline")
                    sys_db.record_operation_result(
                        {
                            "workflow_uuid": workflow_id,
                            "function_id": step,
                            "function_name": "bench.inline",
                            "output": "ok",
                            "error": None,
                            "serialization": None,
                            "started_at_epoch_ms": int(time.time() * 1000),
                            "child_workflow_id": None,
                        }
                    )

                await timed("DBOS's step bookkeeping, called inline", bookkeeping)
            result = await gate.call(ToolCall(id="x", name="bench.note", arguments={"n": -1}), alice, run)
            for _ in range(rounds):

                async def record_restore() -> None:
                    text = encode_result(result, run)
                    _decoded, context = decode_result(text)
                    assert context is not None
                    apply_context(run, context)

                await timed("maitre's record/restore", record_restore)
            return "done"

        launch(system_db, executor_id=f"bench-{label}-{os.getpid()}")
        try:
            with SetWorkflowID(f"bench-{label}-{time.time_ns()}"):
                await workflow(label)
        finally:
            shutdown()

    print(f"{label}: {rounds} rounds; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    for name, values in samples.items():
        print(_row(name, values))
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    overhead = p50["step, durable"] - p50["step, plain"]
    print(f"  per-step overhead (durable - plain, p50): {overhead * 1000:.3f} ms")
    print(
        f"  ratio durable/plain step: {p50['step, durable'] / p50['step, plain']:.1f}x; "
        f"gate call in a step / outside: {p50['gate call inside a DBOS step'] / p50['gate call outside a step']:.1f}x"
    )
    print(
        f"  where it goes: 2 DBOS steps ~ {2 * p50['bare DBOS step'] * 1000:.3f} ms, "
        f"maitre's record/restore {p50[RECORD] * 1000:.3f} ms"
    )
    return p50


def main(quick: bool = False) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    options = parser.parse_args(sys.argv[1:])
    quick = quick or options.quick or os.environ.get("MAITRE_BENCH_QUICK") == "1"
    import importlib.util

    if importlib.util.find_spec("dbos") is None:
        print("dbos is not installed: pip install 'maitre[durable]' (skipped)")
        return
    import anyio

    rounds = 40 if quick else 200
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        anyio.run(_backend, "sqlite", str(db), f"sqlite:///{Path(tmp) / 'bench.dbos.sqlite'}", rounds)
    if options.no_postgres:
        return
    try:
        import psycopg

        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # no server: say so, skip the rows
        print(f"postgres: skipped ({type(exc).__name__})")
        return
    tag = os.urandom(4).hex()
    system_db = f"{PG.rsplit('/', 1)[0]}/maitre_bench_dbos_{tag}"
    try:
        anyio.run(_backend, "postgres", f"{PG}?schema=bench_{tag}", system_db, rounds)
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS bench_{tag} CASCADE")
            conn.execute(f"DROP DATABASE IF EXISTS maitre_bench_dbos_{tag} WITH (FORCE)")


if __name__ == "__main__":
    main()
