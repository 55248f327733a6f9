"""`maitre runs worker`: a paused run decided by another person resumes without anyone typing its id."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from agent import shop_agent  # tests/ is on the path: the package tests/agent
from maitre import Principal
from maitre.agent import Run
from maitre.stores import open_stores

AGENT_TESTS = Path(__file__).resolve().parents[1]
ALICE = Principal(user="alice", tenant="acme")
MARIA = Principal(user="maria", tenant="acme")
MAITRE = [sys.executable, "-m", "maitre.cli"]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    return path


@pytest.fixture
def factory(tmp_path: Path, ledger: Path) -> str:
    """`FILE:FACTORY` of the shop agent (tests/agent/shop_agent.py) writing to this test's ledger."""
    script = tmp_path / "agent_factory.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(AGENT_TESTS)!r})\n"
        "from pathlib import Path\n"
        "from agent import shop_agent\n"
        f"shop_agent.set_ledger(Path({str(ledger)!r}))\n"
        "make_agent = shop_agent.make_agent\n"
        "def not_an_agent(stores):\n"
        "    return 'hello'\n"
    )
    return str(script)


def paused_run(db: str, ledger: Path, *, approve: bool) -> str:
    """A run of alice that paused on the refund; approved by maria when `approve`."""
    shop_agent.set_ledger(ledger)

    async def start() -> str:
        async with await open_stores(db) as stores:
            agent = shop_agent.make_agent(stores)
            run = await agent.run("please refund order A1042", ALICE)
            assert run.paused, run.final_text
            if approve:
                await agent.gate.approvals.approve(run.pending[0].approval_id, MARIA)
            return run.id

    return anyio.run(start)


def status_of(db: str, run_id: str) -> str | None:
    async def read() -> str | None:
        async with await open_stores(db) as stores:
            saved = await stores.runs.load(run_id)
            return None if saved is None else saved.status

    return anyio.run(read)


