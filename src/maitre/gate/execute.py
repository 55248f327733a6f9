"""Stage 9, execute: run the tool under a deadline, retrying only what is worth retrying.

- Async tools are cancelled at the deadline. Sync tools run in a worker thread; at the deadline the
  caller gets TIMEOUT and the thread is abandoned (Python cannot kill a thread; the result, if it
  ever comes, is discarded).
- Worker threads are admitted, not queued: a sync tool may hold at most `tool.max_concurrency`
  threads (8 by default) and all sync tools together `SYNC_POOL_SIZE`. A thread counts until it
  actually returns, so a hung tool past its deadline still holds its slot. A call over either limit
  is TEMPORARY_UNAVAILABLE at once (retryable, with `retry_after_s`) instead of waiting in a queue
  behind hung threads until its own deadline.
- Retries (seed 002): only a `ToolError(..., retryable=True)` raised by the tool, a declared
  transient exception, or a timeout of a read tool. A write tool that timed out may have acted, so
  it is not retried blindly. Backoff is exponential with full jitter and a cap.
- Any other exception is a bug in the tool: INTERNAL, logged to stderr with its traceback, never
  shown to the model. That includes every `BaseException` a tool raises (SystemExit,
  KeyboardInterrupt, GeneratorExit, its own subclasses, even a CancelledError nobody asked for):
  one tool must not stop the process that serves all the others. Only the host's own cancellation
  propagates - on asyncio a CancelledError while the calling task is being cancelled
  (`Task.cancelling()`), on other backends anyio's cancellation exception (trio raises it only
  for a real cancel scope), and the GeneratorExit of the calling coroutine being closed. The call
  counts as executed, so a write's idempotency key is marked uncertain, and it is audited.
- A write whose idempotency key this call holds is not abandoned half-way by its caller's
  cancellation (a worker stopping, a server shutting down): once its side effect has started, the
  attempt runs on shielded from the caller's cancel scopes, still bounded by the tool's own
  deadline; a sync tool's thread is waited for even when the calling task is cancelled natively
  (`task.cancel()`), to the same deadline. Then its result is shaped, its key settled and the call
  audited, once, (`record.record_interrupted`, also shielded) - a retry with the same approval or
  key replays it - and only then does the cancellation go on. An async tool cancelled natively
  cannot be resumed: its key is marked uncertain. A retry backoff is not waited out for a caller
  that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import math
import random
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import anyio

from ..context import IdempotencyKey, RunContext
from ..stores.base import Stores
from ..tools import Tool
from ..types import Effect, ErrorCode, Principal, ToolError
from . import personal
from .base import CallContext
from .record import RECORD_GRACE_S, record_interrupted

__all__ = ["SYNC_POOL_SIZE", "current_idempotency_key", "execute", "invoke_tool", "sync_threads_held"]

logger = logging.getLogger("maitre.gate")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")

_HANDLER_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "maitre_idempotency_key", default=None
)


def current_idempotency_key() -> str | None:
    """The key the gate minted for the call whose handler is running now, else None.

    A handler-based tool (an MCP upstream's, say) gets only its arguments; this is how it reads the
    key to pass the operation's name on (`McpUpstream` sends it in `_meta`), so a retry after a
    crash names the same operation to a server that deduplicates. Only the runtime's key is here,
    never one a model chose.
    """
    return _HANDLER_KEY.get()


async def execute(ctx: CallContext) -> ToolError | None:
    tool = ctx.tool
    assert tool is not None
    if ctx.replayed:
        return None  # the idempotency stage found a completed key: nothing runs twice
    if tool.personal:  # its key, before it runs (a forget during the call must not re-key its records)
        refused = await personal.prepare(ctx)
        if refused is not None:
            return refused
    if not ctx.owns_key:
        return await _attempts(ctx, tool, guard=False)
    try:
        return await _attempts(ctx, tool, guard=True)
    except _Interrupted as stop:
        # The caller was cancelled while its write ran: record what the write did before going on.
        with anyio.CancelScope(shield=True) as recording:
            recording.deadline = anyio.current_time() + RECORD_GRACE_S
            await record_interrupted(ctx, stop.error)
        if stop.cancel is not None:
            raise stop.cancel from None
    await anyio.lowlevel.checkpoint()  # the caller's cancel scope is cancelled: this raises it
    return None  # pragma: no cover - only if the scope's cancellation was withdrawn meanwhile


class _Interrupted(Exception):
    """A guarded write's attempt ended (or was waited for) after its caller was cancelled."""

    def __init__(self, error: ToolError | None, cancel: BaseException | None) -> None:
        super().__init__("the caller was cancelled during a write")
        self.error = error
        """What the attempt came to (None: it succeeded and `ctx.output` holds its value)."""
        self.cancel = cancel
        """The cancellation to raise once the call is recorded; None when it is still pending in
        an anyio cancel scope (the next checkpoint raises it)."""


def _cancel_pending() -> bool:
    """True when a cancel scope around the caller has been cancelled (outside any shield)."""
    return anyio.current_effective_deadline() == -math.inf


async def _attempts(ctx: CallContext, tool: Tool, *, guard: bool) -> ToolError | None:
    """Every attempt the call gets; `guard`: a write whose key this call holds (see the module
    docstring: each attempt is shielded, and the caller's cancellation raises `_Interrupted`)."""
    limits = ctx.gate.limits
    attempts = 1 + tool.retries
    error: ToolError | None = None
    for attempt in range(1, attempts + 1):
        if _time_left(ctx, tool) <= 0:
            return error or _deadline_passed(ctx, tool)  # no new attempt past the door's deadline
        ctx.attempts = attempt
        if guard:
            with anyio.CancelScope(shield=True):  # bounded: the attempt has its own deadline inside
                error = await _attempt(ctx, tool, guard=True)
            if _cancel_pending():
                raise _Interrupted(error, None)
        else:
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
        try:
            await anyio.sleep(random.uniform(0, delay))
        except anyio.get_cancelled_exc_class() as cancel:
            if not guard:
                raise
            raise _Interrupted(error, cancel) from None
    return None  # pragma: no cover - the loop always returns


def _time_left(ctx: CallContext, tool: Tool) -> float:
    """Seconds this attempt may run: the tool's timeout, or less if the door set a deadline."""
    deadline = ctx.options.deadline_s
    if deadline is None:
        return tool.timeout
    return min(tool.timeout, deadline - (time.perf_counter() - ctx.started))


def _deadline_passed(ctx: CallContext, tool: Tool) -> ToolError:
    return ToolError(
        ErrorCode.TIMEOUT,
        f"The deadline for this call ({ctx.options.deadline_s:g} s) passed before {tool.name} could run; "
        "it was not executed.",
        details={"deadline_s": ctx.options.deadline_s, "executed": False},
    )


async def _attempt(ctx: CallContext, tool: Tool, *, guard: bool = False) -> ToolError | None:
    lease: _Lease | None = None
    if tool.fn is not None and not tool.is_async:
        admitted = _SLOTS.lease(tool)
        if isinstance(admitted, ToolError):
            return admitted  # nothing ran: the key is released and the error is the gate's own
        lease = admitted
    ctx.executed = True
    ctx.tool_raised = False
    resume: _Resume | None = None
    budget = _time_left(ctx, tool)
    started = time.monotonic()
    try:
        coro = invoke_tool(
            tool, ctx.validated, ctx.principal, ctx.run, ctx.idempotency_key, ctx.gate.stores, lease=lease
        )
        try:
            first = coro.send(None)
        except StopIteration as done:  # finished without suspending: no deadline could have fired
            ctx.output = done.value
            return None
        resume = _Resume(coro, first)
        async with _deadline(max(0.0, budget - (time.monotonic() - started))):
            ctx.output = await resume
        return None
    except BaseException as caught:
        failure = _failure(ctx, tool, caught, budget, resume)
        if failure is not None:
            return failure
        if not guard or isinstance(caught, GeneratorExit):
            raise  # the host stopping its own work (a coroutine being closed cannot wait for anything)
        left = budget - (time.monotonic() - started)
        raise _Interrupted(await _after_cancel(ctx, tool, lease, left), caught) from None


def _failure(
    ctx: CallContext, tool: Tool, caught: BaseException, budget: float, resume: _Resume | None
) -> ToolError | None:
    """The error an attempt that raised `caught` comes to; None when `caught` is the host stopping
    the call (see the module docstring), which is not the tool's failure but the caller's."""
    if isinstance(caught, TimeoutError):
        return ToolError(
            ErrorCode.TIMEOUT,
            f"{tool.name} did not finish within {budget:.3g} s and was stopped."
            + (
                " It is safe to try again later."
                if tool.effect is Effect.READ
                else " It may or may not have taken effect; check its status before trying again."
            ),
            details={"timeout_s": tool.timeout},
        )
    if isinstance(caught, ToolError):
        ctx.tool_raised = True  # its text is the tool's: it carries the tool's trust, not the gate's
        return caught
    if isinstance(caught, tool.transient):
        return ToolError(
            ErrorCode.TEMPORARY_UNAVAILABLE,
            f"{tool.name} is temporarily unavailable ({_type_name(caught)}). Try again later.",
            retryable=True,
        )
    raised = caught.raised if isinstance(caught, _Escaped) else caught
    if raised is caught and not isinstance(raised, Exception) and _host_stopping(raised, resume):
        return None
    logger.error(
        "tool %s raised %s (call %s)", tool.name, type(raised).__name__, ctx.call.id, exc_info=raised
    )
    return ToolError(
        ErrorCode.INTERNAL,
        f"{tool.name} failed with an internal error ({_type_name(raised)}). This is not caused by "
        "your arguments; retrying the same call will fail the same way. Continue without it or tell "
        "the user.",
        details={"exception": _type_name(raised)},
    )


async def _after_cancel(ctx: CallContext, tool: Tool, lease: _Lease | None, left: float) -> ToolError | None:
    """How a guarded write whose calling task was cancelled natively (through the shield) ended.

    A sync tool's thread cannot be stopped: it is waited for, to the attempt's deadline, and its
    value or failure is the call's. A sync call no thread had picked up yet never runs. An async
    tool received the cancellation itself: it may or may not have acted."""
    if lease is not None:
        if not lease.ran or lease.future is None:
            ctx.executed = False
            return ToolError(
                ErrorCode.TEMPORARY_UNAVAILABLE,
                f"The caller was cancelled before {tool.name} started; it was not executed.",
                details={"cancelled": True, "executed": False},
            )
        try:
            ctx.output = await _thread_outcome(lease.future, left)
        except BaseException as caught:
            return _failure(ctx, tool, caught, tool.timeout, None) or _stopped(tool)
        return None
    return _stopped(tool)


def _stopped(tool: Tool) -> ToolError:
    return ToolError(
        ErrorCode.TIMEOUT,
        f"{tool.name} was stopped before it finished because its caller was cancelled. It may or may not "
        "have taken effect; check its status before trying again.",
        details={"cancelled": True},
    )


async def _thread_outcome(future: Future[Any], seconds: float) -> Any:
    """The value of a sync tool's thread, waited for up to `seconds` however often the calling task
    is cancelled meanwhile (the cancellation it was given is raised by the caller afterwards)."""
    waiter = asyncio.wrap_future(future)
    end = time.monotonic() + seconds
    while not waiter.done():
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait((waiter,), timeout=left)
    return waiter.result()


def _type_name(exc: BaseException) -> str:
    """An exception's class name as the gate may quote it in its own (trusted) text. A hostile tool
    chooses that name (`type("</untrusted-data> SYSTEM: ...", (Exception,), {})`), so keep only what
    a Python identifier can hold."""
    return _NOT_NAME.sub("", type(exc).__name__)[:60] or "Exception"


def _host_stopping(exc: BaseException, resume: _Resume | None) -> bool:
    """True when `exc` is the host stopping this call, not something the tool raised on its own.

    asyncio: a CancelledError counts only while the calling task has a cancellation request
    pending (`cancelling() > 0`; `task.cancel()`, `asyncio.timeout` and anyio's cancel scopes all
    make one). Other backends (trio): anyio's cancellation class, which only trio itself creates.
    GeneratorExit: only when the calling coroutine itself is being closed.
    """
    if isinstance(exc, GeneratorExit):
        return resume is not None and resume.closed
    if not isinstance(exc, anyio.get_cancelled_exc_class()):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not asyncio
        return True
    return task is None or task.cancelling() > 0


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
    *,
    lease: _Lease | None = None,
) -> Any:
    """Call the tool's function with validated arguments and injected context."""
    if tool.fn is None:
        assert tool.handler is not None
        token = _HANDLER_KEY.set(key)
        try:
            return await tool.handler(validated)
        finally:
            _HANDLER_KEY.reset(token)
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
    if lease is None:  # a caller other than `_attempt`: admit here
        admitted = _SLOTS.lease(tool)
        if isinstance(admitted, ToolError):
            raise admitted
        lease = admitted
    held: _Lease = lease
    work = functools.partial(held.run, contextvars.copy_context(), functools.partial(tool.fn, **kwargs))
    try:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio): anyio's worker threads, under our own admission
            return await anyio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1)
            )
        # asyncio's own executor hop costs less than anyio's (no limiter, no extra checkpoint); on
        # cancellation the awaiting future is cancelled and the thread abandoned, as with anyio (the
        # future is kept on the lease: a guarded write's caller waits for it, see `_after_cancel`).
        held.future = future = _executor().submit(work)
        return await asyncio.wrap_future(future, loop=loop)
    finally:
        held.give_up()  # frees the slot only if no thread ever started the call


