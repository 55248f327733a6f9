"""Long-lived sessions to one upstream MCP server: one per credential, shared by every call.

`SessionPool` keeps at most one open SDK `Client` per credential key (`UpstreamCredential.key`; the
upstream's own configured credential is the key `""`). A session is

- **opened lazily**, by the first call that needs it; concurrent first calls wait for that one open
  instead of each opening their own;
- **shared**: concurrent calls go over the same session (the SDK's dispatcher matches responses to
  requests by id), so the tool listing it was opened with (and the `Mcp-Param-*` headers the SDK
  derives from it) serves every call;
- **owned by a task of its own**, which entered the SDK client and is the one to exit it (anyio's
  cancel scopes must be left by the task that entered them). On asyncio that task is detached and
  started with an empty context, so no caller's context variables (a principal, a span) outlive the
  call that happened to open the session. When the event loop ends (`asyncio.run` returning) the task
  is cancelled with the others and the connection closes with it: a program that never calls
  `aclose()` still exits, and a stdio server it spawned is stopped. Elsewhere (trio) a session lives
  only inside `async with McpUpstream(...)`, whose task group owns it, or for one call;
- **health-checked when idle**: a session unused for `health_check_idle_s` is asked first (`ping` on
  2025-11-25; `server/discover` on 2026-07-28, which has no ping) and replaced if it does not answer;
  a session whose connection has already closed (a stdio server that died) is replaced before
  anything is sent on it;
- **reconnected with bounded exponential backoff**: a session that broke is replaced by the next
  call; when opening fails, calls in the following `Backoff.delay(n)` seconds fail at once with
  `UpstreamUnavailable` (and its `retry_after_s`) instead of piling up on a server that is down;
- **bounded**: at most `max_sessions` credentials keep a session; the least recently used idle one is
  closed to make room.

The pool knows nothing of tools, pins or errors for the model: `McpUpstream` (`maitre.mcp.client`)
decides what a failure means. `breaks_session` and `undelivered` are the two facts it shares.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.lowlevel
import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp import Client

__all__ = [
    "Backoff",
    "Connect",
    "OnOpen",
    "SessionPool",
    "UpstreamCredential",
    "UpstreamSession",
    "UpstreamUnavailable",
    "breaks_session",
    "undelivered",
]

logger = logging.getLogger("maitre.mcp.client")

_SESSION_GONE = re.compile(r"\bsession (terminated|not found|expired|unknown)\b", re.IGNORECASE)
"""How a 404 for a session id reads once the SDK has it: its own "Session terminated", or the
server's JSON-RPC error ("Session not found" from the Python and TypeScript SDK servers)."""

_DETACHED: set[asyncio.Task[None]] = set()
"""Strong references to the owner tasks running detached on asyncio (the loop keeps only weak ones)."""


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """How long to wait before opening again after failed opens: `initial_s * factor**(n-1)`, capped."""

    initial_s: float = 0.25
    """The wait after the first failure."""
    max_s: float = 30.0
    """The longest wait, however many failures came before."""
    factor: float = 2.0
    """How much each further failure multiplies the wait."""

    def delay(self, failures: int) -> float:
        """The wait after `failures` failed opens in a row (0 for none)."""
        if failures <= 0:
            return 0.0
        return float(min(self.max_s, self.initial_s * self.factor ** min(failures - 1, 64)))


@dataclass(kw_only=True, eq=False)
class UpstreamCredential:
    """What one connection to an upstream authenticates with; sessions are pooled by `key`."""

    key: str
    """Names the credential for pooling (a user id, a token's hash): equal keys share one session.
    It is never sent anywhere."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers for this credential, added to (and overriding) the upstream's own."""
    auth: httpx2.Auth | None = None
    """An `httpx2.Auth` flow for this credential (replaces the upstream's own)."""


