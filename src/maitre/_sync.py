"""Calling maitre's async API from synchronous code: scripts, notebooks, a REPL.

`run_sync(fn, *args)` runs the coroutine function on a new event loop (`anyio.run`). Where a loop
is already running in this thread (a Jupyter notebook, an async framework calling sync code), a
second loop cannot start there, so the call runs on a fresh loop in a worker thread and this
thread waits for it. Objects bound to one event loop (a Postgres connection pool, an open MCP
session) cannot cross loops: use the async API for those, or one loop for the whole program.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

import anyio

__all__ = ["run_sync"]

P = ParamSpec("P")
T = TypeVar("T")


def run_sync(fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`await fn(*args, **kwargs)` from synchronous code (see the module docstring)."""
    job = functools.partial(_call, fn, *args, **kwargs)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(job)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="maitre-sync") as worker:
        return worker.submit(anyio.run, job).result()


async def _call(fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
    return await fn(*args, **kwargs)
