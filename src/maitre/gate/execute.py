"""Stage 9, execute: run the tool under a deadline, retrying only what is worth retrying.

- Async tools are cancelled at the deadline. Sync tools run in a worker thread; at the deadline the
  caller gets TIMEOUT and the thread is abandoned (Python cannot kill a thread; the result, if it
  ever comes, is discarded).
- Retries (seed 002): only a `ToolError(..., retryable=True)` raised by the tool, a declared
  transient exception, or a timeout of a read tool. A write tool that timed out may have acted, so
  it is not retried blindly. Backoff is exponential with full jitter and a cap.
- Any other exception is a bug in the tool: INTERNAL, logged to stderr with its traceback, never
  shown to the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Coroutine, Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio

from ..context import IdempotencyKey, RunContext
from ..stores.base import Stores
from ..tools import Tool
from ..types import Effect, ErrorCode, Principal, ToolError
from .base import CallContext

__all__ = ["execute", "invoke_tool"]

logger = logging.getLogger("maitre.gate")


async def execute(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    if ctx.replayed:
        return None  # the idempotency stage found a completed key: nothing runs twice
    limits = ctx.gate.limits
    attempts = 1 + tool.retries
    for attempt in range(1, attempts + 1):
        ctx.attempts = attempt
        ctx.executed = True
        error = await _attempt(ctx, tool)
        if error is None:
            return None
        if not error.retryable or attempt == attempts:
            return error
        if error.code is ErrorCode.TIMEOUT and tool.effect is not Effect.READ:
            return error
        delay = min(limits.retry_backoff_cap_s, limits.retry_backoff_s * 2 ** (attempt - 1))
        if error.retry_after_s:
            delay = max(delay, min(error.retry_after_s, limits.retry_backoff_cap_s))
        await anyio.sleep(random.uniform(0, delay))
    return None  # pragma: no cover - the loop always returns


async def _attempt(ctx: CallContext, tool: Tool) -> ToolError | None:
    try:
        started = time.monotonic()
        coro = invoke_tool(tool, ctx.validated, ctx.principal, ctx.run, ctx.idempotency_key, ctx.gate.stores)
        try:
            first = coro.send(None)
        except StopIteration as done:  # finished without suspending: no deadline could have fired
            ctx.output = done.value
            return None
        async with _deadline(max(0.0, tool.timeout - (time.monotonic() - started))):
            ctx.output = await _Resume(coro, first)
        return None
    except TimeoutError:
        return ToolError(
            ErrorCode.TIMEOUT,
            f"{tool.name} did not finish within {tool.timeout:g} s and was stopped."
            + (
                " It is safe to try again later."
                if tool.effect is Effect.READ
                else " It may or may not have taken effect; check its status before trying again."
            ),
            details={"timeout_s": tool.timeout},
        )
    except ToolError as exc:
        return exc
    except tool.transient as exc:
        return ToolError(
            ErrorCode.TEMPORARY_UNAVAILABLE,
            f"{tool.name} is temporarily unavailable ({type(exc).__name__}). Try again later.",
            retryable=True,
        )
    except Exception as exc:
        logger.exception("tool %s raised %s (call %s)", tool.name, type(exc).__name__, ctx.call.id)
        return ToolError(
            ErrorCode.INTERNAL,
            f"{tool.name} failed with an internal error ({type(exc).__name__}). This is not caused by "
            "your arguments; retrying the same call will fail the same way. Continue without it or tell "
            "the user.",
            details={"exception": type(exc).__name__},
        )


@contextlib.asynccontextmanager
async def _anyio_deadline(seconds: float) -> AsyncIterator[None]:
    with anyio.fail_after(seconds):
        yield


def _deadline(seconds: float) -> Any:
    """A deadline that raises TimeoutError: asyncio's native one on asyncio (a third of anyio's cost
    per call, which matters on a path every tool call takes), anyio's cancel scope elsewhere."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _anyio_deadline(seconds)
    return asyncio.timeout(seconds)


async def invoke_tool(
    tool: Tool,
    validated: Any,
    principal: Principal,
    run: RunContext,
    key: str | None = None,
    stores: Stores | None = None,
) -> Any:
    """Call the tool's function with validated arguments and injected context."""
    if tool.fn is None:
        assert tool.handler is not None
        return await tool.handler(validated)
    kwargs = dict(validated.__dict__) if validated is not None else {}
    for name, kind in tool.context_params.items():
        if issubclass(kind, Principal):
            kwargs[name] = principal
        elif issubclass(kind, RunContext):
            kwargs[name] = run
        elif issubclass(kind, IdempotencyKey):
            kwargs[name] = IdempotencyKey(key) if key else None
        elif issubclass(kind, Stores) and stores is not None:
            kwargs[name] = stores
    if tool.is_async:
        return await tool.fn(**kwargs)
    call = functools.partial(tool.fn, **kwargs)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): anyio's worker threads
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
    # asyncio's own executor hop costs less than anyio's (no limiter, no extra checkpoint); on
    # cancellation the awaiting future is cancelled and the thread abandoned, as with anyio.
    return await loop.run_in_executor(_executor(), contextvars.copy_context().run, call)


_EXECUTOR: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """maitre's own worker threads for sync tools: a hung tool's thread is abandoned at its deadline,
    so the pool must be larger than asyncio's default (cpu + 4) or a few hung tools would starve
    every other sync tool."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=64, thread_name_prefix="maitre-tool")
    return _EXECUTOR


class _Resume:
    """Await the rest of a coroutine that was already stepped once and yielded `first`.

    Lets `_attempt` run a call's first step without a deadline: a step that never suspends cannot
    be interrupted by any deadline anyway, and most cheap async tools finish in that first step.
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    value = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as done:
                    return done.value