class UpstreamUnavailable(Exception):
    """The upstream could not be reached recently; the pool waits `retry_after_s` before trying again."""

    def __init__(self, message: str, *, retry_after_s: float, cause: BaseException | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.cause = cause


def breaks_session(exc: BaseException) -> bool:
    """Whether `exc` means the session it happened on cannot carry another request."""
    for leaf in _leaves(exc):
        if isinstance(leaf, MCPError) and (leaf.code == CONNECTION_CLOSED or _session_gone(leaf)):
            return True
        if isinstance(
            leaf,
            httpx2.TransportError
            | OSError
            | anyio.BrokenResourceError
            | anyio.ClosedResourceError
            | anyio.EndOfStream,
        ):
            return True
    return False


def undelivered(exc: BaseException) -> bool:
    """Whether the request that failed with `exc` certainly did not run: the server answered 404 for
    the session it was sent on (it expired or the server restarted), so it is safe to send again."""
    return any(_session_gone(leaf) for leaf in _leaves(exc))


def _session_gone(leaf: BaseException) -> bool:
    return (
        isinstance(leaf, MCPError)
        and leaf.code != CONNECTION_CLOSED
        and bool(_SESSION_GONE.search(leaf.message))
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _loop_token() -> object:
    """The running event loop, as the pool tells loops apart (asked on every call, so cheaply: on
    asyncio the loop itself, which is what anyio's token wraps; elsewhere anyio's token)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return anyio.lowlevel.current_token()


def _closed(client: Client) -> bool:
    """Whether the client's connection has already closed (read EOF: a stdio server that exited).

    The SDK has no public flag for it; its dispatcher keeps one. Without it (another SDK version) the
    answer is False, and the idle health check and `breaks_session` still catch a dead connection.
    """
    dispatcher = getattr(client.session, "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


class UpstreamSession:
    """One open connection to the upstream, entered and exited by a task of its own."""

    def __init__(self, key: str) -> None:
        self.key = key
        """The credential key it was opened for."""
        self.client: Client | None = None
        """The connected SDK client, while the session is open."""
        self.error: BaseException | None = None
        """Why opening (or running) the session failed."""
        self.opened_at = 0.0
        self.last_used = 0.0
        self.in_flight = 0
        """Calls currently using it."""
        self.broken = False
        """Set once the session must not carry another request."""
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._scope: anyio.CancelScope | None = None

    @property
    def done(self) -> bool:
        """Whether the owner task has exited the client."""
        return self._done.is_set()

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.broken and not _closed(self.client)

    @property
    def modern(self) -> bool:
        return self.client is not None and self.client.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def run(self, connect: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        """Open the client, hold it open until `close()`, then exit it (the owner task's body)."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                try:
                    async with connect() as client:
                        self.client = client
                        self.opened_at = self.last_used = time.monotonic()
                        self._ready.set()
                        await self._stop.wait()
                except Exception as exc:
                    self.error = exc
                    if self._ready.is_set():
                        logger.info("MCP upstream session closed with %s", type(exc).__name__)
        finally:
            self.client = None
            self.broken = True
            self._ready.set()
            self._done.set()

    async def wait_open(self, timeout_s: float) -> None:
        """Wait until the session is open; raise what opening raised (TimeoutError after `timeout_s`)."""
        with anyio.move_on_after(timeout_s) as waited:
            await self._ready.wait()
        if waited.cancelled_caught:
            self.cancel()
            raise TimeoutError(f"the MCP upstream did not complete its handshake within {timeout_s:g} s")
        if self.client is None:
            raise self.error or ConnectionError("the MCP upstream session closed while opening")

    def stop(self) -> None:
        """Ask the owner task to exit the client, without waiting for it (it exits in the background;
        the SDK bounds its own shutdown: a stdio server gets a grace period, then is killed)."""
        self.broken = True
        self._stop.set()

    def cancel(self) -> None:
        self.broken = True
        self._stop.set()
        if self._scope is not None:
            self._scope.cancel()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Ask the owner task to exit the client; cancel it if that takes longer than `timeout_s`."""
        self.broken = True
        self._stop.set()
        with anyio.move_on_after(timeout_s):
            await self._done.wait()
        if not self._done.is_set():
            self.cancel()
            with anyio.move_on_after(timeout_s, shield=True):
                await self._done.wait()


@dataclass(kw_only=True)
class _Slot:
    session: UpstreamSession | None = None
    failures: int = 0
    retry_at: float = 0.0
    last_error: BaseException | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)


Connect = Callable[[UpstreamCredential | None], AbstractAsyncContextManager[Client]]
"""Builds the SDK client (an async context manager) for a credential (None: the upstream's own)."""
OnOpen = Callable[[Client], Awaitable[None]]
"""Runs on every newly opened session before any call uses it (`McpUpstream` lists the tools)."""


class SessionPool:
    """The open sessions of one upstream, one per credential key (see the module docstring)."""

    def __init__(
        self,
        connect: Connect,
        *,
        name: str,
        on_open: OnOpen | None = None,
        backoff: Backoff | None = None,
        health_check_idle_s: float | None = 30.0,
        open_timeout_s: float = 30.0,
        max_sessions: int = 64,
        share: bool = True,
    ) -> None:
        self._connect = connect
        self.name = name
        self.on_open = on_open
        self.backoff = backoff or Backoff()
        self.health_check_idle_s = health_check_idle_s
        self.health_check_timeout_s = 5.0
        """How long the health check of an idle session waits for its answer."""
        self.open_timeout_s = open_timeout_s
        self.max_sessions = max(1, max_sessions)
        self.share = share
        """False: every call opens its own session and closes it after (no pooling)."""
        self.task_group: anyio.abc.TaskGroup | None = None
        """Where to start owner tasks when not on asyncio (set inside `async with McpUpstream`)."""
        self.opened = 0
        """How many sessions this pool has opened (reconnects included)."""
        self._slots: dict[str, _Slot] = {}
        self._retiring: list[UpstreamSession] = []
        """Sessions told to stop, still exiting in the background (`aclose` waits for them)."""
        self._token: object | None = None

    # -- the event loop the sessions belong to -------------------------------------------------------

    def _this_loop(self) -> None:
        """Forget sessions of another event loop (`run_sync` runs each call on a fresh one): they can
        neither be used nor closed from here, and their loop cancelled their tasks when it ended."""
        token = _loop_token()
        if self._token != token:
            if self._slots:
                logger.debug("MCP upstream %s: a new event loop; its sessions start afresh", self.name)
            self._slots = {}
            self._retiring = []
            self._token = token

    def _retire(self, session: UpstreamSession) -> None:
        session.stop()
        self._retiring = [s for s in self._retiring if not s.done]
        self._retiring.append(session)

    def _spawn(self, session: UpstreamSession, credential: UpstreamCredential | None) -> bool:
        def connect() -> AbstractAsyncContextManager[Client]:
            return self._connect(credential)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            if self.task_group is None:
                return False
            self.task_group.start_soon(session.run, connect)
            return True
        task = loop.create_task(session.run(connect), context=contextvars.Context())
        _DETACHED.add(task)
        task.add_done_callback(_DETACHED.discard)
        return True

    # -- using a session -------------------------------------------------------------------------------

    @asynccontextmanager
    async def client(self, credential: UpstreamCredential | None = None) -> AsyncIterator[Client]:
        """A connected client for `credential`: the shared session, or one for this block alone."""
        session = await self.acquire(credential) if self.share else None
        if session is None:
            async with self._connect(credential) as own:
                self.opened += 1
                if self.on_open is not None:
                    await self.on_open(own)
                yield own
            return
        assert session.client is not None
        session.in_flight += 1
        try:
            yield session.client
        except BaseException as exc:
            if breaks_session(exc):
                self.discard(session)
            raise
        finally:
            session.in_flight -= 1
            session.last_used = time.monotonic()

    async def acquire(self, credential: UpstreamCredential | None = None) -> UpstreamSession | None:
        """The open session for `credential`, opening (or replacing) it if needed.

        Returns None when no task can own a session here (not asyncio, outside `async with`).

        Raises:
            UpstreamUnavailable: opening failed recently; the backoff has not passed yet.
            Exception: what opening raised (the first failure after a success is raised as it is).
        """
        self._this_loop()
        key = credential.key if credential is not None else ""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        session = slot.session
        if session is not None and session.usable and not self._idle(session):
            session.last_used = time.monotonic()
            return session
        async with slot.lock:
            session = slot.session
            if session is not None and session.usable:
                if not self._idle(session) or await self._healthy(session):
                    session.last_used = time.monotonic()
                    return session
                logger.info("MCP upstream %s: an idle session did not answer; reconnecting", self.name)
            if session is not None:
                slot.session = None
                self._retire(session)
            wait = slot.retry_at - time.monotonic()
            if wait > 0:
                raise UpstreamUnavailable(
                    f"MCP upstream {self.name} failed {slot.failures} time(s) in a row; next try in {wait:.1f} s",
                    retry_after_s=wait,
                    cause=slot.last_error,
                )
            try:
                session = await self._open(key, credential)
            except Exception as exc:
                slot.failures += 1
                slot.last_error = exc
                slot.retry_at = time.monotonic() + self.backoff.delay(slot.failures)
                raise
            if session is None:
                return None
            slot.failures, slot.retry_at, slot.last_error = 0, 0.0, None
            slot.session = session
        self._make_room(keep=key)
        return session

    async def _open(self, key: str, credential: UpstreamCredential | None) -> UpstreamSession | None:
        session = UpstreamSession(key)
        if not self._spawn(session, credential):
            return None
        try:
            await session.wait_open(self.open_timeout_s)
            self.opened += 1
            if self.on_open is not None:
                assert session.client is not None
                await self.on_open(session.client)
        except BaseException:
            self._retire(session)
            raise
        return session

    def _idle(self, session: UpstreamSession) -> bool:
        limit = self.health_check_idle_s
        return limit is not None and session.in_flight == 0 and time.monotonic() - session.last_used >= limit

    async def _healthy(self, session: UpstreamSession) -> bool:
        """Ask an idle session whether it still answers (ping; `server/discover` on 2026-07-28)."""
        client = session.client
        if client is None:
            return False
        try:
            with anyio.fail_after(min(self.health_check_timeout_s, self.open_timeout_s)):
                if session.modern:
                    await client.session.send_discover(client.protocol_version)
                else:
                    await client.session.send_ping()
        except Exception as exc:
            logger.debug("MCP upstream %s: health check failed (%s)", self.name, type(exc).__name__)
            return False
        return True

    def discard(self, session: UpstreamSession) -> None:
        """Take a broken session out of the pool; the next call opens a new one."""
        session.broken = True
        slot = self._slots.get(session.key)
        if slot is not None and slot.session is session:
            slot.session = None
        self._retire(session)

    def _make_room(self, *, keep: str) -> None:
        open_slots = [(k, s) for k, s in self._slots.items() if s.session is not None]
        if len(open_slots) <= self.max_sessions:
            return
        idle = sorted(
            (
                (s.session.last_used, k)
                for k, s in open_slots
                if k != keep and s.session and not s.session.in_flight
            ),
        )
        for _, k in idle[: len(open_slots) - self.max_sessions]:
            victim = self._slots[k].session
            self._slots[k].session = None
            if victim is not None:
                self._retire(victim)

    def is_open(self, credential: UpstreamCredential | None = None) -> bool:
        """Whether `credential` has a usable session now (in this event loop)."""
        if self._token != _loop_token():
            return False
        slot = self._slots.get(credential.key if credential is not None else "")
        return slot is not None and slot.session is not None and slot.session.usable

    def sessions(self) -> list[UpstreamSession]:
        """The sessions open now (for tests and metrics)."""
        return [s.session for s in self._slots.values() if s.session is not None and s.session.usable]

    async def aclose(self) -> None:
        """Close every session (each owner task exits its client); the pool can open new ones after."""
        slots, self._slots = self._slots, {}
        retiring, self._retiring = self._retiring, []
        if self._token != _loop_token():
            return  # another loop's sessions: that loop closed them when it ended
        sessions = [s.session for s in slots.values() if s.session is not None]
        sessions += [s for s in retiring if not s.done]
        if not sessions:
            return
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(session.close)