def worker(db: str, agent: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [*MAITRE, "runs", "worker", "--db", db, "--agent", agent, *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_once_resumes_the_decided_run_and_says_how_many(tmp_path, ledger, factory):
    db = str(tmp_path / "maitre.db")
    run_id = paused_run(db, ledger, approve=True)

    done = worker(db, f"{factory}:make_agent", "--once")
    assert done.returncode == 0, done.stderr
    assert "resumed 1 run" in done.stdout and f"{run_id}: finished" in done.stdout
    assert ledger.read_text().splitlines() == ["A1042 1200.00"]
    assert status_of(db, run_id) == "finished"

    again = worker(db, f"{factory}:make_agent", "--once")
    assert again.returncode == 0 and "resumed 0 runs" in again.stdout
    assert ledger.read_text().splitlines() == ["A1042 1200.00"]


def test_once_leaves_a_run_whose_approval_is_still_pending(tmp_path, ledger, factory):
    db = str(tmp_path / "maitre.db")
    run_id = paused_run(db, ledger, approve=False)

    done = worker(db, f"{factory}:make_agent", "--once")
    assert done.returncode == 0, done.stderr
    assert "resumed 0 runs" in done.stdout
    assert status_of(db, run_id) == "paused" and ledger.read_text() == ""


def test_a_factory_that_returns_no_agent_is_refused_in_one_line(tmp_path, ledger, factory):
    db = str(tmp_path / "maitre.db")
    paused_run(db, ledger, approve=True)

    done = worker(db, f"{factory}:not_an_agent", "--once")
    assert done.returncode == 2
    assert "returned a str, not an Agent" in done.stderr and "Traceback" not in done.stderr
    assert ledger.read_text() == ""


def test_a_missing_store_is_not_created(tmp_path, factory):
    db = tmp_path / "typo.db"
    done = worker(str(db), f"{factory}:make_agent", "--once")
    assert done.returncode == 2 and "no maitre database" in done.stderr
    assert not db.exists()


def test_without_once_it_keeps_polling_and_resumes_a_decision_made_later(tmp_path, ledger, factory):
    db = str(tmp_path / "maitre.db")
    run_id = paused_run(db, ledger, approve=False)
    command = [*MAITRE, "runs", "worker", "--db", db, "--agent", f"{factory}:make_agent", "--poll", "0.05"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert proc.poll() is None and ledger.read_text() == ""

        async def approve() -> None:
            async with await open_stores(db) as stores:
                gate = shop_agent.make_agent(stores).gate
                (request,) = await gate.approvals.list(status="pending")
                await gate.approvals.approve(request.id, MARIA)

        anyio.run(approve)
        deadline = time.monotonic() + 20
        while status_of(db, run_id) != "finished" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status_of(db, run_id) == "finished"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert f"{run_id}: finished" in out
    assert "resume worker started" in err
    assert ledger.read_text().splitlines() == ["A1042 1200.00"]


def noted(db: str) -> bool:
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        return conn.execute("SELECT count(*) FROM audit WHERE tool = 'shop.note'").fetchone()[0] > 0


def test_a_worker_killed_after_the_run_saved_a_step_is_taken_over_by_the_next(tmp_path, ledger):
    """SIGKILL a `maitre runs worker` after the resumed run saved a step (`running` in the store)
    and after a write of the next step ran: `--once` in another process takes the run over (the
    claim's owner is dead), the write replays instead of running twice, and the run finishes."""
    db = str(tmp_path / "maitre.db")
    hang = tmp_path / "hung"
    script = tmp_path / "stepping.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(AGENT_TESTS)!r})\n"
        "from pathlib import Path\n"
        "from agent.test_resume_worker import stepping_agent\n"
        "def make_agent(stores):\n"
        f"    hang = Path({str(hang)!r}).touch if os.environ.get('HANG') else None\n"
        f"    return stepping_agent(stores, ledger=Path({str(ledger)!r}), hang=hang)\n"
    )
    sys.path.insert(0, str(AGENT_TESTS))
    from agent.test_resume_worker import BOB, stepping_agent

    async def start() -> str:
        async with await open_stores(db) as stores:
            agent = stepping_agent(stores, ledger=ledger)
            run = await agent.run("please refund order A1042", ALICE)
            assert run.paused, run.final_text
            await agent.gate.approvals.approve(run.pending[0].approval_id, BOB)
            return run.id

    run_id = anyio.run(start)
    command = [*MAITRE, "runs", "worker", "--db", db, "--agent", f"{script}:make_agent", "--poll", "0.05"]
    first = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "HANG": "1"}
    )
    try:
        deadline = time.monotonic() + 30
        while first.poll() is None and time.monotonic() < deadline:
            if hang.exists() and noted(db):
                break  # hung in the slow lookup, and the note beside it ran and is recorded
            time.sleep(0.02)
        assert hang.exists(), first.stderr.read().decode() if first.poll() is not None else "no hang"
    finally:
        first.kill()
        first.communicate(timeout=30)
    assert status_of(db, run_id) == "running"
    assert ledger.read_text().splitlines() == ["A1042 1200.00", "note A1042"]

    done = worker(db, f"{script}:make_agent", "--once")
    assert done.returncode == 0, done.stderr
    assert f"{run_id}: finished" in done.stdout and "resumed 1 run" in done.stdout
    assert status_of(db, run_id) == "finished"
    assert ledger.read_text().splitlines() == ["A1042 1200.00", "note A1042"]  # each write ran once

    async def replayed() -> list[bool]:
        async with await open_stores(db) as stores:
            saved = await stores.runs.load(run_id)
            assert saved is not None
            events = Run.from_json(saved.state_json).events
            return [e["replayed"] for e in events if e["type"] == "tool_result" and e["name"] == "shop.note"]

    assert anyio.run(replayed) == [True]