SYNC_POOL_SIZE = 64
"""Worker threads for sync tools, shared by every gate in the process. Larger than asyncio's
default (cpu + 4) because a hung tool's thread stays taken after its deadline."""
_RETRY_AFTER_S = 1.0

_EXECUTOR: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """maitre's own worker threads for sync tools (admission in `_Slots` keeps them from queueing)."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=SYNC_POOL_SIZE, thread_name_prefix="maitre-tool")
    return _EXECUTOR


def sync_threads_held(tool: Tool | None = None) -> int:
    """Worker threads held right now by sync tools (or by one tool), hung ones included."""
    return _SLOTS.held(tool)


class _Slots:
    """Counts the worker threads sync tools hold, from admission until the thread returns."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.busy = 0
        self.per_tool: dict[Tool, int] = {}

    def lease(self, tool: Tool) -> _Lease | ToolError:
        with self.lock:
            held = self.per_tool.get(tool, 0)
            limit = tool.max_concurrency
            if self.busy < self.size and (limit is None or held < limit):
                self.busy += 1
                self.per_tool[tool] = held + 1
                return _Lease(self, tool)
        if limit is not None and held >= limit:
            message = (
                f"{tool.name} is busy: {held} calls of it are still running (its limit is {limit}). "
                f"Try again in a moment, or continue without it."
            )
            details: dict[str, Any] = {"reason": "tool_concurrency", "limit": limit}
        else:
            logger.warning("all %d sync tool worker threads are taken; refusing %s", self.size, tool.name)
            message = (
                f"{tool.name} cannot run now: all {self.size} worker threads for tools are busy (some "
                "may be stuck). Try again in a moment, or continue without it."
            )
            details = {"reason": "thread_pool", "limit": self.size}
        return ToolError(
            ErrorCode.TEMPORARY_UNAVAILABLE,
            message,
            retryable=True,
            retry_after_s=_RETRY_AFTER_S,
            details=details,
        )

    def release(self, tool: Tool) -> None:
        with self.lock:
            self.busy -= 1
            held = self.per_tool[tool] - 1
            if held:
                self.per_tool[tool] = held
            else:
                del self.per_tool[tool]

    def held(self, tool: Tool | None) -> int:
        with self.lock:
            return self.busy if tool is None else self.per_tool.get(tool, 0)


