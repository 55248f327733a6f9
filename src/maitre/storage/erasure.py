"""Erasing freed bytes after a deletion, in the background, without ever waiting for a reader.

A deletion commits at once, but the bytes of what it removed outlive the transaction while any
reader's snapshot predates it: SQLite keeps the old page images in the WAL (and cannot copy the new
pages over the old ones in the main file) until every such reader has finished; PostgreSQL keeps the
dead tuples until no snapshot can see them. A reader *may* legitimately hold that snapshot, so the
deletion must not wait for it: `wal_checkpoint(TRUNCATE)` in the request path used to wait out the
busy timeout (30 s) and report a committed forget as a timeout (issue 16).

`BackgroundEraser` runs one backend's erasure step (`attempt`, which returns True when the freed
bytes are gone and False when a reader still pins them) in a daemon thread: each deletion calls
`request()`, the thread retries with a growing pause (50 ms up to 1 s) until an attempt succeeds
after the latest request, so the bytes are gone within about a second of the last pinning reader
ending. `wait(timeout)` lets a caller (a test, a shutdown hook, `MemoryStore.wait_erased`) block on it
deliberately; `close()` stops the thread after one last attempt, and runs at interpreter exit too.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable

__all__ = ["BackgroundEraser"]

log = logging.getLogger(__name__)


class BackgroundEraser:
    """Retries `attempt` in a daemon thread after each `request()` until it succeeds."""

    def __init__(
        self,
        attempt: Callable[[], bool],
        *,
        name: str,
        first_pause_s: float = 0.05,
        max_pause_s: float = 1.0,
        warn_after_s: float = 60.0,
        release: Callable[[], None] | None = None,
    ) -> None:
        self._attempt = attempt
        self._release = release
        self._name = name
        self._first_pause = first_pause_s
        self._max_pause = max_pause_s
        self._warn_after = warn_after_s
        self._cond = threading.Condition()
        self._requested = 0
        self._erased = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._failing = False

    @property
    def pending(self) -> bool:
        """True while a requested erasure has not succeeded yet."""
        with self._cond:
            return self._erased < self._requested

    def request(self) -> None:
        """Ask for an erasure (after a deletion committed); returns at once."""
        with self._cond:
            if self._stopping:
                return
            self._requested += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
                # A script that deletes and exits at once must not leave the bytes behind: at exit
                # the pending erasure gets its last attempt (a weak reference: no leak of stores).
                atexit.register(_close_at_exit, weakref.ref(self))
            self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        """Block until every requested erasure succeeded (True) or `timeout` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._erased < self._requested:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self) -> None:
        """Stop the thread; one last attempt if an erasure is still pending."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        if self.pending and (thread is None or not thread.is_alive()):
            if not self._try():
                log.warning("%s: freed bytes are still pinned by a reader at close", self._name)
            if self._release is not None:
                self._release()

    def _try(self) -> bool:
        with self._cond:
            target = self._requested
        try:
            done = self._attempt()
        except Exception:  # a broken connection must not kill the thread; the next try reconnects
            if not self._failing:
                log.exception("%s: erasure attempt failed (retrying, said once)", self._name)
            self._failing = True
            done = False
        else:
            self._failing = False
        if done:
            with self._cond:
                self._erased = max(self._erased, target)
                self._cond.notify_all()
        return done

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while self._erased >= self._requested and not self._stopping:
                        self._cond.wait()
                    if self._stopping:
                        return
                started = time.monotonic()
                pause = self._first_pause
                warned = False
                while not self._try():
                    if not warned and time.monotonic() - started > self._warn_after:
                        log.warning(
                            "%s: a reader has pinned deleted bytes for over %.0f s; still retrying",
                            self._name,
                            self._warn_after,
                        )
                        warned = True
                    with self._cond:
                        if self._stopping:
                            return
                        self._cond.wait(pause)
                    pause = min(pause * 2, self._max_pause)
        finally:
            if self._release is not None:
                self._release()


def _close_at_exit(ref: weakref.ReferenceType[BackgroundEraser]) -> None:
    eraser = ref()
    if eraser is not None:
        eraser.close()
