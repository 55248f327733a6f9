"""Two or more builds of `maitre gateway` side by side in one run: before/after a change, measured alike.

Why: on the shared 2-core machine the load average moves between 1 and 12 within an hour, so a
number from an earlier run says little about a change. This runs every variant at once on the same
echo upstream, the same Postgres (a fresh schema each), the same configuration (`tests/scale/rig`,
as `gateway_bench.py` deploys it), and the same load generator, in interleaved rounds
(`gateway_bench._measure`), and prints each one's req/s, p50/p99 and gateway CPU per call next to
the upstream called directly, and that CPU as a multiple of the upstream's own CPU per call in the
direct rows (the steadiest yardstick on a loaded machine: both are CPU time per call, measured in
the same interleaved rounds).

A variant is `LABEL=PYTHONPATH` (its folders put first on the gateway process's `sys.path`, e.g. an
older checkout's `src` from `git archive`, or a folder with uvloop and httptools from
`pip install --target`); `LABEL=` is this checkout as it is.

Usage: `python benchmarks/gateway_ab.py [--seconds S] [--rounds R] LABEL=PATH [LABEL=PATH ...]`
e.g. `before=/tmp/before/src after= after+fast=/tmp/fastlibs`. Bounds: at most 6 variants,
60 s per row, 8 clients.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "tests" / "scale"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import rig  # noqa: E402
from _echo_upstream import echo_upstream  # noqa: E402
from _loadgen import MODERN, Target, loadavg, print_results  # noqa: E402
from gateway_bench import CLIENTS, NAMESPACE, Row, _measure  # noqa: E402

__all__ = ["main"]

MAX_VARIANTS = 6
MAX_SECONDS = 60.0


@contextlib.contextmanager
def _python_path(path: str) -> Iterator[None]:
    """PYTHONPATH for the processes started inside the block (the replica reads os.environ)."""
    before = os.environ.get("PYTHONPATH")
    if path:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (path, before) if p)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def _loaded(pid: int) -> str:
    """Which of uvloop and httptools the process has loaded (their extension modules in its maps)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return "modules unknown"
    found = [name for name in ("uvloop", "httptools") if f"/{name}/" in maps]
    return "loaded: " + (", ".join(found) if found else "neither uvloop nor httptools")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("variants", nargs="+", help="LABEL=PYTHONPATH (empty: this checkout)")
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per row (all rounds)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    variants = [tuple(v.split("=", 1)) if "=" in v else (v, "") for v in args.variants]
    if not 1 <= len(variants) <= MAX_VARIANTS or not 0 < args.seconds <= MAX_SECONDS or args.rounds < 1:
        parser.error(f"1..{MAX_VARIANTS} variants, 0 < --seconds <= {MAX_SECONDS:g}, --rounds >= 1")
    missing = rig.postgres_error()
    if missing:
        print(f"gateway_ab: skipped ({missing})")
        return 0
    token = rig.bearer_token("bench", "bench", ttl_s=3600)
    print(f"load average at start: {loadavg()} ({os.cpu_count()} cores)")
    upstream_pids: list[int] = []
    with (
        tempfile.TemporaryDirectory(prefix="gateway-ab-") as scratch,
        echo_upstream(NAMESPACE, pids=upstream_pids) as upstream,
        contextlib.ExitStack() as stack,
    ):
        folder = Path(scratch)
        lockfile = folder / "maitre.mcp.lock.json"
        anyio.run(rig.pin_upstream, lockfile, NAMESPACE, upstream)
        direct = Target(url=upstream, protocol=MODERN, name="upstream direct")
        gateways: list[tuple[Target, int]] = []
        for (label, path), port in zip(variants, rig.ports(len(variants)), strict=True):
            sub = folder / label.replace("/", "_")
            sub.mkdir()
            (sub / lockfile.name).write_text(lockfile.read_text())
            schema = stack.enter_context(rig.pg_schema())
            config = rig.write_gateway_config(
                sub,
                stores=rig.stores_url(schema),
                upstream_url=upstream,
                lockfile=sub / lockfile.name,
                rate_limits=None,
                namespace=NAMESPACE,
            )
            with _python_path(path):
                (replica,) = stack.enter_context(rig.replicas({label: config}, {label: port}, sub)).values()
            name = f"gateway {label}"
            print(f"{name}: pid {replica.pid}, {_loaded(replica.pid)}")
            gateways.append(
                (
                    Target(
                        url=replica.url, tool=f"{NAMESPACE}.echo", token=token, protocol=MODERN, name=name
                    ),
                    replica.pid,
                )
            )
        for clients in (1, CLIENTS):
            rows = [
                Row(direct, clients, tuple(upstream_pids)),
                *(Row(target, clients, (pid,)) for target, pid in gateways),
            ]
            _measure(rows, seconds=args.seconds, rounds=args.rounds)
            print(f"\n{clients} client(s):")
            results = [row.result() for row in rows]
            print_results(results)
            base = results[0]
            upstream_cpu = rows[0].cpu_ms_per_call() or 0.0
            print(f"  upstream direct: upstream CPU {upstream_cpu:.2f} ms/call")
            for row, result in zip(rows[1:], results[1:], strict=True):
                cpu = row.cpu_ms_per_call() or 0.0
                print(
                    f"  {result.name}: {result.rps / base.rps:.3f}x direct req/s, p99 "
                    f"{result.p99_ms / base.p99_ms:.2f}x direct, overhead p50 {result.p50_ms - base.p50_ms:.2f} ms, "
                    f"gateway CPU {cpu:.2f} ms/call"
                    + (f" = {cpu / upstream_cpu:.2f}x the upstream's own" if upstream_cpu else "")
                )
    print(f"\nload average at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
