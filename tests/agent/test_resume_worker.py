"""The resume worker: a decided run continues by itself, once, across processes, as its own principal.

Runs pause on a high-risk refund in a real SQLite file (and Postgres where marked); another person
decides through `gate.approvals`; `ResumeWorker.run_once()` picks the run up. The refund tool writes
a ledger line per execution and the agent a line per resumption (`on_event`), both files, so
executions and resumptions are counted across processes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.abc
import pytest
from pydantic import Field

from maitre import Principal, Toolbox
from maitre.agent import Agent, Limits, ResumeWorker, Run, RunStatus, ToolResultMessage
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says, tool_error
from maitre.storage import ClaimStore, MemoryStores, claim_store
from maitre.storage.claims import MemoryClaimStore, SQLClaimStore
from maitre.storage.owners import current_owner, owner_status
from maitre.stores import Stores, open_stores

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme", roles=frozenset({"buyer"}), scopes=frozenset({"shop"}))
BOB = Principal(user="bob", tenant="acme")
ERIN = Principal(user="erin", tenant="evil")
EVE = Principal(user="eve", tenant="evil")
TESTS = Path(__file__).resolve().parents[1]
PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


# -- the agent under test (imported by the worker subprocesses too) ---------------------------------------


def shop(ledger: Path, *, delay_s: float = 0.0) -> Toolbox:
    box = Toolbox("shop")

    @box.tool(effect="write", risk="high", business_key=("order_id",))
    def issue_refund(
        order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")],
        amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)],
    ) -> str:
        """Refund an order (needs approval)."""
        time.sleep(delay_s)
        with ledger.open("a") as f:
            f.write(f"{order_id} {amount}\n")
        return f"Refunded {amount} INR for {order_id}."

    return box


def refund_model() -> ScriptedModel:
    """Refunds every order named in the request (1200.00 each), in one step; then answers."""
    return ScriptedModel(
        [
            Rule(
                "refund",
                when=last_user_says("refund"),
                then=lambda r: [
                    call("shop.issue_refund", order_id=order, amount="1200.00")
                    for order in re.findall(r"A[0-9]{4}", r.messages[-1].content)  # type: ignore[union-attr]
                ],
            ),
            Rule(
                "denied",
                when=tool_error("APPROVAL_DENIED"),
                then=lambda r: f"Not refunded: {last_tool_result(r).content}",  # type: ignore[union-attr]
            ),
            Rule(
                "done",
                when=after_tool("issue_refund", ok=True),
                then=lambda r: f"Done: {last_tool_result(r).content}",  # type: ignore[union-attr]
            ),
        ]
    )


def build_agent(stores: Stores, *, ledger: Path, resumes: Path | None = None, delay_s: float = 0.0) -> Agent:
    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "run_resumed" and resumes is not None:
            with resumes.open("a") as f:
                f.write(f"{event['run_id']} {os.getpid()}\n")

    return Agent(
        refund_model(),
        shop(ledger, delay_s=delay_s),
        stores=stores,
        limits=Limits(max_steps=6),
        on_event=on_event,
    )


def stepping_agent(
    stores: Stores, *, ledger: Path, resumes: Path | None = None, hang: Callable[[], object] | None = None
) -> Agent:
    """After the approved refund: a lookup (a step the run saves `running`), then a note (a write) and
    a slow lookup together, then the answer. With `hang`, the slow lookup calls it and
    never returns: the worker is killed or cancelled there, after the note ran, before the step was
    saved."""
    box = shop(ledger)

    @box.tool(effect="read")
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id} is paid"

    @box.tool(effect="write", risk="medium", business_key=("order_id",))
    def note(order_id: str) -> str:
        """Write a note on an order (no approval needed)."""
        with ledger.open("a") as f:
            f.write(f"note {order_id}\n")
        return f"noted {order_id}"

    @box.tool(effect="read", timeout=3600)
    async def slow_lookup(order_id: str) -> str:
        """Look an order up, slowly."""
        if hang is not None:
            hang()
            await anyio.sleep(3600)
        return f"order {order_id} shipped"

    model = ScriptedModel(
        [
            Rule(
                "refund",
                when=last_user_says("refund"),
                then=lambda r: call("shop.issue_refund", order_id="A1042", amount="1200.00"),
            ),
            Rule(
                "answer",
                when=after_tool("slow_lookup", ok=True),
                then=lambda r: f"Done: {last_tool_result(r).content}",  # type: ignore[union-attr]
            ),
            Rule(
                "note and look again",
                when=after_tool("lookup", ok=True),
                then=lambda r: [
                    call("shop.note", order_id="A1042"),
                    call("shop.slow_lookup", order_id="A1042"),
                ],
            ),
            Rule(
                "look",
                when=after_tool("issue_refund", ok=True),
                then=lambda r: call("shop.lookup", order_id="A1042"),
            ),
        ]
    )

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "run_resumed" and resumes is not None:
            with resumes.open("a") as f:
                f.write(f"{event['run_id']} {os.getpid()}\n")

    return Agent(model, box, stores=stores, limits=Limits(max_steps=8), on_event=on_event)


def tool_results(run: Run, name: str) -> list[dict[str, Any]]:
    return [e for e in run.events if e["type"] == "tool_result" and e["name"].endswith(name)]


# -- fixtures and helpers ------------------------------------------------------------------------------


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    return path


@pytest.fixture
def resumes(tmp_path: Path) -> Path:
    path = tmp_path / "resumes.txt"
    path.touch()
    return path


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "maitre.db")


@pytest.fixture
async def stores(db: str) -> AsyncIterator[Stores]:
    async with await open_stores(db) as opened:
        yield opened


async def paused(agent: Agent, goal: str = "please refund order A1042", who: Principal = ALICE) -> Run:
    run = await agent.run(goal, who)
    assert run.status is RunStatus.PAUSED, run.final_text
    return run


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def read_line(proc: anyio.abc.Process) -> str:
    """One line of a child's stdout (its stderr in the failure when it ended first)."""
    assert proc.stdout is not None and proc.stderr is not None
    line = b""
    try:
        while not line.endswith(b"\n"):
            line += await proc.stdout.receive(1)
    except anyio.EndOfStream:
        errors = b"".join([chunk async for chunk in proc.stderr])
        raise AssertionError(f"the child ended before a line: {errors.decode()}") from None
    return line.decode().strip()


