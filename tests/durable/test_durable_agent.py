"""DurableAgent in one process: a run and its resumption are workflows, and asking again runs nothing twice."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre import Principal
from maitre.durable import DurableAgent, executor, is_launched
from maitre.durable.saga import Saga
from maitre.exceptions import UserError
from maitre.stores import open_stores

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kill_agent  # noqa: E402

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
MARIA = Principal(user="maria", tenant="acme")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "saga" / "trip.py"


def effects(path: Path) -> list[str]:
    return [line.split(" ")[0] for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_durable_run_pauses_resumes_and_a_second_ask_replays(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MAITRE_LEDGER", str(tmp_path / "ledger"))
    monkeypatch.delenv("MAITRE_KILL", raising=False)
    async with await open_stores(str(tmp_path / "m.db")) as stores:
        durable = DurableAgent(kill_agent.make_agent(stores), name="inproc")
        try:
            with pytest.raises(UserError, match="not launched"):
                await durable.run("book and upgrade", ALICE, run_id="r1")
            async with executor(f"sqlite:///{tmp_path / 'm.dbos.sqlite'}", executor_id="inproc-1"):
                assert is_launched()
                run = await durable.run("book and upgrade", ALICE, run_id="r1")
                assert run.paused and run.pending[0].tool == "trip.upgrade_seat"
                await durable.gate.approvals.approve(run.pending[0].approval_id, MARIA)
                done = await durable.resume("r1")
                assert done.status == "finished" and "Upgraded on AI-101" in done.final_text
                again = await durable.resume("r1")  # not paused any more: the run as it is
                assert again.final_text == done.final_text
                first = await durable.run("book and upgrade", ALICE, run_id="r1")  # the recorded outcome
                assert first.paused
                assert effects(tmp_path / "ledger") == ["book_flight", "upgrade_seat"]
                saved = await stores.runs.load("r1")
                assert saved is not None and saved.status == "finished"
            assert not is_launched()
        finally:
            durable.unregister()


async def test_agent_durable_true_runs_and_resumes_through_dbos(tmp_path: Path, monkeypatch) -> None:
    """`Agent(..., durable=True)`: the host calls the agent as always; each run and resumption is a
    workflow (asked again under the same id, the recorded outcome comes back and nothing runs twice)."""
    from maitre.agent import Agent, Limits

    monkeypatch.setenv("MAITRE_LEDGER", str(tmp_path / "ledger"))
    monkeypatch.delenv("MAITRE_KILL", raising=False)
    async with await open_stores(str(tmp_path / "d.db")) as stores:
        gate = kill_agent.KillGate(kill_agent.box(), stores=stores)
        agent = Agent(
            kill_agent.TripModel(), gate=gate, limits=Limits(max_steps=8), durable=True, durable_name="flag"
        )
        try:
            assert isinstance(agent.durable, DurableAgent)
            with pytest.raises(UserError, match="not launched"):
                await agent.run("book and upgrade", ALICE, run_id="d1")
            async with executor(f"sqlite:///{tmp_path / 'd.dbos.sqlite'}", executor_id="flag-1"):
                run = await agent.run("book and upgrade", ALICE, run_id="d1")
                assert run.paused and run.pending[0].tool == "trip.upgrade_seat"
                await agent.gate.approvals.approve(run.pending[0].approval_id, MARIA)
                done = await agent.resume("d1")
                assert done.status == "finished" and "Upgraded on AI-101" in done.final_text
                first = await agent.run("book and upgrade", ALICE, run_id="d1")  # recorded: not run again
                assert first.paused
                assert effects(tmp_path / "ledger") == ["book_flight", "upgrade_seat"]
        finally:
            agent.durable.unregister()


async def test_a_saga_inside_a_durable_gate_records_its_calls(tmp_path: Path) -> None:
    os.environ.pop("MAITRE_KILL", None)
    spec = EXAMPLE
    import importlib.util

    loaded = importlib.util.spec_from_file_location("saga_trip_durable", spec)
    assert loaded is not None and loaded.loader is not None
    trip = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(trip)
    os.environ["TRIP_LEDGER"] = str(tmp_path / "trip.txt")
    try:
        box = trip.toolbox()
        from dbos import DBOS, SetWorkflowID

        from maitre.durable import DurableGate
        from maitre.gate import Gate

        async with await open_stores(str(tmp_path / "s.db")) as stores:
            gate = DurableGate(Gate(box, stores=stores))

            @DBOS.workflow(name="test.saga")
            async def book() -> str:
                async with Saga(gate, ALICE, saga_id="trip-d") as saga:
                    await saga.call("trip.book_flight", {"flight": "AI-101", "day": "2026-12-24"})
                    await saga.call("trip.create_event", {"title": "t", "day": "2026-12-24"})
                return saga.outcome.status

            async with executor(f"sqlite:///{tmp_path / 's.dbos.sqlite'}", executor_id="saga-1"):
                with SetWorkflowID("saga-wf"):
                    assert await book() == "compensated"
                steps = await DBOS.list_workflow_steps_async("saga-wf")
                names = [step["function_name"] for step in steps]
                assert names.count("maitre.gate.call") == 3  # book, the calendar, the cancellation
        text = (tmp_path / "trip.txt").read_text()
        assert text.count("booked") == 1 and text.count("cancelled") == 1
    finally:
        os.environ.pop("TRIP_LEDGER", None)


class _SlowModel(kill_agent.TripModel):
    async def complete(self, request: Any) -> Any:
        if self.calls >= 1:
            await anyio.sleep(30)  # the second model call never ends: the host cancels the run
        return await super().complete(request)


async def test_an_executor_cancelled_mid_run_leaves_its_lease_for_another_worker(
    tmp_path: Path, monkeypatch
) -> None:
    from maitre.agent import Agent, Limits
    from maitre.durable.worker import executor_leases

    monkeypatch.setenv("MAITRE_LEDGER", str(tmp_path / "ledger"))
    system_db = f"sqlite:///{tmp_path / 'c.dbos.sqlite'}"
    async with await open_stores(str(tmp_path / "c.db")) as stores:
        agent = Agent(
            _SlowModel(), gate=kill_agent.KillGate(kill_agent.box(), stores=stores), limits=Limits()
        )
        durable = DurableAgent(agent, name="cancelled")
        try:
            async with executor(system_db, executor_id="cancel-1"):
                with anyio.move_on_after(2.0):
                    await durable.run("book and charge", ALICE, run_id="c1")
        finally:
            durable.unregister()
    leases, engine = executor_leases(system_db)
    try:
        left = await leases.left_behind()
        assert [claim.run_id for claim in left] == ["executor:cancel-1"]  # for recovery, not released
    finally:
        await engine.close()
    # Another worker (another process) finds it and finishes the run from its recorded steps.
    command = [sys.executable, "-m", "maitre.durable", "worker", "--once", "--db", str(tmp_path / "c.db")]
    command += ["--system-db", system_db, "--agent", f"{HERE / 'kill_agent.py'}:make_agent"]
    command += ["--executor-id", "cancel-2", "--name", "cancelled", "--timeout", "30"]
    env = {**os.environ, "MAITRE_DURABLE_QUEUE_POLL_S": "0.1"}
    done = await anyio.run_process(command, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    async with await open_stores(str(tmp_path / "c.db")) as stores:
        saved = await stores.runs.load("c1")
        assert saved is not None and saved.status == "finished"
    assert effects(tmp_path / "ledger") == ["book_flight", "charge_card"]


class _BookOnce:
    name = "scripted"

    async def complete(self, request: Any) -> Any:
        from maitre.models.base import ModelResponse
        from maitre.types import ToolCall

        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not done:
            call = ToolCall(id="c0", name="t.slow_book", arguments={"flight": "AI-101"})
            return ModelResponse(tool_calls=[call], stop_reason="tool_use")
        return ModelResponse(text=f"Result: {done[0].content}")


async def test_a_durable_run_waits_for_the_same_write_in_flight_elsewhere_instead_of_telling_the_model(
    tmp_path: Path,
) -> None:
    from maitre import Toolbox
    from maitre.agent import Agent, Limits
    from maitre.context import RunContext
    from maitre.types import ToolCall

    booked: list[str] = []
    box = Toolbox("t")

    @box.tool(effect="write")
    async def slow_book(flight: str) -> str:
        """Book, slowly."""
        await anyio.sleep(1.0)
        booked.append(flight)
        return f"Booked {flight}."

    async with await open_stores(str(tmp_path / "w.db")) as stores:
        agent = Agent(_BookOnce(), box, stores=stores, limits=Limits(max_steps=3), notes=False)  # type: ignore[arg-type]
        plain_gate = agent.gate
        durable = DurableAgent(agent, name="twin")
        try:
            async with executor(f"sqlite:///{tmp_path / 'w.dbos.sqlite'}", executor_id="twin-1"):
                results: dict[str, Any] = {}

                async def twin() -> None:  # the same operation, already running elsewhere
                    call = ToolCall(id="x", name="t.slow_book", arguments={"flight": "AI-101"})
                    results["twin"] = await plain_gate.call(
                        call, ALICE, RunContext(run_id="w1", principal=ALICE)
                    )

                async with anyio.create_task_group() as group:
                    group.start_soon(twin)
                    await anyio.sleep(0.3)
                    results["run"] = await durable.run("book it", ALICE, run_id="w1")
        finally:
            durable.unregister()
    run = results["run"]
    assert booked == ["AI-101"]  # once
    assert run.status == "finished" and run.final_text == "Result: Booked AI-101."
    seen = [m.content for m in run.messages if getattr(m, "role", "") == "tool"]
    assert seen == ["Booked AI-101."]  # the model never read "being executed right now"
