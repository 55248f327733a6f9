"""Shared timing helpers for every benchmark in this directory: measure, compare, print ratios.

Why these choices:
- `time.perf_counter_ns` around each sample, so p99 is a real tail and not an average.
- Calls much shorter than the timer's own cost (a bare function call is ~0.1 µs) are timed in
  batches: one sample = `batch` back-to-back calls divided by `batch`. Batching is automatic
  (`batch=None`) and only kicks in below ~5 µs per call; the table shows it, because the p99 of a
  batch mean is narrower than the p99 of single calls.
- The garbage collector is handled the same way for every row: before each row, `gc.collect()`
  then `gc.freeze()`, so no row pays for another's garbage and the collector does not rescan
  set-up data (inputs built ahead of time, the other rows' objects) - as a server that freezes
  after start-up. gc stays *enabled* while timing: the garbage a code path makes is part of its
  cost and shows up in its p99.
- `compare()` interleaves the rows in rounds (A B C, A B C, ...) so slow drift on a shared machine
  (other processes, CPU frequency) lands on every row alike; ratios taken in one run are what the
  benchmarks report. Absolute times are only indicative.

Async callables are awaited inside one event loop: use `ameasure`/`acompare` from async code,
or `measure`/`compare`, which start a loop (anyio, asyncio backend) when given async callables.
"""

from __future__ import annotations

import gc
import inspect
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.lowlevel import checkpoint

__all__ = ["Stats", "acompare", "ameasure", "compare", "measure", "print_table", "ratio"]

_BATCH_TARGET_NS = 5_000
"""Auto-batching aims for samples of at least this many nanoseconds."""


@dataclass(kw_only=True)
class Stats:
    """Timing of one row: per-call microseconds."""

    name: str
    """Row label, also what `print_table(anchor=...)` refers to."""
    samples_us: list[float] = field(default_factory=list, repr=False)
    """Per-call time of each sample in µs (a batch mean when batch > 1)."""
    batch: int = 1
    """Calls per sample."""

    @property
    def n(self) -> int:
        return len(self.samples_us) * self.batch

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_us)

    @property
    def p99(self) -> float:
        ordered = sorted(self.samples_us)
        return ordered[min(len(ordered) - 1, math.ceil(len(ordered) * 0.99) - 1)]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples_us)


def ratio(a: Stats, b: Stats, *, tail: bool = False) -> float:
    """a / b at p50 (or p99 with `tail=True`)."""
    return (a.p99 / b.p99) if tail else (a.p50 / b.p50)


# -- measuring ------------------------------------------------------------------------------------


async def _is_async(fn: Callable[[], Any]) -> bool:
    """Call `fn` once: does it return something to await? (Catches lambdas and partials too.)"""
    result = fn()
    if inspect.isawaitable(result):
        await result
        return True
    return False


def _sync_samples(fn: Callable[[], Any], count: int, batch: int) -> list[float]:
    clock = time.perf_counter_ns
    out = []
    if batch == 1:
        for _ in range(count):
            start = clock()
            fn()
            out.append((clock() - start) / 1000)
    else:
        loop = range(batch)
        for _ in range(count):
            start = clock()
            for _ in loop:
                fn()
            out.append((clock() - start) / 1000 / batch)
    return out


async def _async_samples(fn: Callable[[], Any], count: int, batch: int) -> list[float]:
    clock = time.perf_counter_ns
    out = []
    loop = range(batch)
    for _ in range(count):
        start = clock()
        for _ in loop:
            await fn()
        out.append((clock() - start) / 1000 / batch)
        await checkpoint()  # let the event loop turn between samples, untimed, as it would in a server
    return out


async def _samples(fn: Callable[[], Any], count: int, batch: int, is_async: bool) -> list[float]:
    if is_async:
        return await _async_samples(fn, count, batch)
    return _sync_samples(fn, count, batch)