def dead_owner() -> str:
    """The owner record of a process that ran on this host and is gone."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    fields = json.loads(current_owner())
    fields.update(pid=int(child.stdout), start=1, id="0" * 16)
    owner = json.dumps(fields)
    assert owner_status(owner) == "dead"
    return owner


# -- one worker ------------------------------------------------------------------------------------------


async def test_an_approved_run_resumes_by_itself_and_the_refund_runs_once(stores, ledger, resumes):
    agent = build_agent(stores, ledger=ledger, resumes=resumes)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)

    worker = ResumeWorker(build_agent(stores, ledger=ledger, resumes=resumes))
    (resumed,) = await worker.run_once()
    assert resumed.id == run.id and resumed.status is RunStatus.FINISHED
    assert "Refunded 1200.00 INR for A1042" in resumed.final_text
    assert await worker.run_once() == []  # finished: nothing left to pick up
    assert lines(ledger) == ["A1042 1200.00"]
    assert len(lines(resumes)) == 1
    assert await claim_store(stores).get(run.id) is None  # released


async def test_edited_arguments_are_what_the_worker_runs(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(
        run.pending[0].approval_id, BOB, {"order_id": "A1042", "amount": "600.00"}
    )

    (resumed,) = await ResumeWorker(agent).run_once()
    assert resumed.status is RunStatus.FINISHED
    assert lines(ledger) == ["A1042 600.00"]
    assert "Refunded 600.00 INR" in resumed.final_text


async def test_a_denial_resumes_the_run_and_the_model_reads_the_message(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.deny(run.pending[0].approval_id, BOB, "outside the refund window")

    worker_agent = build_agent(stores, ledger=ledger)
    (resumed,) = await ResumeWorker(worker_agent).run_once()
    assert lines(ledger) == []
    assert resumed.status is RunStatus.FINISHED
    denial = [m for m in resumed.messages if isinstance(m, ToolResultMessage)][-1]
    assert denial.error_code == "APPROVAL_DENIED" and "outside the refund window" in denial.content
    model = worker_agent.model
    assert isinstance(model, ScriptedModel)
    seen = [m for m in model.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert "outside the refund window" in seen[-1].content  # what the model was sent
    assert "outside the refund window" in resumed.final_text


async def test_an_expired_approval_counts_as_decided(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    approval_id = run.pending[0].approval_id
    store = stores.db  # type: ignore[attr-defined]
    await store.execute("UPDATE approvals SET expires_at = ? WHERE id = ?", (time.time() - 1, approval_id))

    (resumed,) = await ResumeWorker(agent).run_once()
    assert lines(ledger) == []  # an expired approval never runs the call
    assert resumed.status is not RunStatus.PAUSED


async def test_a_run_with_one_approval_still_pending_is_not_resumed(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent, "please refund orders A1042 and A2001")
    first, second = run.pending
    await agent.gate.approvals.approve(first.approval_id, BOB)
    worker = ResumeWorker(agent)

    assert await worker.run_once() == []
    assert lines(ledger) == []
    saved = await stores.runs.load(run.id)
    assert saved is not None and saved.status == "paused"

    await agent.gate.approvals.deny(second.approval_id, BOB, "not this one")
    (resumed,) = await worker.run_once()
    assert resumed.status is RunStatus.FINISHED
    assert lines(ledger) == [f"{first.arguments['order_id']} 1200.00"]


async def test_the_resumed_run_keeps_its_owner_and_another_tenants_run_is_untouched(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    mine = await paused(agent)
    theirs = await paused(agent, "please refund order A7777", ERIN)
    before = await stores.runs.load(theirs.id)
    await agent.gate.approvals.approve(mine.pending[0].approval_id, BOB)

    (resumed,) = await ResumeWorker(build_agent(stores, ledger=ledger)).run_once()
    assert resumed.id == mine.id and resumed.principal == ALICE  # roles and scopes kept too
    assert lines(ledger) == ["A1042 1200.00"]
    assert await stores.runs.load(mine.id, tenant="evil") is None
    saved = await stores.runs.load(mine.id, tenant="acme")
    assert saved is not None and Run.from_json(saved.state_json).principal == ALICE
    executed = [e for e in await stores.audit.entries() if e.run_id == mine.id and e.decision == "approved"]
    assert executed and {(e.user, e.tenant) for e in executed} == {("alice", "acme")}
    assert await stores.runs.load(theirs.id) == before  # not resumed, not rewritten

    await agent.gate.approvals.approve(theirs.pending[0].approval_id, EVE)
    (other,) = await ResumeWorker(build_agent(stores, ledger=ledger)).run_once()
    assert other.id == theirs.id and other.principal == ERIN
    assert lines(ledger) == ["A1042 1200.00", "A7777 1200.00"]


async def test_two_workers_in_one_process_resume_a_run_once(db, stores, ledger, resumes):
    agent = build_agent(stores, ledger=ledger)
    runs = [await paused(agent, f"please refund order A100{n}") for n in range(3)]
    for run in runs:
        await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    results: list[list[Run]] = []

    async with await open_stores(db) as other:  # a second engine on the file: separate claim stores
        workers = [
            ResumeWorker(build_agent(stores, ledger=ledger, resumes=resumes, delay_s=0.05)),
            ResumeWorker(build_agent(other, ledger=ledger, resumes=resumes, delay_s=0.05)),
        ]
        assert workers[0].claims is not workers[1].claims

        async def one(worker: ResumeWorker) -> None:
            results.append(await worker.run_once())

        async with anyio.create_task_group() as group:
            for worker in workers:
                group.start_soon(one, worker)
    assert sorted(r.id for batch in results for r in batch) == sorted(r.id for r in runs)
    assert len(lines(ledger)) == 3
    assert sorted(line.split()[0] for line in lines(resumes)) == sorted(r.id for r in runs)


async def test_a_resume_that_raises_is_logged_released_and_retried_after_a_backoff(stores, ledger, caplog):
    class Flaky(Agent):
        calls = 0

        async def resume(self, run_id: str, decisions: Any = None, *, principal: Any = None) -> Run:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("the model provider is down")
            return await super().resume(run_id, decisions, principal=principal)

    agent = Flaky(refund_model(), shop(ledger), stores=stores)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    worker = ResumeWorker(agent, retry_s=0.3)

    with caplog.at_level(logging.ERROR, logger="maitre.agent.worker"):
        assert await worker.run_once() == []
    assert "resuming run" in caplog.text and "the model provider is down" in caplog.text
    assert await worker.claims.get(run.id) is None  # released, not held by the failure
    assert await worker.run_once() == [] and Flaky.calls == 1  # inside the backoff: not tried again
    await anyio.sleep(0.35)
    (resumed,) = await worker.run_once()
    assert Flaky.calls == 2 and resumed.status is RunStatus.FINISHED
    assert lines(ledger) == ["A1042 1200.00"]


async def test_run_forever_picks_up_a_decision_made_while_it_runs(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    stop = anyio.Event()
    seen: list[Run] = []
    resumed = anyio.Event()

    def on_resume(run: Run) -> None:
        seen.append(run)
        resumed.set()

    worker = ResumeWorker(build_agent(stores, ledger=ledger), poll_s=0.02, on_resume=on_resume)
    async with anyio.create_task_group() as group:
        group.start_soon(worker.run_forever, stop)
        await anyio.sleep(0.1)  # several passes over a run that waits
        assert seen == [] and lines(ledger) == []
        await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
        with anyio.fail_after(5):
            await resumed.wait()
        stop.set()
    assert [r.id for r in seen] == [run.id] and lines(ledger) == ["A1042 1200.00"]


async def test_memory_stores_share_one_claim_store_per_stores(ledger):
    stores = MemoryStores()
    assert claim_store(stores) is claim_store(stores)
    assert isinstance(claim_store(stores), MemoryClaimStore)
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    (resumed,) = await ResumeWorker(agent).run_once()
    assert resumed.status is RunStatus.FINISHED and lines(ledger) == ["A1042 1200.00"]


async def test_a_worker_cancelled_after_the_run_saved_a_step_leaves_it_to_the_next_pass(
    stores, ledger, resumes
):
    """The console shutting down mid-resume: the run is `running` in the store; its claim is left
    behind with the lease ended, and the next worker continues the run to its end."""
    agent = stepping_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    hung = anyio.Event()
    first = ResumeWorker(stepping_agent(stores, ledger=ledger, resumes=resumes, hang=hung.set))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(first.run_once)
            await hung.wait()
            group.cancel_scope.cancel()
    saved = await stores.runs.load(run.id)
    assert saved is not None and saved.status == "running"
    left = await claim_store(stores).get(run.id)
    assert left is not None and left.lease_until <= time.time() + 1  # left behind, its lease ended
    assert lines(ledger) == ["A1042 1200.00", "note A1042"]

    (done,) = await ResumeWorker(stepping_agent(stores, ledger=ledger, resumes=resumes)).run_once()
    assert done.id == run.id and done.status is RunStatus.FINISHED
    assert done.final_text.endswith("Done: order A1042 shipped")
    assert lines(ledger) == ["A1042 1200.00", "note A1042"]  # the refund and the note ran once each
    assert [e["replayed"] for e in tool_results(done, "note")] == [True]  # proposed again: replayed
    assert len(lines(resumes)) == 2
    assert await claim_store(stores).get(run.id) is None  # released once the run finished


async def test_a_running_run_that_no_worker_claimed_is_left_alone(stores, ledger):
    """Only a run whose worker's claim is left behind is taken over: a run some process is running
    by itself (no claim) is not continued a second time."""
    agent = stepping_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    saved = await stores.runs.load(run.id)
    assert saved is not None
    running = Run.from_json(saved.state_json)
    running.status, running.pending = RunStatus.RUNNING, []
    await stores.runs.save(run.id, tenant="acme", status="running", state_json=running.to_json())

    worker = ResumeWorker(stepping_agent(stores, ledger=ledger))
    assert await worker.run_once() == []
    held = await claim_store(stores).claim(run.id, lease_s=60)  # a live worker holds it: not taken either
    assert held is not None and await worker.run_once() == []
    assert lines(ledger) == []
    after = await stores.runs.load(run.id)
    assert after is not None and after.status == "running"


async def test_a_claim_on_a_run_that_ended_is_cleared(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.deny(run.pending[0].approval_id, BOB, "no")
    finished = await agent.resume(run.id)
    assert finished.status is RunStatus.FINISHED
    assert await claim_store(stores).claim(run.id, lease_s=3600, owner=dead_owner()) is not None

    assert await ResumeWorker(agent).run_once() == []
    assert await claim_store(stores).get(run.id) is None


async def test_a_worker_cancelled_while_the_refund_runs_records_it_and_the_next_worker_replays_it(
    stores, ledger, resumes
):
    """Cancelled mid-refund: the refund still happens (a thread cannot be stopped) and is recorded,
    so the next worker's retry under the same approval replays it instead of being refused."""
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    worker = ResumeWorker(build_agent(stores, ledger=ledger, resumes=resumes, delay_s=0.4))
    with anyio.move_on_after(0.1) as scope:
        await worker.run_once()
    assert scope.cancelled_caught
    assert lines(ledger) == ["A1042 1200.00"]  # done by the time the cancellation came out
    executed = [e for e in await stores.audit.entries() if e.run_id == run.id and e.decision == "approved"]
    assert len(executed) == 1 and executed[0].error_code is None
    assert await claim_store(stores).get(run.id) is None  # paused still: released, not left behind

    (done,) = await ResumeWorker(build_agent(stores, ledger=ledger, resumes=resumes)).run_once()
    assert done.status is RunStatus.FINISHED and "Refunded 1200.00 INR for A1042" in done.final_text
    assert [(e["error_code"], e["replayed"]) for e in tool_results(done, "issue_refund")] == [(None, True)]
    assert lines(ledger) == ["A1042 1200.00"]


