"""The resume worker: paused runs continue by themselves once a person has decided their approvals.

```python
worker = ResumeWorker(agent)          # the same tools, model and stores as the agent that paused
await worker.run_forever()            # or: resumed = await worker.run_once()
```

Each pass does two things, each run on its own (one that fails is logged and tried again after a
backoff - doubling up to `max_retry_s` - while the others go on):

- **runs abandoned mid-resume.** A run that a worker claimed and whose claim is left behind - the
  lease ran out, or its owner is dead by the gate's dead-owner rule (`maitre.storage.owners`) - and
  that is still `running` in the store: the worker that resumed it stopped (killed, cancelled)
  after the run saved a step. It is taken over and continued (`Agent.continue_abandoned`); the
  calls the model makes again replay through the gate's idempotency keys instead of running twice.
  A left-behind claim on a run that is not running any more is cleared.
- **decided runs.** Paused runs with a decided approval (`maitre.storage.claims.runs_to_resume`:
  one query over the runs and approvals, not a look at the newest paused runs, so any number of runs
  waiting for a person cannot hide one that is decided), oldest first, at most `batch` per pass,
  paged across passes so every candidate comes round. A run whose pending approvals are all
  decided (approved, denied, expired or used; none still `pending`) is:

  1. claimed through the storage layer (`maitre.storage.claims`): a lease, with the gate's
     dead-owner rule, so of several workers - in this process, in others, on other hosts sharing a
     Postgres schema - one holds the run; lease times are the database's clock;
  2. read again: a run another worker resumed meanwhile is no longer paused (or waits on a new
     approval) and is left alone;
  3. resumed with `Agent.resume(run_id, principal=<the run's own principal>)`: a run is bound to the
     principal that started it, and the resumed calls run as that principal, in its tenant;
  4. released - or, when the run is still `running` (the resume stopped mid-way), left behind with
     its lease ended, for the next pass to continue.

The lease is renewed every third of it while the run goes on. When a renewal finds the claim gone
(taken over after a stall, say), the resume is stopped at its next checkpoint rather than carried on
beside the new holder: a tool call already running finishes and is recorded first (the gate does
not abandon a started write, see `maitre.gate.execute`), so the new holder replays it.

The approved call itself runs at most once whatever happens (the gate consumes an approval once and
keeps an idempotency key); the claim is what keeps the *run* from continuing twice - two model turns,
two answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ..storage.claims import Claim, ClaimStore, claim_store, runs_to_resume
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
        batch: at most this many runs of each kind (abandoned, decided) are looked at per pass; the
            decided ones are paged across passes, oldest first.
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
        self._cursor: tuple[float, str] | None = None
        """Where the next pass goes on in the decided runs ((updated_at, run_id); None: the start)."""

    async def run_once(self) -> list[Run]:
        """One pass: continue the runs abandoned mid-resume, then resume the paused runs whose
        approvals are all decided; the runs resumed (in that order)."""
        resumed: list[Run] = []
        for claim in await self.claims.left_behind(limit=self.batch):
            await self._one(claim.run_id, resumed, abandoned=True)
        page = await runs_to_resume(self.agent.stores, after=self._cursor, limit=self.batch)
        self._cursor = (page[-1].updated_at, page[-1].run_id) if len(page) >= self.batch else None
        for summary in page:
            await self._one(summary.run_id, resumed, abandoned=False)
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

    async def _one(self, run_id: str, resumed: list[Run], *, abandoned: bool) -> None:
        """Look at one run, and resume it if it is ready; whatever it raises stays with this run."""
        failed = self._failures.get(run_id)
        if failed is not None and time.monotonic() < failed[1]:
            return
        try:
            if not abandoned and await self._ready(run_id) is None:
                return
            claim = await self.claims.claim(run_id, lease_s=self.lease_s)
            if claim is None:
                return  # another worker holds it
            try:
                done = await self._resume(claim, abandoned=abandoned)
            finally:
                await self._let_go(claim)
        except Exception:
            count = self._failures.get(run_id, (0, 0.0))[0] + 1
            wait = min(self.max_retry_s, self.retry_s * 2 ** (count - 1))
            self._failures[run_id] = (count, time.monotonic() + wait)
            logger.exception("resuming run %s failed (%d in a row); next try in %ss", run_id, count, wait)
            return
        self._failures.pop(run_id, None)
        if done is None:
            return
        logger.info("resumed run %s: %s (%s)", run_id, done.status, done.stop_reason)
        resumed.append(done)
        if self.on_resume is not None:
            try:
                self.on_resume(done)
            except Exception:
                logger.exception("on_resume callback failed")

    async def _ready(self, run_id: str) -> Run | None:
        """The saved run, if it is paused and nothing it waits for is still pending (raises when the
        run or one of its approvals cannot be read: the caller backs off that run)."""
        saved = await self.agent.stores.runs.load(run_id)
        if saved is None or saved.status != RunStatus.PAUSED:
            return None
        run = Run.from_json(saved.state_json)
        if not run.pending:
            return None
        for pending in run.pending:
            request = await self.agent.gate.approvals.get(pending.approval_id)
            if request is not None and request.status == "pending":
                return None
        return run

    async def _abandoned(self, run_id: str) -> Run | None:
        """The saved run, if it is still `running` (its claim, which we now hold, was left behind)."""
        saved = await self.agent.stores.runs.load(run_id)
        if saved is None or saved.status != RunStatus.RUNNING:
            return None
        return Run.from_json(saved.state_json)

    async def _resume(self, claim: Claim, *, abandoned: bool) -> Run | None:
        # Read again, now that we hold it: another worker may have resumed it between our look and
        # our claim.
        run = await (self._abandoned(claim.run_id) if abandoned else self._ready(claim.run_id))
        if run is None:
            return None
        if abandoned:
            logger.warning("run %s was left running by a worker that stopped; continuing it", run.id)
        result: Run | None = None
        lost = False
        async with anyio.create_task_group() as group:

            async def keep() -> None:
                nonlocal lost
                await self._keep(claim)
                lost = True
                group.cancel_scope.cancel()  # stop the resume at its next checkpoint

            group.start_soon(keep)
            if abandoned:
                result = await self.agent.continue_abandoned(run.id, principal=run.principal)
            else:
                result = await self.agent.resume(run.id, principal=run.principal)
            group.cancel_scope.cancel()
        if result is None:
            assert lost
            logger.warning(
                "stopped resuming run %s: its claim was lost (taken over by another worker)", run.id
            )
        return result

    async def _keep(self, claim: Claim) -> None:
        """Renew the lease every third of it while the run goes on; return once the claim is lost
        (taken over, or not renewed for a whole lease because the store kept failing)."""
        renewed_at = time.monotonic()
        while True:
            await anyio.sleep(self.lease_s / 3)
            try:
                renewed = await self.claims.renew(claim, lease_s=self.lease_s)
            except Exception:
                logger.exception("renewing the claim on run %s failed", claim.run_id)
                if time.monotonic() - renewed_at < self.lease_s:
                    continue
                renewed = None
            if renewed is None:
                logger.warning("lost the claim on run %s while resuming it", claim.run_id)
                return
            claim, renewed_at = renewed, time.monotonic()

    async def _let_go(self, claim: Claim) -> None:
        """Release the claim; or, when the run is still `running` (its resume stopped mid-way), end
        its lease and leave it behind for the next pass. Done even when the caller is cancelled."""
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + _LET_GO_S
            try:
                saved = await self.agent.stores.runs.load(claim.run_id)
                running = saved is not None and saved.status == RunStatus.RUNNING
            except Exception:
                running = True  # not known: leave it behind (a pass clears a claim on a settled run)
            if running:
                await self.claims.expire(claim)
            else:
                await self.claims.release(claim)


_LET_GO_S = 10.0
"""The longest a cancelled worker waits to release (or leave behind) the claim it holds."""