async def _calibrate(fn: Callable[[], Any], warmup: int, batch: int | None) -> tuple[bool, int]:
    """Warm `fn` up; say whether it is async and pick a batch size (unless one is given)."""
    is_async = await _is_async(fn)
    warm = await _samples(fn, max(warmup, 1), 1, is_async)
    if batch is not None:
        return is_async, max(1, batch)
    per_call_ns = statistics.median(warm[len(warm) // 2 :]) * 1000
    if per_call_ns >= _BATCH_TARGET_NS:
        return is_async, 1
    return is_async, math.ceil(_BATCH_TARGET_NS / max(per_call_ns, 1))


async def acompare(
    cases: Mapping[str, Callable[[], Any]],
    n: int = 2_000,
    *,
    warmup: int = 200,
    rounds: int = 5,
    batch: int | None = None,
) -> list[Stats]:
    """Time every case (sync or async callables taking no arguments), interleaved in `rounds`.

    Each case gets about `n` calls in total. Returns one `Stats` per case, in order.
    """
    stats, kinds = [], []
    for name, fn in cases.items():
        is_async, chosen = await _calibrate(fn, warmup, batch)
        stats.append(Stats(name=name, batch=chosen))
        kinds.append(is_async)
    per_round = max(1, math.ceil(n / rounds))
    try:
        for _ in range(rounds):
            for fn, row, is_async in zip(cases.values(), stats, kinds, strict=True):
                gc.collect()
                gc.freeze()  # set-up data (inputs built ahead, other rows' state) is not scanned
                row.samples_us += await _samples(fn, max(1, per_round // row.batch), row.batch, is_async)
    finally:
        gc.unfreeze()
    return stats


async def ameasure(
    fn: Callable[[], Any], n: int = 2_000, *, name: str = "", warmup: int = 200, batch: int | None = None
) -> Stats:
    """Warm up, then time `n` calls of `fn` (sync or async) from inside a running event loop."""
    return (
        await acompare({name or getattr(fn, "__name__", "fn"): fn}, n, warmup=warmup, rounds=1, batch=batch)
    )[0]


def compare(
    cases: Mapping[str, Callable[[], Any]],
    n: int = 2_000,
    *,
    warmup: int = 200,
    rounds: int = 5,
    batch: int | None = None,
) -> list[Stats]:
    """`acompare` for code that is not already in an event loop."""
    return anyio.run(lambda: acompare(cases, n, warmup=warmup, rounds=rounds, batch=batch))


def measure(
    fn: Callable[[], Any], n: int = 2_000, *, name: str = "", warmup: int = 200, batch: int | None = None
) -> Stats:
    """Warm up, then time `n` calls of `fn` (sync, or async run in a fresh event loop).

    Returns p50/p99/mean in µs per call.
    """
    return anyio.run(lambda: ameasure(fn, n, name=name, warmup=warmup, batch=batch))


# -- printing ---------------------------------------------------------------------------------------


def _fmt(us: float) -> str:
    if us < 10:
        return f"{us:.2f}"
    if us < 1000:
        return f"{us:.1f}"
    return f"{us:,.0f}"


def print_table(
    title: str,
    rows: Sequence[Stats],
    *,
    anchor: str | None = None,
    versus: Mapping[str, str] | None = None,
    note: str | None = None,
) -> None:
    """Print p50/p99/mean per row and the ratio to an anchor row (rich if installed, else plain text).

    `anchor` names the default row to divide by; `versus` maps a row name to another anchor row for
    that row only (for example a sync variant compared with the sync anchor).
    """
    by_name = {row.name: row for row in rows}
    if any(row.batch > 1 for row in rows):
        batched = "n (÷k): timed in batches of k calls, so that row's p99 is over batch means."
        note = f"{note}\n{batched}" if note else batched
    versus = versus or {}
    header = ["", "p50 µs", "p99 µs", "mean µs", "n", "× p50", "× p99", "vs"]
    body = []
    for row in rows:
        base = by_name.get(versus.get(row.name, anchor or ""))
        cells = [
            row.name,
            _fmt(row.p50),
            _fmt(row.p99),
            _fmt(row.mean),
            f"{row.n}" + (f" (÷{row.batch})" if row.batch > 1 else ""),
        ]
        if base is None:
            cells += ["", "", ""]
        elif base is row:
            cells += ["1.00", "1.00", "anchor"]
        else:
            cells += [f"{ratio(row, base):.2f}", f"{ratio(row, base, tail=True):.2f}", base.name]
        body.append(cells)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(r[i])) for r in [header, *body]) for i in range(len(header))]
        print(f"\n{title}")
        for cells in [header, *body]:
            print(
                "  ".join(
                    str(c).ljust(w) if i == 0 else str(c).rjust(w)
                    for i, (c, w) in enumerate(zip(cells, widths, strict=True))
                )
            )
        if note:
            print(note)
        return
    table = Table(title=title, title_justify="left", caption=note, caption_justify="left")
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i in (0, 7) else "right", no_wrap=i != 7)
    for cells in body:
        table.add_row(*cells)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=160)
    console.print(table)