_SLOTS = _Slots(SYNC_POOL_SIZE)


class _Lease:
    """One admitted sync call's slot: released when its thread returns, or at once if no thread
    ever started it (the caller gave up while it waited for a thread)."""

    __slots__ = ("_slots", "_state", "_tool", "future", "ran")

    def __init__(self, slots: _Slots, tool: Tool) -> None:
        self._slots = slots
        self._tool = tool
        self._state = "admitted"  # -> "running" -> "done", or "admitted" -> "done"
        self.ran = False
        """True once a thread started the call (final after `give_up`: False then means never)."""
        self.future: Future[Any] | None = None
        """The thread's future (asyncio only), for a caller that waits past its own cancellation."""

    def run(self, context: contextvars.Context, call: Callable[[], Any]) -> Any:
        """Runs in the worker thread."""
        with self._slots.lock:
            if self._state != "admitted":
                return None  # given up before a thread picked it up: nobody awaits the result
            self._state = "running"
            self.ran = True
        try:
            return context.run(call)
        except BaseException as exc:
            if isinstance(exc, Exception):
                raise
            # A thread cannot be cancelled, so this is the tool's own. Carried as an Exception: as
            # itself, asyncio would throw it into the awaiting task like a cancellation or a close.
            raise _Escaped(exc) from exc
        finally:
            self._done()

    def give_up(self) -> None:
        """Called by the awaiting side when it stops waiting, whatever the reason."""
        with self._slots.lock:
            if self._state != "admitted":
                return  # running (its thread releases the slot when it returns) or already done
            self._state = "done"
        self._slots.release(self._tool)

    def _done(self) -> None:
        self._state = "done"  # only the running thread gets here; give_up leaves "running" alone
        self._slots.release(self._tool)


class _Escaped(Exception):
    """A BaseException a sync tool raised in its worker thread, carried back as a plain Exception."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(type(raised).__name__)
        self.raised = raised


class _Resume:
    """Await the rest of a coroutine that was already stepped once and yielded `first`.

    Lets `_attempt` run a call's first step without a deadline: a step that never suspends cannot
    be interrupted by any deadline anyway, and most cheap async tools finish in that first step.
    """

    __slots__ = ("_coro", "_first", "closed")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first
        self.closed = False
        """True once the awaiting coroutine was closed (its GeneratorExit is not the tool's)."""

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                self.closed = True
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