async def test_a_worker_that_loses_its_claim_stops_and_the_new_holder_finishes_the_run(stores, ledger):
    """A's lease is taken over while its refund runs: A stops at the next checkpoint (after the
    refund is recorded) instead of going on beside the new holder; the run ends once, replayed."""
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    claims = claim_store(stores)
    resuming = anyio.Event()

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "run_resumed":
            resuming.set()

    a = ResumeWorker(
        Agent(refund_model(), shop(ledger, delay_s=0.6), stores=stores, on_event=on_event), lease_s=0.3
    )
    taken: list[Any] = []

    async def take_over() -> None:
        await resuming.wait()  # the refund has started
        # Another worker's view: A's lease (renewed every 0.1 s) has run out.
        taken.append(await claims.claim(run.id, lease_s=60, now=time.time() + 10))

    async with anyio.create_task_group() as group:
        group.start_soon(take_over)
        assert await a.run_once() == []  # stopped, not resumed
    assert taken[0] is not None
    assert lines(ledger) == ["A1042 1200.00"]
    saved = await stores.runs.load(run.id)
    assert saved is not None and saved.status == "paused"  # A saved nothing after it lost the claim
    held = await claims.get(run.id)
    assert held is not None and held.token == taken[0].token  # A did not release the new holder's claim

    await claims.release(taken[0])  # the new holder goes on
    (done,) = await ResumeWorker(build_agent(stores, ledger=ledger)).run_once()
    assert done.status is RunStatus.FINISHED
    assert [e["replayed"] for e in tool_results(done, "issue_refund")] == [True]
    assert len([e for e in done.events if e["type"] == "run_finished"]) == 1  # one answer
    assert lines(ledger) == ["A1042 1200.00"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_many_runs_waiting_for_a_person_do_not_hide_an_older_decided_run(kind, db, ledger):
    async with (
        await open_stores(db) if kind == "sqlite" else contextlib.nullcontext(MemoryStores()) as stores
    ):
        agent = build_agent(stores, ledger=ledger)
        old = await paused(agent, "please refund order A0001")
        await agent.gate.approvals.approve(old.pending[0].approval_id, BOB)
        for n in range(12):  # newer, and waiting for a person
            await paused(agent, f"please refund order A{2000 + n}")

        (done,) = await ResumeWorker(agent, batch=5).run_once()
        assert done.id == old.id and lines(ledger) == ["A0001 1200.00"]


async def test_runs_that_are_not_ready_yet_do_not_starve_a_decided_one_across_passes(stores, ledger):
    """Candidates that turn out not ready (one approval decided, one pending) fill a whole batch:
    the next pass goes on after them instead of looking at the same ones again."""
    agent = build_agent(stores, ledger=ledger)
    for n in range(3):
        half = await paused(agent, f"please refund orders A10{n}1 and A10{n}2")
        await agent.gate.approvals.approve(half.pending[0].approval_id, BOB)
    decided = await paused(agent, "please refund order A0001")
    await agent.gate.approvals.approve(decided.pending[0].approval_id, BOB)

    worker = ResumeWorker(agent, batch=2)
    assert await worker.run_once() == []  # the two oldest candidates: each still waits
    (done,) = await worker.run_once()
    assert done.id == decided.id
    assert await worker.run_once() == []  # round again from the start: nothing else is ready
    assert lines(ledger) == ["A0001 1200.00"]


async def test_an_unreadable_run_or_approval_is_skipped_with_a_backoff_and_the_others_resume(
    db, stores, ledger, caplog
):
    agent = build_agent(stores, ledger=ledger)
    bad_approval = await paused(agent, "please refund order A0002")
    bad_state = await paused(agent, "please refund order A0003")
    good = await paused(agent, "please refund order A0001")
    for run in (bad_approval, bad_state, good):
        await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    store = stores.db  # type: ignore[attr-defined]
    await store.execute(
        "UPDATE approvals SET arguments = '{not json' WHERE id = ?", (bad_approval.pending[0].approval_id,)
    )
    await store.execute("UPDATE runs SET state_json = '{not json' WHERE run_id = ?", (bad_state.id,))

    worker = ResumeWorker(agent, retry_s=60)
    with caplog.at_level(logging.ERROR, logger="maitre.agent.worker"):
        (done,) = await worker.run_once()
    assert done.id == good.id and lines(ledger) == ["A0001 1200.00"]
    failed = [r for r in caplog.records if "resuming run" in r.getMessage()]
    assert {r.args[0] for r in failed} == {bad_approval.id, bad_state.id}  # type: ignore[index]

    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="maitre.agent.worker"):
        assert await worker.run_once() == []
    assert "resuming run" not in caplog.text  # backed off: not tried (nor logged) at every pass


