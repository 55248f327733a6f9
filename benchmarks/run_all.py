"""Run every benchmark in this directory, one after the other: what `make bench` does.

A benchmark is any `benchmarks/*.py` module (other than this file and `_`-prefixed helpers) with a
`main()`. Each runs in this process, in name order, under its own header; a failing one is
reported and the next one still runs, and the exit status is non-zero if any failed. `--quick` is
passed on as `main(quick=True)` to benchmarks whose `main` accepts a `quick` parameter, and as
`MAITRE_BENCH_QUICK=1` in the environment for those that read it instead. While a benchmark runs,
`sys.argv` holds only its own path, so a `main` that parses arguments sees none of the runner's.
`main` may be a coroutine function; it then runs in an anyio event loop.

Usage: `python benchmarks/run_all.py [--only NAME ...] [--quick] [--list]`
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["discover", "main", "run_one"]

HERE = Path(__file__).resolve().parent
QUICK_ENV = "MAITRE_BENCH_QUICK"
"""Set to "1" while a benchmark runs under `--quick`, for mains that take no `quick` parameter."""


HELPERS = frozenset({"contextforge"})
"""Modules other benchmarks import that are not benchmarks themselves (they keep a public name
because they are also run by hand: `python benchmarks/contextforge.py`)."""


def discover(directory: Path = HERE) -> list[str]:
    """Names of the candidate benchmark modules, sorted."""
    return sorted(
        path.stem
        for path in directory.glob("*.py")
        if not path.stem.startswith("_") and path.stem != Path(__file__).stem and path.stem not in HELPERS
    )


def _load(name: str, directory: Path) -> ModuleType:
    path = directory / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _accepts_quick(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "quick" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def run_one(name: str, *, quick: bool = False, directory: Path = HERE) -> str:
    """Import and run one benchmark; returns "ok", "skipped" (no main) or raises what it raised."""
    module = _load(name, directory)
    entry = getattr(module, "main", None)
    if not callable(entry):
        return "skipped"
    kwargs = {"quick": True} if quick and _accepts_quick(entry) else {}
    # A main that parses sys.argv itself must not see the runner's options (--only, ...).
    saved_argv, saved_quick = sys.argv, os.environ.get(QUICK_ENV)
    sys.argv = [str(directory / f"{name}.py")]
    if quick:
        os.environ[QUICK_ENV] = "1"
    try:
        if inspect.iscoroutinefunction(entry):
            import anyio

            anyio.run(lambda: entry(**kwargs))
        else:
            entry(**kwargs)
    finally:
        sys.argv = saved_argv
        if saved_quick is None:
            os.environ.pop(QUICK_ENV, None)
        else:
            os.environ[QUICK_ENV] = saved_quick
    return "ok"


def _header(text: str) -> None:
    try:
        from rich.console import Console
    except ImportError:
        print(f"\n=== {text} " + "=" * max(0, 70 - len(text)), flush=True)
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    console.rule(f"[bold]{text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmark (`make bench`).")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        default=[],
        help="run only this benchmark (file name without .py); repeatable or comma-separated",
    )
    parser.add_argument("--quick", action="store_true", help="pass quick=True to benchmarks that accept it")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    options = parser.parse_args(argv)

    available = discover()
    if options.list:
        print("\n".join(available))
        return 0
    wanted = [n.strip().removesuffix(".py") for item in options.only for n in item.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in available]
    if unknown:
        print(
            f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}", file=sys.stderr
        )
        return 2
    names = wanted or available

    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # so benchmarks can `import _harness`
    outcomes: list[tuple[str, str, float]] = []
    for name in names:
        _header(f"{name}{' (quick)' if options.quick else ''}")
        start = time.perf_counter()
        try:
            status = run_one(name, quick=options.quick)
        except KeyboardInterrupt:
            raise
        except SystemExit as exc:
            status = "ok" if exc.code in (None, 0) else f"FAILED (exit {exc.code})"
        except BaseException as exc:
            traceback.print_exc()
            status = f"FAILED ({type(exc).__name__})"
        if status == "skipped":
            print(f"{name}: no main(), skipped")
        outcomes.append((name, status, time.perf_counter() - start))
        sys.stdout.flush()

    _header("summary")
    for name, status, seconds in outcomes:
        print(f"{name:<28} {status:<28} {seconds:7.1f} s")
    failed = [name for name, status, _ in outcomes if status.startswith("FAILED")]
    if failed:
        print(f"{len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
