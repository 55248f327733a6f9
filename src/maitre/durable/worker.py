"""Executors and workers: who runs a durable workflow, and who takes over when that process dies.

Every process that runs durable workflows is a DBOS *executor* with an explicit id. It holds a
lease on `executor:<id>` - the resume worker's run claims (`maitre.storage.claims`), kept in a
table of DBOS's system database, not in maitre's - renewed every third of the lease. A claim nobody
holds any more (its lease passed, or its owner is dead by the gate's dead-owner rule,
`maitre.storage.owners`: same host, boot and pid namespace, and the process is gone) names a dead
executor. The first worker to claim it asks DBOS to recover that executor's pending workflows
(`DBOS._recover_pending_workflows([id])`, what its admin endpoint `/dbos-workflow-recovery`
runs; no hosted service): DBOS puts them back on its internal
queue and one live executor - whichever dequeues first - runs each from its last recorded step.

A process restarted under the same executor id recovers its own workflows at `launch` (DBOS does
that), after taking its lease back; a second live process asking for an id in use is refused.

```python
async with executor(system_db, executor_id="worker-1"):   # lease + DBOS.launch + renewal
    run = await durable.run(goal, alice)

worker = DurableWorker(durable, system_db, executor_id="worker-1")
await worker.run_forever()          # recover dead executors' workflows, resume decided runs
```
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio
from dbos import DBOS

from ..exceptions import UserError
from ..storage.claims import Claim, ClaimStore, SQLClaimStore
from ..storage.engine.base import Engine
from . import runtime

if TYPE_CHECKING:
    from ..agent import Agent, Run
    from .agent import DurableAgent

__all__ = ["DurableWorker", "ExecutorLease", "executor", "executor_leases", "recover_dead", "run_worker"]

logger = logging.getLogger("maitre.durable.worker")

_PREFIX = "executor:"


def executor_leases(system_database_url: str) -> tuple[ClaimStore, Engine]:
    """The executor leases beside DBOS's tables: the same file for SQLite; schema `maitre_durable`
    of the system database for Postgres. Returns (the claim store, its engine to close)."""
    engine: Engine
    if system_database_url.startswith(("postgresql://", "postgres://")):
        from ..storage.engine.postgres import PostgresEngine

        _ensure_database(system_database_url)
        engine = PostgresEngine(system_database_url, schema="maitre_durable", pool_size=2)
    elif system_database_url.startswith("sqlite:///"):
        from ..storage.engine.sqlite import SQLiteEngine

        engine = SQLiteEngine(system_database_url.removeprefix("sqlite:///"))
    else:
        raise UserError(
            f"expected a sqlite:/// or postgresql:// system database, not {system_database_url!r}"
        )
    return SQLClaimStore(engine), engine


def _ensure_database(url: str) -> None:
    """Create the Postgres system database if it is missing (DBOS would at launch, but the
    executor's lease, taken before launch, lives there too)."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    server = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass  # another worker created it first


class ExecutorLease:
    """This process's lease on its executor id (see the module docstring)."""

    def __init__(self, leases: ClaimStore, executor_id: str, *, lease_s: float = 30.0) -> None:
        if lease_s <= 0:
            raise ValueError("lease_s must be > 0")
        self.leases = leases
        self.executor_id = executor_id
        self.lease_s = lease_s
        self.claim: Claim | None = None

    async def take(self) -> None:
        claim = await self.leases.claim(_PREFIX + self.executor_id, lease_s=self.lease_s)
        if claim is None:
            raise UserError(
                f"executor id {self.executor_id!r} is held by another process (alive, or on another host "
                f"until its lease of up to {self.lease_s:g} s runs out): give each worker its own id"
            )
        self.claim = claim

    async def renew(self) -> None:
        assert self.claim is not None
        renewed = await self.leases.renew(self.claim, lease_s=self.lease_s)
        if renewed is None:
            # Taken over after a stall: another worker may be recovering our workflows right now.
            logger.error("lost the lease on executor %s; taking it back", self.executor_id)
            await self.take()
        else:
            self.claim = renewed

    async def keep(self) -> None:
        """Renew every third of the lease, for ever (run it in a task)."""
        while True:
            await anyio.sleep(self.lease_s / 3)
            try:
                await self.renew()
            except Exception:
                logger.exception("renewing the lease on executor %s failed", self.executor_id)

    async def release(self) -> None:
        if self.claim is not None:
            await self.leases.release(self.claim)
            self.claim = None


async def recover_dead(leases: ClaimStore, *, mine: str, lease_s: float = 30.0) -> list[str]:
    """Claim each dead executor's lease, have DBOS recover its pending workflows, and let the lease
    go. Returns the workflow ids recovered (now queued for any live executor)."""
    recovered: list[str] = []
    for left in await leases.left_behind(limit=100):
        if not left.run_id.startswith(_PREFIX) or left.run_id == _PREFIX + mine:
            continue
        taken = await leases.claim(left.run_id, lease_s=lease_s)
        if taken is None:
            continue  # another worker is on it, or the executor came back
        dead = left.run_id.removeprefix(_PREFIX)
        try:
            # What DBOS's admin endpoint /dbos-workflow-recovery runs, called in-process.
            handles = await anyio.to_thread.run_sync(DBOS._recover_pending_workflows, [dead])
        except BaseException:
            with anyio.CancelScope(shield=True):
                await leases.expire(taken)  # left behind again: the next pass tries once more
            raise
        await leases.release(taken)  # its workflows are queued: the executor id is free again
        ids = [h.get_workflow_id() for h in handles]
        logger.warning("executor %s is gone; recovered its %d workflows: %s", dead, len(ids), ids)
        recovered.extend(ids)
    return recovered


@contextlib.asynccontextmanager
async def executor(
    system_database_url: str,
    *,
    executor_id: str | None = None,
    lease_s: float = 30.0,
    log_level: str = "WARNING",
    queue_poll_s: float | None = None,
) -> AsyncIterator[ExecutorLease]:
    """Take this executor's lease, launch DBOS (which recovers this executor's own pending
    workflows, on the running event loop), keep the lease while the block runs; then stop DBOS and
    release the lease - or, when workflows of this executor are still pending (the block was
    cancelled mid-run), end it and leave it behind, so that another worker recovers them. Build
    every `DurableAgent` before entering."""
    chosen = executor_id or runtime.default_executor_id()
    leases, engine = executor_leases(system_database_url)
    lease = ExecutorLease(leases, chosen, lease_s=lease_s)
    try:
        await lease.take()
        runtime.launch(
            system_database_url, executor_id=chosen, log_level=log_level, queue_poll_s=queue_poll_s
        )
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(lease.keep)
                try:
                    yield lease
                finally:
                    group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                pending = await _still_pending(chosen)
                runtime.shutdown()
                if pending and lease.claim is not None:
                    logger.warning(
                        "executor %s stops with %d workflows pending: left for recovery", chosen, pending
                    )
                    await leases.expire(lease.claim)
                    lease.claim = None
                else:
                    await lease.release()
    finally:
        with anyio.CancelScope(shield=True):
            await engine.close()


async def _still_pending(executor_id: str) -> int:
    try:
        found = await DBOS.list_workflows_async(
            executor_id=executor_id, status=["PENDING"], load_input=False, load_output=False
        )
    except Exception:  # not known: leave the lease behind, the safe side
        logger.exception("could not list executor %s's pending workflows", executor_id)
        return 1
    return len(found)


class DurableWorker:
    """Recover dead executors' workflows and resume decided paused runs, durably.

    Args:
        durable: the durable agent (built from the same FILE:FACTORY as the processes whose runs
            this worker may take over, under the same name).
        lease: this worker's executor lease (from `executor(...)`).
        poll_s: seconds between passes.
        resume_decided: also resume paused runs whose approvals are decided (the resume worker's
            job, `maitre.agent.worker.ResumeWorker`, each resumption a workflow).
    """

    def __init__(
        self,
        durable: DurableAgent,
        lease: ExecutorLease,
        *,
        poll_s: float = 1.0,
        resume_decided: bool = True,
        claim_lease_s: float = 60.0,
    ) -> None:
        from ..agent.worker import ResumeWorker

        self.durable = durable
        self.lease = lease
        self.poll_s = poll_s
        self.resumer = (
            ResumeWorker(cast("Agent", durable), poll_s=poll_s, lease_s=claim_lease_s)
            if resume_decided
            else None
        )
        self.recovered: list[str] = []

    async def run_once(self) -> tuple[list[str], list[Run]]:
        """One pass: (workflow ids recovered from dead executors, runs resumed)."""
        recovered = await recover_dead(
            self.lease.leases, mine=self.lease.executor_id, lease_s=self.lease.lease_s
        )
        self.recovered.extend(recovered)
        resumed = await self.resumer.run_once() if self.resumer is not None else []
        return recovered, resumed

    async def run_forever(self, stop: anyio.Event | None = None) -> None:
        while stop is None or not stop.is_set():
            try:
                await self.run_once()
            except Exception:
                logger.exception("durable worker pass failed; trying again in %ss", self.poll_s)
            with anyio.move_on_after(self.poll_s):
                await (anyio.sleep_forever() if stop is None else stop.wait())

    async def drain(self, *, timeout_s: float = 30.0) -> list[str]:
        """Wait until no workflow of this executor, and none recovered by this worker, is pending or
        queued (bounded); returns the workflow ids waited for."""
        waited: list[str] = []
        with anyio.move_on_after(timeout_s):
            while True:
                mine = await DBOS.list_workflows_async(
                    executor_id=self.lease.executor_id,
                    status=["PENDING", "ENQUEUED"],
                    load_input=False,
                    load_output=False,
                )
                ids = {w.workflow_id for w in mine}
                if self.recovered:
                    others = await DBOS.list_workflows_async(
                        workflow_ids=list(self.recovered),
                        status=["PENDING", "ENQUEUED"],
                        load_input=False,
                        load_output=False,
                    )
                    ids |= {w.workflow_id for w in others}
                if not ids:
                    return waited
                for workflow_id in sorted(ids):
                    if workflow_id not in waited:
                        waited.append(workflow_id)
                    handle: Any = await DBOS.retrieve_workflow_async(workflow_id)
                    with contextlib.suppress(Exception):
                        await _result(handle)
        logger.warning("drain timed out with workflows still pending: %s", waited)
        return waited


async def _result(handle: Any) -> Any:
    return await handle.get_result(polling_interval_sec=0.1)


async def run_worker(
    db: str,
    agent: str,
    *,
    executor_id: str,
    system_db: str | None = None,
    name: str = "default",
    lease_s: float = 30.0,
    poll_s: float = 1.0,
    once: bool = False,
    timeout_s: float = 30.0,
) -> tuple[list[str], list[Run], list[str]]:
    """A durable worker process's whole job (`python -m maitre.durable worker`, `maitre runs worker
    --durable`): open the stores at `db`, build the agent from `agent` (`FILE:FACTORY`, called with
    the stores), take the executor lease, launch DBOS, then pass after pass recover dead executors'
    workflows and resume decided runs. `once`: one pass, then wait (up to `timeout_s`) for what it
    recovered; returns (workflows recovered, runs resumed, workflows waited for)."""
    from .._loader import load_object
    from ..stores import open_stores
    from .agent import DurableAgent
    from .runtime import system_database_for

    factory = load_object(agent)
    async with await open_stores(db) as stores:
        durable = DurableAgent(factory(stores), name=name)
        try:
            chosen_db = system_db or system_database_for(db)
            async with executor(chosen_db, executor_id=executor_id, lease_s=lease_s) as lease:
                worker = DurableWorker(durable, lease, poll_s=poll_s)
                if not once:
                    await worker.run_forever()
                    return [], [], []
                recovered, resumed = await worker.run_once()
                waited = await worker.drain(timeout_s=timeout_s)
                return recovered, resumed, waited
        finally:
            durable.unregister()
