"""Attacks on durable runs and sagas that must fail.

DBOS hands back a workflow's recorded output to anyone who starts a workflow under the same id: a
durable run id chosen by another user must not return the first user's run, start their own run
under it, or decide the first user's approvals.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre import Principal, Toolbox, ToolError
from maitre.agent import Agent, ApprovalDecision, Limits
from maitre.context import IdempotencyKey
from maitre.durable import DurableAgent, executor
from maitre.durable.saga import RETRY_THEN_COMPENSATE, Saga
from maitre.exceptions import UserError
from maitre.gate import Gate
from maitre.models.base import ModelRequest, ModelResponse
from maitre.stores import open_stores
from maitre.types import ToolCall

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kill_agent  # noqa: E402

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
BOB = Principal(user="bob", tenant="acme")
EVE = Principal(user="eve", tenant="other")
MARIA = Principal(user="maria", tenant="acme")
SECRET = "alice-allergy-penicillin"


def effects(path: Path) -> list[str]:
    return [line.split(" ")[0] for line in path.read_text().splitlines()] if path.exists() else []


async def test_another_user_cannot_take_a_durable_run_by_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAITRE_LEDGER", str(tmp_path / "ledger"))
    monkeypatch.delenv("MAITRE_KILL", raising=False)
    async with await open_stores(str(tmp_path / "a.db")) as stores:
        durable = DurableAgent(kill_agent.make_agent(stores), name="attack-ids")
        try:
            async with executor(f"sqlite:///{tmp_path / 'a.dbos.sqlite'}", executor_id="attack-1"):
                paused = await durable.run("book and upgrade", ALICE, run_id="r1")
                assert paused.paused
                approval = paused.pending[0].approval_id
                for other in (BOB, EVE):
                    # DBOS would return Alice's recorded (paused) run for the id: refused instead
                    with pytest.raises(UserError, match="taken"):
                        await durable.run("book and upgrade", other, run_id="r1")
                    approve = {approval: ApprovalDecision(approve=True, approver=other)}
                    with pytest.raises(UserError, match="no run"):
                        await durable.resume("r1", approve, principal=other)
                    with pytest.raises(UserError, match="no run"):
                        await durable.continue_abandoned("r1", principal=other)
                ticket = await durable.gate.approvals.get(approval)
                assert ticket is not None and ticket.status == "pending"  # Bob decided nothing
                assert effects(tmp_path / "ledger") == ["book_flight"]

                # A run id that names a resume workflow (or its prefix) is refused before DBOS sees it
                with pytest.raises(UserError, match="reserved"):
                    await durable.run("book and upgrade", BOB, run_id="r1:resume:0123456789abcdef")

                # Alice's own run is not blocked by what Bob and Eve tried
                await durable.gate.approvals.approve(approval, MARIA)
                done = await durable.resume("r1", principal=ALICE)
                assert done.status == "finished" and "Upgraded on AI-101" in done.final_text
                assert (await durable.run("book and upgrade", ALICE, run_id="r1")).paused  # recorded
                for other in (BOB, EVE):
                    with pytest.raises(UserError, match="taken"):
                        await durable.run("book and upgrade", other, run_id="r1")
                    with pytest.raises(UserError, match="no run"):
                        await durable.continue_abandoned("r1", principal=other)
                    with pytest.raises(UserError, match="no run"):  # finished: still not theirs
                        await durable.resume("r1", principal=other)
                # Bob's own run under a fresh id is his
                mine = await durable.run("book it", BOB, run_id="b1")
                assert mine.status == "finished" and mine.principal.user == "bob"
                # continue_abandoned waits only on this run's workflows, not on a run whose id
                # merely starts with it (b1 -> b10)
                again = await durable.continue_abandoned("b1", principal=BOB)
                assert again.status == "finished"
            assert effects(tmp_path / "ledger") == ["book_flight", "upgrade_seat", "book_flight"]
        finally:
            durable.unregister()


class _Recall:
    name = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not done:
            return ModelResponse(
                tool_calls=[ToolCall(id="c0", name="recall", arguments={})], stop_reason="tool_use"
            )
        return ModelResponse(text=f"You told me: {getattr(done[0], 'content', '')}")


async def test_another_user_cannot_read_a_personal_durable_run_by_its_id(tmp_path: Path) -> None:
    box = Toolbox()
    calls: list[str] = []

    @box.tool(personal=True)
    def recall() -> str:
        """What the user told me about their health."""
        calls.append("recall")
        return SECRET

    async with await open_stores(str(tmp_path / "p.db")) as stores:
        agent = Agent(_Recall(), box, stores=stores, limits=Limits(max_steps=3), notes=False)
        durable = DurableAgent(agent, name="attack-personal")
        try:
            async with executor(f"sqlite:///{tmp_path / 'p.dbos.sqlite'}", executor_id="attack-p"):
                run = await durable.run("what did I tell you?", ALICE, run_id="p1")
                assert SECRET in run.final_text
                for other in (BOB, EVE):
                    with pytest.raises(UserError, match="taken") as refused:
                        await durable.run("what did I tell you?", other, run_id="p1")
                    assert SECRET not in str(refused.value)
                    with pytest.raises(UserError, match="no run"):
                        await durable.continue_abandoned("p1", principal=other)
                assert calls == ["recall"]  # nothing ran for Bob or Eve under Alice's id
        finally:
            durable.unregister()


# -- sagas ---------------------------------------------------------------------------------------------


def _trip(ledger: list[str], *, undo: str = "ok", calendar: str = "down") -> Toolbox:
    """book_flight (compensated by cancel_flight, whose behaviour `undo` picks) and create_event
    (`down`: fails, retryable; `slow`: succeeds after a while)."""
    box, undo_box = Toolbox("trip"), Toolbox("trip")

    @undo_box.tool(effect="write", timeout=0.3, requires_approval=undo == "approval")
    async def cancel_flight(flight: str, result: str) -> str:
        """Cancel a booking."""
        if undo == "raises":
            raise RuntimeError("the airline's API broke")
        if undo == "hangs":
            await anyio.sleep(5)
        ledger.append(f"cancel {flight}")
        return f"Cancelled {flight}."

    @box.tool(effect="write")
    def book_flight(flight: str, principal: Principal) -> str:
        """Book a flight."""
        ledger.append(f"book {flight} {principal.user}")
        return f"Booked {flight} for {principal.user}."

    book, cancel = box.get("trip.book_flight"), undo_box.get("trip.cancel_flight")
    assert book is not None and cancel is not None
    book.declare_compensation(cancel)  # a compensation lives in no model-facing toolbox

    @box.tool(effect="write")
    async def create_event(title: str) -> str:
        """Put the trip in the calendar."""
        ledger.append(f"calendar {title}")
        if calendar == "slow":
            await anyio.sleep(0.6)
            return "In the calendar."
        raise ToolError("TEMPORARY_UNAVAILABLE", "The calendar service is down.", retryable=True)

    return box


async def _plan(gate: Gate, who: Principal, saga_id: str) -> Any:
    async with Saga(gate, who, saga_id=saga_id) as saga:
        await saga.call("trip.book_flight", {"flight": "AI-101"})
        await saga.call("trip.create_event", {"title": "Pune"}, policy=RETRY_THEN_COMPENSATE)
    return saga.outcome


async def test_a_saga_id_reused_by_another_principal_replays_nothing_of_the_first(tmp_path: Path) -> None:
    ledger: list[str] = []
    async with await open_stores(str(tmp_path / "s.db")) as stores:
        gate = Gate(_trip(ledger), stores=stores)
        alice = await _plan(gate, ALICE, "trip-1")
        bob = await _plan(gate, BOB, "trip-1")
        eve = await _plan(gate, EVE, "trip-1")
    for outcome, who in ((alice, "alice"), (bob, "bob"), (eve, "eve")):
        assert outcome.status == "compensated"
        booked = outcome.steps[0].result
        assert booked is not None and not booked.replayed and booked.content == f"Booked AI-101 for {who}."
        assert outcome.steps[0].compensation is not None and not outcome.steps[0].compensation.replayed
    assert [line for line in ledger if line.startswith("book")] == [
        "book AI-101 alice",
        "book AI-101 bob",
        "book AI-101 eve",
    ]
    assert ledger.count("cancel AI-101") == 3  # each their own, once


@pytest.mark.parametrize("undo", ["raises", "hangs", "approval"])
async def test_a_compensation_that_raises_hangs_or_needs_approval_stops_for_a_person_even_when_run_again(
    tmp_path: Path, undo: str
) -> None:
    ledger: list[str] = []
    async with await open_stores(str(tmp_path / "s.db")) as stores:
        gate = Gate(_trip(ledger, undo=undo), stores=stores)
        for _ in range(2):  # a host running the saga again under its id: still stopped, never skipped
            outcome = await _plan(gate, ALICE, f"trip-{undo}")
            assert outcome.status == "needs_human", outcome.reason
            assert "trip.cancel_flight" in outcome.reason
            assert outcome.steps[0].status == "done"  # not marked compensated
        assert "cancel AI-101" not in ledger
        assert ledger.count("book AI-101 alice") == 1


async def test_a_saga_run_twice_at_once_compensates_exactly_once(tmp_path: Path) -> None:
    ledger: list[str] = []
    outcomes: list[Any] = []
    async with await open_stores(str(tmp_path / "s.db")) as stores:
        gate = Gate(_trip(ledger), stores=stores)

        async def plan() -> None:
            outcomes.append(await _plan(gate, ALICE, "trip-twice"))

        async with anyio.create_task_group() as group:
            group.start_soon(plan)
            group.start_soon(plan)
    assert ledger.count("book AI-101 alice") == 1 and ledger.count("cancel AI-101") == 1
    assert sorted(o.status for o in outcomes) == ["compensated", "compensated"]


async def test_a_saga_run_twice_at_once_does_not_undo_a_step_still_running_in_the_other(
    tmp_path: Path,
) -> None:
    """The second run finds the calendar call in flight in the first: that is not a failure to
    compensate (the first run's call goes through), it waits for it."""
    ledger: list[str] = []
    outcomes: list[Any] = []
    async with await open_stores(str(tmp_path / "s.db")) as stores:
        gate = Gate(_trip(ledger, calendar="slow"), stores=stores)

        async def plan() -> None:
            outcomes.append(await _plan(gate, ALICE, "trip-slow"))

        async with anyio.create_task_group() as group:
            group.start_soon(plan)
            await anyio.sleep(0.2)
            group.start_soon(plan)
    assert "cancel AI-101" not in ledger, outcomes
    assert ledger.count("calendar Pune") == 1
    assert [o.status for o in outcomes] == ["completed", "completed"]


# -- tools that misbehave inside a durable step ---------------------------------------------------------


class _OneCallThenNext:
    """Calls `first`, then (whatever it got) `then`, then answers with what it read."""

    name = "scripted"

    def __init__(self, first: str, then: str | None = None) -> None:
        self.first, self.then = first, then

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        plan = [self.first] + ([self.then] if self.then else [])
        if len(done) < len(plan):
            name = plan[len(done)]
            return ModelResponse(
                tool_calls=[ToolCall(id=f"c{len(done)}", name=name, arguments={"order": "A1"})],
                stop_reason="tool_use",
            )
        return ModelResponse(text="Read: " + " | ".join(getattr(m, "content", "") for m in done))


def _misbehaving(ledger: list[str]) -> Toolbox:
    box = Toolbox("m")

    @box.tool(effect="write")
    def refund_raises(order: str) -> str:
        """Refund (raises a bug after the side effect)."""
        ledger.append(f"refund {order}")
        raise KeyError("bug after the money moved")

    def was_refunded(key: IdempotencyKey) -> str | None:
        return "Refunded (checked)." if f"refund-checked {key}" in ledger else None

    @box.tool(effect="write", reconcile=was_refunded)
    def refund_checked(order: str, key: IdempotencyKey) -> str:
        """Refund (raises a bug after the side effect; has a reconcile check)."""
        ledger.append(f"refund-checked {key}")
        raise KeyError("bug after the money moved")

    @box.tool(effect="write", timeout=0.3)
    async def refund_hangs(order: str) -> str:
        """Refund (hangs after the side effect)."""
        ledger.append(f"refund {order}")
        await anyio.sleep(10)
        return "refunded"

    @box.tool
    def huge(order: str) -> str:
        """Look up an order (returns a megabyte)."""
        ledger.append(f"huge {order}")
        return "x" * 1_000_000

    @box.tool(effect="write")
    def notify(order: str) -> str:
        """Tell the customer the refund went through."""
        ledger.append(f"notify {order}")
        return "notified"

    return box


@pytest.mark.parametrize("tool", ["m.refund_raises", "m.refund_hangs"])
async def test_a_write_that_breaks_inside_a_durable_step_stops_the_run_for_a_person(
    tmp_path: Path, tool: str
) -> None:
    """The refund's side effect happened, then the tool raised (a bug, not a ToolError) or hung past
    its timeout: its outcome is unknown. The run stops as needing a person - the model does not
    read past it and notify the customer - and asking again runs nothing twice."""
    from dbos import DBOS

    ledger: list[str] = []
    async with await open_stores(str(tmp_path / "t.db")) as stores:
        agent = Agent(
            _OneCallThenNext(tool, "m.notify"),
            _misbehaving(ledger),
            stores=stores,
            limits=Limits(max_steps=4),
            notes=False,
        )
        durable = DurableAgent(agent, name=f"misbehaving-{tool}")
        try:
            async with executor(f"sqlite:///{tmp_path / 't.dbos.sqlite'}", executor_id="mis-1"):
                run = await durable.run("refund A1", ALICE, run_id="t1")
                assert run.status == "stopped" and str(run.stop_reason) == "needs_human", run.final_text
                assert tool in run.final_text
                again = await durable.run("refund A1", ALICE, run_id="t1")
                assert again.final_text == run.final_text
                steps = await DBOS.list_workflow_steps_async("t1")
                assert [s["function_name"] for s in steps].count("maitre.gate.call") == 1
        finally:
            durable.unregister()
    assert ledger == ["refund A1"]  # once, and no notification about an unknown refund


async def test_a_huge_result_is_recorded_cut_and_not_run_again(tmp_path: Path) -> None:
    from dbos import DBOS

    ledger: list[str] = []
    async with await open_stores(str(tmp_path / "h.db")) as stores:
        agent = Agent(
            _OneCallThenNext("m.huge"),
            _misbehaving(ledger),
            stores=stores,
            limits=Limits(max_steps=3),
            notes=False,
        )
        durable = DurableAgent(agent, name="huge")
        try:
            async with executor(f"sqlite:///{tmp_path / 'h.dbos.sqlite'}", executor_id="huge-1"):
                run = await durable.run("look up A1", ALICE, run_id="h1")
                assert run.status == "finished"
                assert len(run.final_text) < 200_000
                steps = await DBOS.list_workflow_steps_async("h1")
                recorded = [s["output"] for s in steps if s["function_name"] == "maitre.gate.call"]
                assert len(recorded) == 1 and len(str(recorded[0])) < 200_000
                again = await durable.run("look up A1", ALICE, run_id="h1")
                assert again.final_text == run.final_text
        finally:
            durable.unregister()
    assert ledger == ["huge A1"]


async def test_a_write_that_broke_is_settled_by_its_reconcile_check_in_the_same_step(tmp_path: Path) -> None:
    ledger: list[str] = []
    async with await open_stores(str(tmp_path / "r.db")) as stores:
        agent = Agent(
            _OneCallThenNext("m.refund_checked", "m.notify"),
            _misbehaving(ledger),
            stores=stores,
            limits=Limits(max_steps=4),
            notes=False,
        )
        durable = DurableAgent(agent, name="reconciled")
        try:
            async with executor(f"sqlite:///{tmp_path / 'r.dbos.sqlite'}", executor_id="rec-1"):
                run = await durable.run("refund A1", ALICE, run_id="k1")
                assert run.status == "finished", run.final_text
                assert run.final_text == "Read: Refunded (checked). | notified"
                again = await durable.run("refund A1", ALICE, run_id="k1")
                assert again.final_text == run.final_text
        finally:
            durable.unregister()
    assert [line.split(" ")[0] for line in ledger] == ["refund-checked", "notify"]


class _BookThenCancel:
    """Books AI-101, then tries to run the booking's compensation itself."""

    name = "greedy"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        plan = [
            ("trip.book_flight", {"flight": "AI-101"}),
            ("trip.cancel_flight", {"flight": "AI-101", "result": "x"}),
        ]
        if len(done) < len(plan):
            name, arguments = plan[len(done)]
            return ModelResponse(
                tool_calls=[ToolCall(id=f"c{len(done)}", name=name, arguments=arguments)],
                stop_reason="tool_use",
            )
        return ModelResponse(text=" | ".join(getattr(m, "content", "") for m in done))


async def test_a_durable_run_under_a_saga_id_replays_nothing_of_the_saga_and_cannot_compensate(
    tmp_path: Path,
) -> None:
    ledger: list[str] = []
    box = _trip(ledger)
    async with await open_stores(str(tmp_path / "g.db")) as stores:
        saga = await _plan(Gate(box, stores=stores), ALICE, "trip-7")
        assert saga.status == "compensated"  # booked, calendar down, cancelled by the runtime
        agent = Agent(
            _BookThenCancel(),
            box,
            stores=stores,
            limits=Limits(max_steps=4),
            notes=False,
            durable=True,
            durable_name="saga-ids",
        )
        try:
            async with executor(f"sqlite:///{tmp_path / 'g.dbos.sqlite'}", executor_id="sid-1"):
                for who in (ALICE, BOB):
                    run = await agent.run("book AI-101", who, run_id=f"trip-7-{who.user}")
                    assert run.status == "finished"
                    tool_results = [m for m in run.messages if getattr(m, "role", "") == "tool"]
                    assert not getattr(tool_results[0], "is_error", True)
                    assert getattr(tool_results[1], "is_error", False)  # the compensation: no such tool
                # the saga's own id as a run id: its booking (since cancelled) is not replayed
                run = await agent.run("book AI-101", ALICE, run_id="trip-7")
                assert run.status == "finished"
                with pytest.raises(UserError, match="reserved"):
                    await agent.run("book AI-101", ALICE, run_id="saga:trip-7")
        finally:
            agent.durable.unregister()
    assert ledger.count("cancel AI-101") == 1  # the runtime's, never the model's
    assert ledger.count("book AI-101 alice") == 3 and ledger.count("book AI-101 bob") == 1


async def test_two_users_starting_the_same_new_run_id_at_once_get_one_run_each_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAITRE_LEDGER", str(tmp_path / "ledger"))
    monkeypatch.delenv("MAITRE_KILL", raising=False)
    outcomes: dict[str, Any] = {}
    async with await open_stores(str(tmp_path / "race.db")) as stores:
        durable = DurableAgent(kill_agent.make_agent(stores), name="race")
        try:
            async with executor(f"sqlite:///{tmp_path / 'race.dbos.sqlite'}", executor_id="race-1"):

                async def start(who: Principal) -> None:
                    try:
                        outcomes[who.user] = await durable.run("book it", who, run_id="same")
                    except UserError as exc:
                        outcomes[who.user] = exc

                async with anyio.create_task_group() as group:
                    for who in (ALICE, BOB, EVE):
                        group.start_soon(start, who)
        finally:
            durable.unregister()
    runs = {user: o for user, o in outcomes.items() if not isinstance(o, UserError)}
    assert len(runs) == 1, outcomes  # one of them owns the id; the others are refused
    ((owner, run),) = runs.items()
    assert run.principal.user == owner and run.status == "finished"
    assert all("taken" in str(o) for o in outcomes.values() if isinstance(o, UserError))
    assert effects(tmp_path / "ledger") == ["book_flight"]


class _BrokenModel:
    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise ZeroDivisionError("a bug in the model adapter")


async def test_a_model_adapter_bug_inside_a_durable_step_stops_the_run_and_is_not_asked_again(
    tmp_path: Path,
) -> None:
    model = _BrokenModel()
    async with await open_stores(str(tmp_path / "mb.db")) as stores:
        agent = Agent(model, _misbehaving([]), stores=stores, limits=Limits(max_steps=3), notes=False)
        durable = DurableAgent(agent, name="broken-model")
        try:
            async with executor(f"sqlite:///{tmp_path / 'mb.dbos.sqlite'}", executor_id="mb-1"):
                run = await durable.run("hello", ALICE, run_id="mb1")
                assert run.status == "stopped" and str(run.stop_reason) == "model_error"
                assert "ZeroDivisionError" in run.final_text
                again = await durable.run("hello", ALICE, run_id="mb1")
                assert again.final_text == run.final_text and again.status == run.status
        finally:
            durable.unregister()
    assert model.calls == 1
    with sqlite3.connect(tmp_path / "mb.dbos.sqlite") as conn:  # recorded as JSON, no pickled exception
        rows = conn.execute("SELECT function_name, error FROM operation_outputs").fetchall()
    assert ("maitre.model.complete", None) in rows and all(error is None for _, error in rows)


async def test_a_personal_compensation_run_in_a_durable_saga_is_recorded_sealed(tmp_path: Path) -> None:
    """The saga's own gate for compensations records them as steps too: a personal one sealed."""
    from dbos import DBOS, SetWorkflowID

    from maitre.durable import DurableGate

    box, undo = Toolbox("h"), Toolbox("h")
    done: list[str] = []

    @undo.tool(effect="write", personal=True)
    def cancel_visit(clinic: str, result: str) -> str:
        """Cancel the visit."""
        done.append("cancel")
        return f"Cancelled the {SECRET} visit at {clinic}."

    @box.tool(effect="write", compensate=undo.get("h.cancel_visit"))
    def book_visit(clinic: str) -> str:
        """Book a visit."""
        done.append("book")
        return f"Booked {clinic}."

    @box.tool(effect="write")
    def notify(clinic: str) -> str:
        """Tell the clinic: fails."""
        raise ToolError("INVALID_ARGUMENTS", "no")

    async with await open_stores(str(tmp_path / "hs.db")) as stores:
        gate = DurableGate(Gate(box, stores=stores))

        @DBOS.workflow(name="test.attack.personal_saga")
        async def visit() -> str:
            async with Saga(gate, ALICE, saga_id="visit-1") as saga:
                await saga.call("h.book_visit", {"clinic": "north"})
                await saga.call("h.notify", {"clinic": "north"})
            return saga.outcome.status

        async with executor(f"sqlite:///{tmp_path / 'hs.dbos.sqlite'}", executor_id="hs-1"):
            with SetWorkflowID("visit-wf"):
                assert await visit() == "compensated"
            steps = await DBOS.list_workflow_steps_async("visit-wf")
    assert done == ["book", "cancel"]
    outputs = [str(s["output"]) for s in steps if s["function_name"] == "maitre.gate.call"]
    assert len(outputs) == 3 and not any(SECRET in o for o in outputs), outputs


async def test_a_durable_saga_step_or_compensation_that_breaks_flags_the_saga_for_a_person(
    tmp_path: Path,
) -> None:
    """Inside a workflow the durable gate stops a write in doubt (NeedsHuman, a BaseException);
    the saga turns it into its own needs_human outcome, with nothing compensated past it."""
    from dbos import DBOS, SetWorkflowID

    from maitre.durable import DurableGate

    ledger: list[str] = []

    async with await open_stores(str(tmp_path / "db.db")) as stores:
        broken = _trip(ledger, undo="raises")

        @broken.tool(effect="write")
        def pay(amount: int) -> str:
            """Pay: moves money, then a bug."""
            ledger.append(f"pay {amount}")
            raise KeyError("bug")

        gate = DurableGate(Gate(broken, stores=stores))

        @DBOS.workflow(name="test.attack.broken_saga")
        async def trip(kind: str) -> str:
            async with Saga(gate, ALICE, saga_id=f"broken-{kind}") as saga:
                await saga.call("trip.book_flight", {"flight": "AI-101"})
                if kind == "step":
                    await saga.call("trip.pay", {"amount": 5400})
                else:
                    await saga.call("trip.create_event", {"title": "Pune"}, policy=RETRY_THEN_COMPENSATE)
            return f"{saga.outcome.status}: {saga.outcome.reason}"

        async with executor(f"sqlite:///{tmp_path / 'db.dbos.sqlite'}", executor_id="bs-1"):
            for kind in ("step", "compensation"):
                with SetWorkflowID(f"broken-wf-{kind}"):
                    said = await trip(kind)
                assert said.startswith("needs_human: "), said
                assert ("trip.pay" if kind == "step" else "trip.cancel_flight") in said
    assert "cancel AI-101" not in ledger and ledger.count("pay 5400") == 1
