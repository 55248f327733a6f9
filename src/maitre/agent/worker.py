"""The resume worker: paused runs continue by themselves once a person has decided their approvals.

```python
worker = ResumeWorker(agent)          # the same tools, model and stores as the agent that paused
await worker.run_forever()            # or: resumed = await worker.run_once()
```

Each pass lists the paused runs in the agent's stores and, for every run whose pending approvals
are all decided (approved, denied, expired or used; none still `pending`):

1. claims it through the storage layer (`maitre.storage.claims`): a lease, with the gate's
   dead-owner rule, so of several workers - in this process, in others, on other hosts sharing a
   Postgres schema - one holds the run; the lease is renewed while the run goes on;
2. reads the run again: a run another worker resumed meanwhile is no longer paused (or waits on a
   new approval) and is left alone;
3. resumes it with `Agent.resume(run_id, principal=<the run's own principal>)`: a run is bound to
   the principal that started it, and the resumed calls run as that principal, in its tenant;
4. releases the claim.

The approved call itself runs at most once whatever happens (the gate consumes an approval once and
keeps an idempotency key); the claim is what keeps the *run* from continuing twice - two model turns,
two answers. A run whose resume raises is logged and released, and not tried again before a
backoff (doubling up to `max_retry_s`), so one broken run cannot keep a worker busy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ..storage.claims import Claim, ClaimStore, claim_store
from .run import Run, RunStatus

if TYPE_CHECKING:
    from .loop import Agent

__all__ = ["ResumeWorker"]

logger = logging.getLogger("maitre.agent.worker")


class ResumeWorker:
    """Resume an agent's paused runs once their approvals are decided. See the module docstring.

    Args:
        agent: the agent that continues the runs (its stores hold the runs and approvals).
        poll_s: seconds between passes of `run_forever`.
        lease_s: how long a claim holds without renewal; renewed every third of it while a run
            goes on. A worker that dies on this host is taken over at once; on another host, after
            the lease.
        claims: where claims are kept (default: `claim_store(agent.stores)`, the stores' database).
        retry_s: the first wait before a run whose resume raised is tried again (then doubled).
        max_retry_s: the longest such wait.
        batch: at most this many paused runs are looked at per pass (most recently updated first).
        on_resume: called with each run once it is resumed (the CLI prints a line).

    Example:
        >>> worker = ResumeWorker(make_agent(stores), poll_s=0.5)
        >>> resumed = await worker.run_once()
        >>> [run.status for run in resumed]
    """

    def __init__(
        self,
        agent: Agent,
        *,
        poll_s: float = 1.0,
        lease_s: float = 60.0,
        claims: ClaimStore | None = None,
        retry_s: float = 5.0,
        max_retry_s: float = 300.0,
        batch: int = 1000,
        on_resume: Callable[[Run], None] | None = None,
    ) -> None:
        if poll_s <= 0 or lease_s <= 0 or retry_s <= 0:
            raise ValueError("poll_s, lease_s and retry_s must be > 0")
        self.agent = agent
        self.poll_s = poll_s
        self.lease_s = lease_s
        self.claims = claims if claims is not None else claim_store(agent.stores)
        """The claim store the worker takes runs through."""
        self.retry_s = retry_s
        self.max_retry_s = max_retry_s
        self.batch = batch
        self.on_resume = on_resume
        self._failures: dict[str, tuple[int, float]] = {}
        """run id -> (failures in a row, monotonic time before which it is not tried)."""

    async def run_once(self) -> list[Run]:
        """One pass: resume every paused run whose approvals are all decided; the runs resumed."""
        stores = self.agent.stores
        resumed: list[Run] = []
        for summary in await stores.runs.list(status=str(RunStatus.PAUSED), limit=self.batch):
            failed = self._failures.get(summary.run_id)
            if failed is not None and time.monotonic() < failed[1]:
                continue
            run = await self._ready(summary.run_id)
            if run is None:
                continue
            claim = await self.claims.claim(run.id, lease_s=self.lease_s)
            if claim is None:
                continue  # another worker holds it
            try:
                done = await self._resume(claim)
            finally:
                await self.claims.release(claim)
            if done is not None:
                resumed.append(done)
                if self.on_resume is not None:
                    try:
                        self.on_resume(done)
                    except Exception:
                        logger.exception("on_resume callback failed")
        return resumed

    async def run_forever(self, stop: anyio.Event | None = None) -> None:
        """Pass after pass, `poll_s` apart, until `stop` is set (or the task is cancelled)."""
        while stop is None or not stop.is_set():
            try:
                await self.run_once()
            except Exception:  # a store that is down now may be back at the next pass
                logger.exception("resume worker pass failed; trying again in %ss", self.poll_s)
            if stop is None:
                await anyio.sleep(self.poll_s)
            else:
                with anyio.move_on_after(self.poll_s):
                    await stop.wait()

    async def _ready(self, run_id: str) -> Run | None:
        """The saved run, if it is paused and nothing it waits for is still pending."""
        saved = await self.agent.stores.runs.load(run_id)
        if saved is None or saved.status != RunStatus.PAUSED:
            return None
        try:
            run = Run.from_json(saved.state_json)
        except Exception:
            logger.exception("run %s cannot be read; it is not resumed", run_id)
            return None
        if not run.pending:
            return None
        for pending in run.pending:
            request = await self.agent.gate.approvals.get(pending.approval_id)
            if request is not None and request.status == "pending":
                return None
        return run

    async def _resume(self, claim: Claim) -> Run | None:
        run = await self._ready(claim.run_id)  # again, now that we hold it: another worker may have
        if run is None:  # resumed it between our look and our claim
            return None
        result: Run | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._keep, claim)
                result = await self.agent.resume(run.id, principal=run.principal)
                group.cancel_scope.cancel()
        except Exception:
            count = self._failures.get(run.id, (0, 0.0))[0] + 1
            wait = min(self.max_retry_s, self.retry_s * 2 ** (count - 1))
            self._failures[run.id] = (count, time.monotonic() + wait)
            logger.exception("resuming run %s failed (%d in a row); next try in %ss", run.id, count, wait)
            return None
        assert result is not None
        self._failures.pop(run.id, None)
        logger.info("resumed run %s: %s (%s)", run.id, result.status, result.stop_reason)
        return result

    async def _keep(self, claim: Claim) -> None:
        """Renew the lease every third of it while the run goes on."""
        while True:
            await anyio.sleep(self.lease_s / 3)
            renewed = await self.claims.renew(claim, lease_s=self.lease_s)
            if renewed is None:
                logger.warning("lost the claim on run %s while resuming it", claim.run_id)
                return
            claim = renewed
