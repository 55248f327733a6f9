"""`maitre gateway` against the upstream called directly and against IBM ContextForge, and 1→3 replicas.

One echo upstream (`_echo_upstream.py`: the official SDK's smallest Streamable HTTP server) serves
every row; one load generator (`_loadgen.run_load`: closed loop, N keep-alive workers, each answer
checked for its own echoed value) drives every row; all rows run in this one process, one after
another, in interleaved rounds (`_loadgen.combine` merges a target's rounds), so drift on the
shared machine lands on each row alike. Rows:

- **(a) overhead per call**, 1 client: the upstream direct vs through one `maitre gateway` process.
  overhead = p50(gateway) - p50(direct).
- **(b) throughput**, 8 clients: direct; maitre gateway, 1 process; ContextForge 1.1.0 with 1
  uvicorn worker (the same worker count) and its rate limiting off (`contextforge.py`).
- **(c) scaling**: HAProxy over 1 replica vs over 3 replicas (the same config, one Postgres
  schema), 8 clients.

maitre runs as deployed for scale-out: `python -m maitre.cli gateway`, stores in Postgres (a fresh
schema per run, dropped after), JWT auth, the upstream pinned and its annotations trusted (echo is
read-only, so no approval), every call through the gate and audited; no rate limit (as
ContextForge runs here). The rig (replicas, HAProxy, schema, config) is `tests/scale/rig.py`, the
same one the replica-kill test uses. maitre is driven over 2026-07-28 (stateless, no session),
ContextForge over stateless 2025-11-25 JSON-RPC (what it serves without a session).

Printed next to the table: the ratios the issue's goals are stated in (gateway / direct req/s,
maitre / ContextForge req/s, p99 ratio, overhead ms p50), each "met" or "NOT met", the load
average, and the gateway's own CPU time per call (user + system from /proc, which contention on
this 2-core machine does not inflate the way it inflates latency).

Skips with a printed reason what cannot run: ContextForge (no Python 3.12, install failure; and
always under `--quick`), HAProxy (not installed), Postgres (not reachable: then nothing runs).

Usage: `python benchmarks/gateway_bench.py [--quick]` (or via `benchmarks/run_all.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "tests" / "scale"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import rig  # noqa: E402  (tests/scale/rig.py: the shared replica rig)
from _echo_upstream import echo_upstream  # noqa: E402
from _loadgen import LEGACY, MODERN, LoadResult, Target, combine, loadavg, print_results, run_load  # noqa: E402

__all__ = ["main"]

CLIENTS = 8
NAMESPACE = "up1"
GOALS = {
    "gateway / direct req/s (8 clients)": (">=", 0.5),
    "maitre / ContextForge req/s": (">=", 10.0),
    "gateway p99 / direct p99 (8 clients)": ("<=", 2.0),
    "overhead per call, ms p50 (1 client)": ("<=", 1.0),
}


@dataclass
class Row:
    """A target and the rounds measured so far (with the gateway's CPU time, when it is ours)."""

    target: Target
    concurrency: int
    pids: tuple[int, ...] = ()
    rounds: list[LoadResult] | None = None
    cpu_s: float = 0.0

    def result(self) -> LoadResult:
        assert self.rounds
        return combine(self.rounds, name=self.target.label)

    def cpu_ms_per_call(self) -> float | None:
        if not self.pids or not self.rounds:
            return None
        calls = sum(r.calls for r in self.rounds)
        return 1000 * self.cpu_s / calls if calls else None


def _cpu_s(pids: tuple[int, ...]) -> float:
    """User + system CPU seconds of `pids` so far (/proc/PID/stat fields 14 and 15)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def _measure(rows: list[Row], *, seconds: float, rounds: int) -> None:
    """Each row `rounds` times, interleaved (A B C, A B C), `seconds` in all per row."""
    for _ in range(rounds):
        for row in rows:
            # Warm up apart, so the CPU counted below is the CPU of exactly the calls counted.
            asyncio.run(run_load(row.target, concurrency=row.concurrency, duration_s=0.5, warmup_s=0))
            before = _cpu_s(row.pids)
            load = run_load(row.target, concurrency=row.concurrency, duration_s=seconds / rounds, warmup_s=0)
            result = asyncio.run(load)
            row.cpu_s += _cpu_s(row.pids) - before
            row.rounds = [*(row.rounds or []), result]


def _verdict(name: str, value: float | None) -> str:
    op, goal = GOALS[name]
    if value is None:
        return f"{name}: not measured"
    met = value >= goal if op == ">=" else value <= goal
    return f"{name}: {value:.2f} (goal {op} {goal:g}) {'met' if met else 'NOT met'}"


@contextlib.contextmanager
def _contextforge(upstream: str, *, quick: bool) -> Iterator[Target | None]:
    if quick:
        print("ContextForge: skipped under --quick (its install and ~15 s start-up are for make bench)")
        yield None
        return
    try:
        from contextforge import ContextForgeUnavailable, contextforge
    except ImportError as exc:
        print(f"ContextForge: skipped ({exc})")
        yield None
        return
    try:
        with contextforge(upstream, workers=1) as cf:
            print(f"ContextForge 1.1.0: 1 worker, healthy after {cf.startup_s:.1f} s")
            yield Target(
                url=cf.url, tool=cf.tool_name, token=cf.token, protocol=LEGACY, name="ContextForge (1 worker)"
            )
    except ContextForgeUnavailable as reason:
        print(f"ContextForge: skipped ({reason})")
        yield None


def main(quick: bool = False) -> None:
    missing = rig.postgres_error()
    if missing:
        print(f"gateway_bench: skipped ({missing})")
        return
    seconds, rounds = (2.0, 1) if quick else (8.0, 2)
    haproxy_missing = rig.haproxy_binary() is None
    token = rig.bearer_token("bench", "bench")
    print(f"load average at start: {loadavg()}")
    upstream_pids: list[int] = []
    with (
        tempfile.TemporaryDirectory(prefix="gateway-bench-") as scratch,
        rig.pg_schema() as schema,
        echo_upstream(NAMESPACE, pids=upstream_pids) as upstream,
    ):
        folder = Path(scratch)
        lockfile = folder / "maitre.mcp.lock.json"
        anyio.run(rig.pin_upstream, lockfile, NAMESPACE, upstream)
        config = rig.write_gateway_config(
            folder,
            stores=rig.stores_url(schema),
            upstream_url=upstream,
            lockfile=lockfile,
            rate_limits=None,
            namespace=NAMESPACE,
        )
        tool = f"{NAMESPACE}.echo"
        direct = Target(url=upstream, protocol=MODERN, name="upstream direct")
        with rig.replicas({"g1": config}, {"g1": rig.ports(1)[0]}, folder) as first:
            g1 = first["g1"]
            gateway = Target(
                url=g1.url, tool=tool, token=token, protocol=MODERN, name="maitre gateway (1 process)"
            )
            ups = tuple(upstream_pids)
            overhead = [Row(direct, 1, ups), Row(gateway, 1, (g1.pid,))]
            _measure(overhead, seconds=seconds / 2, rounds=rounds)

            throughput = [Row(direct, CLIENTS, ups), Row(gateway, CLIENTS, (g1.pid,))]
            with _contextforge(upstream, quick=quick) as forged:  # running only for its own rows
                if forged is not None:
                    throughput.append(Row(forged, CLIENTS))
                _measure(throughput, seconds=seconds, rounds=rounds)

            scaling: list[Row] = []
            if haproxy_missing:
                print("scaling rows: skipped (haproxy is not installed: apt-get install -y haproxy)")
            else:
                # Two more replicas and two HAProxy fronts, started only now, so that nothing else
                # (health checks, idle replicas) ran during the rows above.
                more = dict(zip(["g2", "g3"], rig.ports(2), strict=True))
                with (
                    rig.replicas(dict.fromkeys(more, config), more, folder) as others,
                    contextlib.ExitStack() as fronts,
                ):
                    running = {"g1": g1, **others}
                    for label, members in (("1 replica", ["g1"]), ("3 replicas", ["g1", "g2", "g3"])):
                        sub = folder / f"haproxy-{len(members)}"
                        sub.mkdir()
                        front_port, stats_port = rig.ports(2)
                        servers = {name: running[name].port for name in members}
                        front = fronts.enter_context(
                            rig.haproxy(sub, port=front_port, stats_port=stats_port, servers=servers)
                        )
                        target = Target(
                            url=front.url, tool=tool, token=token, protocol=MODERN, name=f"HAProxy, {label}"
                        )
                        scaling.append(Row(target, CLIENTS, tuple(running[name].pid for name in members)))
                    _measure(scaling, seconds=seconds, rounds=rounds)

    _report(overhead, throughput, scaling)


def _report(overhead: list[Row], throughput: list[Row], scaling: list[Row]) -> None:
    for title, rows in (
        ("(a) overhead per call, 1 client", overhead),
        (f"(b) throughput, {CLIENTS} clients", throughput),
        (f"(c) scaling behind HAProxy, {CLIENTS} clients", scaling),
    ):
        if not rows:
            continue
        print(f"\n{title}")
        results = [row.result() for row in rows]
        print_results(results)
        for row, result in zip(rows, results, strict=True):
            cpu = row.cpu_ms_per_call()
            if cpu is not None:
                whose = "upstream" if row.target.tool == "echo" else "gateway"
                print(f"  {result.name}: {whose} CPU {cpu:.2f} ms per call (user+system, all its processes)")

    direct1, gateway1 = (row.result() for row in overhead)
    direct8, gateway8 = throughput[0].result(), throughput[1].result()
    forged = throughput[2].result() if len(throughput) > 2 else None
    print(f"\nload average at the end: {loadavg()} (2 cores; treat absolute numbers as a floor)")
    print(
        f"overhead per call: {gateway1.p50_ms - direct1.p50_ms:.2f} ms p50, {gateway1.p99_ms - direct1.p99_ms:.2f} ms p99"
    )
    verdicts = [
        _verdict("gateway / direct req/s (8 clients)", gateway8.rps / direct8.rps if direct8.rps else None),
        _verdict("maitre / ContextForge req/s", gateway8.rps / forged.rps if forged and forged.rps else None),
        _verdict("gateway p99 / direct p99 (8 clients)", gateway8.p99_ms / direct8.p99_ms),
        _verdict("overhead per call, ms p50 (1 client)", gateway1.p50_ms - direct1.p50_ms),
    ]
    if forged is not None:
        verdicts.append(f"maitre p99 / ContextForge p99: {gateway8.p99_ms / forged.p99_ms:.2f}")
    for label, rows in (("1 client", overhead), (f"{CLIENTS} clients", throughput)):
        upstream_cpu, gateway_cpu = rows[0].cpu_ms_per_call(), rows[1].cpu_ms_per_call()
        if upstream_cpu and gateway_cpu:
            verdicts.append(
                f"gateway CPU per call / the upstream's own ({label}): {gateway_cpu / upstream_cpu:.2f}x "
                "(the load-steady yardstick; req/s through one process is bounded near upstream/(upstream+gateway))"
            )
    if len(scaling) == 2:
        one, three = (row.result() for row in scaling)
        verdicts.append(
            f"3 replicas / 1 replica req/s: {three.rps / one.rps:.2f}x (on 2 cores shared with the load)"
        )
    for line in verdicts:
        print(f"  {line}")


if __name__ == "__main__":
    unknown = [arg for arg in sys.argv[1:] if arg != "--quick"]
    if unknown:
        print(f"usage: {Path(sys.argv[0]).name} [--quick]  (--quick: no ContextForge, shorter rows)")
        raise SystemExit(0 if unknown in (["--help"], ["-h"]) else 2)
    main(quick="--quick" in sys.argv[1:])
