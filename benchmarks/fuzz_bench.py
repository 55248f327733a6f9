"""Fuzzing at scale (issue 10): 100,000 gate inputs and 20,000 JSON-RPC bodies, zero INTERNAL.

What runs: the seeded streams of `tests/fuzz_inputs.py` (the same ones `make test` samples a few
thousand of) - proposed calls with hostile names, arguments as dicts or broken JSON text (lone
surrogates, NaN/Infinity/1e400, duplicate keys, deep nesting, 300 KB strings, confusables, type
confusion), hostile run ids and approval ids - through one long-lived `Gate` auditing to
MemoryStores; then raw HTTP bodies (broken envelopes, wrong headers, batches, non-UTF-8 bytes,
megabyte bodies) against a `GovernedServer` on 127.0.0.1 (loopback only, ephemeral port).

The tools never raise, so a failure is: an INTERNAL result, a call missing from the audit log, an
HTTP 5xx, a JSON-RPC -32603, a dropped connection, or an answer that is not JSON-RPC. Each part
stops at its time limit with a note (the counts then say how far it got). Exit status 1 when any
failure was seen. Reproduce one with `fuzz_inputs.gate_input(SEED, INDEX)` /
`fuzz_inputs.jsonrpc_body(SEED, INDEX)`.

Usage: `python benchmarks/fuzz_bench.py [--quick]` (or via `benchmarks/run_all.py`); `--quick`
runs 5,000 and 1,000.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
SEED = "bench"
GATE_INPUTS, BODIES = 100_000, 20_000
QUICK_GATE_INPUTS, QUICK_BODIES = 5_000, 1_000
GATE_LIMIT_S, HTTP_LIMIT_S = 600.0, 300.0
"""15 minutes in all at most."""


def _fuzz_inputs() -> ModuleType:
    """`tests/fuzz_inputs.py` by path (putting tests/ on sys.path would shadow names like `mcp`)."""
    name = "fuzz_inputs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "fuzz_inputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _print(title: str, report: Any, families: Counter[tuple[str, str]]) -> None:
    print(f"\n{title}")
    print(report.summary())
    print("  by family (family: outcome count, ...):")
    grouped: dict[str, list[str]] = {}
    for (family, outcome), count in sorted(families.items(), key=lambda kv: (kv[0][0], -kv[1])):
        grouped.setdefault(family, []).append(f"{outcome} {count}")
    for family, parts in grouped.items():
        print(f"    {family}: {', '.join(parts)}")


async def _run(gate_n: int, body_n: int) -> int:
    fuzz = _fuzz_inputs()
    from maitre.mcp.app import MCPApp
    from maitre.mcp.server import GovernedServer
    from maitre.mcp.transports import running_http

    gate_report = await fuzz.run_gate_inputs(fuzz.gate_inputs(SEED, gate_n), time_limit_s=GATE_LIMIT_S)
    _print(f"Gate.call: {gate_n:,} seeded inputs (seed {SEED!r})", gate_report, gate_report.by_family)
    if gate_report.stopped_early:
        print(f"  note: stopped after {GATE_LIMIT_S:.0f} s at {gate_report.total:,} of {gate_n:,} inputs")

    box = fuzz.fuzz_toolbox()
    gate = fuzz.fuzz_gate(box)
    reached = [0]

    async def count(_ctx: Any, _result: Any) -> None:
        reached[0] += 1

    gate.recorders.append(count)
    async with running_http(GovernedServer(MCPApp(box, gate=gate))) as url:
        http_report = await fuzz.post_bodies(
            url, fuzz.jsonrpc_bodies(SEED, body_n), concurrency=4, time_limit_s=HTTP_LIMIT_S
        )
    audited = len(await gate.stores.audit.entries())
    http_report.audited = audited
    if audited != reached[0]:
        http_report.fail(f"audit: {audited} entries for {reached[0]} calls that reached the gate")
    _print(
        f"MCP over HTTP: {body_n:,} JSON-RPC bodies (seed {SEED!r}, {url})",
        http_report,
        http_report.by_family,
    )
    print(f"  gate calls behind them: {reached[0]:,}")
    if http_report.stopped_early:
        print(f"  note: stopped after {HTTP_LIMIT_S:.0f} s at {http_report.total:,} of {body_n:,} bodies")

    failures = gate_report.failure_count + http_report.failure_count
    print(
        f"\nfuzz: {gate_report.total:,} gate inputs ({gate_report.per_second:,.0f}/s), "
        f"{http_report.total:,} JSON-RPC bodies ({http_report.per_second:,.0f}/s); "
        f"INTERNAL/5xx/unaudited failures: {failures} (goal: 0)"
    )
    return failures


def main(quick: bool = False) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5,000 gate inputs and 1,000 bodies")
    options, _ = parser.parse_known_args()
    quick = quick or options.quick or os.environ.get("MAITRE_BENCH_QUICK") == "1"
    # The gate logs every INTERNAL with its traceback; the counts above are the report.
    logging.getLogger("maitre").setLevel(logging.CRITICAL)
    gate_n, body_n = (QUICK_GATE_INPUTS, QUICK_BODIES) if quick else (GATE_INPUTS, BODIES)
    failures = anyio.run(_run, gate_n, body_n)
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