async def test_run_forever_goes_on_past_a_run_that_cannot_be_read(stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    older = await paused(agent, "please refund order A0002")
    good = await paused(agent, "please refund order A0001")
    newer = await paused(agent, "please refund order A0003")
    store = stores.db  # type: ignore[attr-defined]
    for run in (older, good, newer):
        await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    for bad in (older, newer):  # whichever end a pass starts from, it meets one first
        await store.execute(
            "UPDATE approvals SET arguments = '{not json' WHERE id = ?", (bad.pending[0].approval_id,)
        )
    resumed = anyio.Event()
    worker = ResumeWorker(agent, poll_s=0.02, on_resume=lambda run: resumed.set())
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(worker.run_forever)
            await resumed.wait()
            group.cancel_scope.cancel()
    saved = await stores.runs.load(good.id)
    assert saved is not None and saved.status == "finished"


# -- across processes ------------------------------------------------------------------------------------

_WORKER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import anyio
from agent.test_resume_worker import build_agent
from maitre.agent import ResumeWorker
from maitre.stores import open_stores

async def main():
    async with await open_stores({db!r}) as stores:
        worker = ResumeWorker(build_agent(stores, ledger=Path({ledger!r}), resumes=Path({resumes!r}), delay_s=0.05))
        print("ready", flush=True)
        go = Path({go!r})
        while not go.exists():
            time.sleep(0.002)
        print(len(await worker.run_once()))

anyio.run(main)
"""

_HOLDER = """
import os, signal, sys
import anyio
from maitre.storage import claim_store
from maitre.stores import open_stores

async def main():
    async with await open_stores({db!r}) as stores:
        claim = await claim_store(stores).claim({run_id!r}, lease_s=3600)
        print("claimed" if claim else "refused", flush=True)
        if {die!r}:
            os.kill(os.getpid(), signal.SIGKILL)
        sys.stdin.read()

anyio.run(main)
"""


async def test_two_worker_processes_racing_resume_each_run_once(tmp_path, db, stores, ledger, resumes):
    agent = build_agent(stores, ledger=ledger)
    runs = [await paused(agent, f"please refund order A100{n}") for n in range(4)]
    for run in runs:
        await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    go = tmp_path / "go"
    script = tmp_path / "worker.py"
    script.write_text(
        _WORKER.format(tests=str(TESTS), db=db, ledger=str(ledger), resumes=str(resumes), go=str(go))
    )
    counts: list[int] = []
    with anyio.fail_after(60):
        procs = [await anyio.open_process([sys.executable, str(script)]) for _ in range(2)]
        try:
            for proc in procs:  # both have opened the store and wait at the line
                assert await read_line(proc) == "ready"
            go.touch()
            for proc in procs:
                counts.append(int(await read_line(proc)))
                assert await proc.wait() == 0
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                await proc.aclose()

    assert sum(counts) == len(runs)
    assert len(lines(ledger)) == len(runs)  # each refund ran once
    resumed = [line.split() for line in lines(resumes)]
    assert sorted(run_id for run_id, _ in resumed) == sorted(r.id for r in runs)  # each run resumed once
    for run in runs:
        saved = await stores.runs.load(run.id)
        assert saved is not None and saved.status == "finished"


async def test_a_claim_left_by_a_killed_process_is_taken_over_at_once(tmp_path, db, stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER.format(db=db, run_id=run.id, die=True))
    with anyio.fail_after(60):
        held = await anyio.run_process([sys.executable, str(script)], check=False)
    assert held.returncode == -9 and held.stdout.strip() == b"claimed", held.stderr
    left = await claim_store(stores).get(run.id)
    assert left is not None and left.lease_until > time.time() + 3000  # its lease still runs for an hour

    (resumed,) = await ResumeWorker(agent, lease_s=30).run_once()
    assert resumed.id == run.id and lines(ledger) == ["A1042 1200.00"]


async def test_a_live_claim_in_another_process_is_not_stolen(tmp_path, db, stores, ledger):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    script = tmp_path / "holder.py"
    script.write_text(_HOLDER.format(db=db, run_id=run.id, die=False))
    worker = ResumeWorker(agent)
    with anyio.fail_after(60):
        async with await anyio.open_process([sys.executable, str(script)]) as holder:
            try:
                assert await read_line(holder) == "claimed"
                assert await worker.run_once() == []
                assert lines(ledger) == []
                saved = await stores.runs.load(run.id)
                assert saved is not None and saved.status == "paused"
            finally:
                holder.kill()
                await holder.wait()
    (resumed,) = await worker.run_once()  # its owner is gone now: taken at once
    assert resumed.id == run.id and lines(ledger) == ["A1042 1200.00"]


# -- the claim store itself (SQLite, memory, Postgres) ---------------------------------------------------


@contextlib.asynccontextmanager
async def postgres_stores() -> AsyncIterator[Stores]:
    """Stores in a fresh Postgres schema, dropped afterwards (skips when the server is not there)."""
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        pytest.skip(f"PostgreSQL at {PG_DSN} is not reachable: {exc}")
    schema = f"maitre_test_claims_{uuid.uuid4().hex[:10]}"
    opened = await open_stores(f"{PG_DSN}?schema={schema}")
    try:
        yield opened
    finally:
        await opened.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def claims(request: pytest.FixtureRequest, db: str) -> AsyncIterator[ClaimStore]:
    if request.param == "memory":
        yield MemoryClaimStore()
        return
    async with postgres_stores() if request.param == "postgres" else await open_stores(db) as opened:
        store = claim_store(opened)
        assert isinstance(store, SQLClaimStore)
        yield store


async def test_a_run_is_claimed_by_one_holder_until_released(claims):
    first = await claims.claim("run-1", lease_s=60)
    assert first is not None and first.owner == current_owner()
    assert await claims.claim("run-1", lease_s=60) is None  # held, and its owner (this process) lives
    assert await claims.claim("run-2", lease_s=60) is not None  # another run is another claim
    assert await claims.release(first) is True
    assert await claims.release(first) is False
    again = await claims.claim("run-1", lease_s=60)
    assert again is not None and again.token != first.token


async def test_a_claim_past_its_lease_is_free_and_the_old_holder_cannot_renew_or_release_it(claims):
    now = time.time()
    old = await claims.claim("run-1", lease_s=10, now=now)
    assert old is not None
    assert await claims.claim("run-1", lease_s=10, now=now + 5) is None
    new = await claims.claim("run-1", lease_s=10, now=now + 10)
    assert new is not None
    assert await claims.renew(old, lease_s=10, now=now + 11) is None
    assert await claims.release(old) is False  # the successor's claim stays
    held = await claims.get("run-1")
    assert held is not None and held.token == new.token


async def test_renewing_keeps_a_claim_past_its_first_lease(claims):
    now = time.time()
    claim = await claims.claim("run-1", lease_s=10, now=now)
    assert claim is not None
    renewed = await claims.renew(claim, lease_s=10, now=now + 8)
    assert renewed is not None and renewed.lease_until == pytest.approx(now + 18)
    assert await claims.claim("run-1", lease_s=10, now=now + 12) is None


async def test_a_dead_owners_claim_is_taken_over_and_an_unknown_owners_waits_for_its_lease(claims):
    assert await claims.claim("run-1", lease_s=3600, owner=dead_owner()) is not None
    taken = await claims.claim("run-1", lease_s=60)
    assert taken is not None and taken.owner == current_owner()

    elsewhere = json.dumps({**json.loads(current_owner()), "host": "another-machine", "pid": 1})
    assert owner_status(elsewhere) == "unknown"
    now = time.time()
    assert await claims.claim("run-2", lease_s=60, owner=elsewhere, now=now) is not None
    assert await claims.claim("run-2", lease_s=60, now=now + 30) is None
    assert await claims.claim("run-2", lease_s=60, now=now + 60) is not None


async def test_left_behind_lists_claims_past_their_lease_or_of_dead_owners_and_expire_ends_one(claims):
    now = time.time()
    live = await claims.claim("live", lease_s=3600)
    dead = await claims.claim("dead", lease_s=3600, owner=dead_owner())
    over = await claims.claim("over", lease_s=10, now=now - 60)
    assert live is not None and dead is not None and over is not None
    assert sorted(c.run_id for c in await claims.left_behind()) == ["dead", "over"]
    assert await claims.left_behind(limit=1) != []
    assert len(await claims.left_behind(limit=1)) == 1

    assert await claims.expire(live) is True
    assert sorted(c.run_id for c in await claims.left_behind()) == ["dead", "live", "over"]
    taken = await claims.claim("live", lease_s=60)  # ended now: anyone may take it
    assert taken is not None and await claims.expire(live) is False  # the old holder's token is gone


async def test_concurrent_claims_give_a_run_to_exactly_one_caller(claims):
    won: list[Any] = []

    async def one() -> None:
        won.append(await claims.claim("run-1", lease_s=60))

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(one)
    assert len([c for c in won if c is not None]) == 1


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def sql_claims(request: pytest.FixtureRequest, db: str) -> AsyncIterator[SQLClaimStore]:
    async with postgres_stores() if request.param == "postgres" else await open_stores(db) as opened:
        store = claim_store(opened)
        assert isinstance(store, SQLClaimStore)
        yield store


async def test_leases_are_the_databases_clock_not_the_workers(sql_claims, monkeypatch):
    """Hosts whose clocks disagree still agree on a lease: the statement reads the database's time."""
    real = time.time
    held = await sql_claims.claim("run-1", lease_s=60)
    assert held is not None and held.lease_until == pytest.approx(real() + 60, abs=5)

    monkeypatch.setattr(time, "time", lambda: real() + 120)  # this worker's clock is two minutes fast
    assert await sql_claims.claim("run-1", lease_s=60) is None  # the lease still runs
    assert await sql_claims.left_behind() == []
    renewed = await sql_claims.renew(held, lease_s=60)
    assert renewed is not None and renewed.lease_until == pytest.approx(real() + 60, abs=5)

    monkeypatch.setattr(time, "time", lambda: real() - 120)  # and now two minutes slow
    other = await sql_claims.claim("run-2", lease_s=60)
    assert other is not None and other.lease_until == pytest.approx(real() + 60, abs=5)  # not already over
    assert await sql_claims.expire(other) is True
    assert [c.run_id for c in await sql_claims.left_behind()] == ["run-2"]  # over by the database's clock


async def test_a_worker_with_a_fast_clock_does_not_take_a_run_another_worker_holds(
    stores, ledger, monkeypatch
):
    agent = build_agent(stores, ledger=ledger)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    held = await claim_store(stores).claim(run.id, lease_s=60)  # worker A, on time, is resuming it
    assert held is not None
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 120)  # worker B's host is two minutes ahead

    assert await ResumeWorker(build_agent(stores, ledger=ledger)).run_once() == []
    assert lines(ledger) == []


async def test_a_lease_must_be_positive(claims):
    with pytest.raises(ValueError):
        await claims.claim("run-1", lease_s=0)


@pytest.mark.postgres
async def test_the_worker_resumes_a_run_once_on_postgres(ledger, resumes):
    async with postgres_stores() as pg_stores:
        await _resume_once_with_two_workers(pg_stores, ledger, resumes)


async def _resume_once_with_two_workers(pg_stores: Stores, ledger: Path, resumes: Path) -> None:
    agent = build_agent(pg_stores, ledger=ledger, resumes=resumes)
    run = await paused(agent)
    await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
    workers = [
        ResumeWorker(build_agent(pg_stores, ledger=ledger, resumes=resumes, delay_s=0.05)) for _ in range(2)
    ]
    results: list[list[Run]] = []

    async def one(worker: ResumeWorker) -> None:
        results.append(await worker.run_once())

    async with anyio.create_task_group() as group:
        for worker in workers:
            group.start_soon(one, worker)
    assert [r.id for batch in results for r in batch] == [run.id]
    assert lines(ledger) == ["A1042 1200.00"] and len(lines(resumes)) == 1
