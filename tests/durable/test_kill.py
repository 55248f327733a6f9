"""Durable runs killed with SIGKILL at each point, in real processes, then recovered by a worker.

Each test starts a run in a process that SIGKILLs itself where `MAITRE_KILL` says (see
`kill_agent.py`), then runs `python -m maitre.durable worker --once`: under the dead process's
executor id (a restart: DBOS recovers its own workflows at launch) or under another id (the dead
executor is found by its lease and its workflows recovered through DBOS). Then:

- the ledger holds each side effect exactly once;
- the model log shows no recorded model call ran again (only the one killed mid-call, if any);
- the run ends with the answer an uninterrupted run gives;
- the audit chain verifies.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from maitre import Principal
from maitre.agent import Run
from maitre.audit import verify_store
from maitre.stores import open_stores

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kill_agent  # noqa: E402

ALICE = Principal(user="alice", tenant="acme")
MARIA = Principal(user="maria", tenant="acme")
PG = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
BOOK = "book and charge"


def _env(tmp: Path, kill: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MAITRE_LEDGER=str(tmp / "ledger"),
        MAITRE_MODEL_LOG=str(tmp / "models"),
        MAITRE_DURABLE_QUEUE_POLL_S="0.1",
    )
    env.pop("MAITRE_KILL", None)
    if kill:
        env["MAITRE_KILL"] = kill
    return env


def start(
    tmp: Path, db: str, system_db: str, kill: str | None, *, goal: str = BOOK, executor: str = "w1"
) -> int:
    command = [sys.executable, str(HERE / "driver.py"), "--db", db, "--system-db", system_db]
    command += ["--executor-id", executor, "--run-id", "r1", "--goal", goal]
    done = subprocess.run(command, env=_env(tmp, kill), capture_output=True, text=True, timeout=30)
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return done.returncode


def worker(tmp: Path, db: str, system_db: str, executor: str, kill: str | None = None) -> int:
    command = [
        sys.executable,
        "-m",
        "maitre.durable",
        "worker",
        "--once",
        "--db",
        db,
        "--system-db",
        system_db,
    ]
    command += [
        "--agent",
        f"{HERE / 'kill_agent.py'}:make_agent",
        "--executor-id",
        executor,
        "--timeout",
        "20",
    ]
    done = subprocess.run(command, env=_env(tmp, kill), capture_output=True, text=True, timeout=40)
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return done.returncode


def effects(tmp: Path) -> dict[str, int]:
    path = tmp / "ledger"
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        counts[line.split(" ")[0]] = counts.get(line.split(" ")[0], 0) + 1
    return counts


def model_calls(tmp: Path) -> int:
    path = tmp / "models"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _outcome(db: str) -> tuple[Run, bool]:
    async with await open_stores(db) as stores:
        saved = await stores.runs.load("r1")
        assert saved is not None
        report = await verify_store(stores.audit)
        return Run.from_json(saved.state_json), report.ok


def outcome(db: str) -> tuple[Run, bool]:
    return anyio.run(_outcome, db)


def uninterrupted(tmp: Path, goal: str = BOOK) -> tuple[str, int]:
    """(answer, model calls) of the same run, never killed and not durable."""
    base = tmp / "baseline"
    base.mkdir()
    previous = os.environ.get("MAITRE_LEDGER")
    os.environ["MAITRE_LEDGER"] = str(base / "ledger")

    async def go() -> tuple[str, int]:
        async with await open_stores(str(base / "m.db")) as stores:
            agent = kill_agent.make_agent(stores)
            run = await agent.run(goal, ALICE, run_id="r1")
            return run.final_text, run.steps

    try:
        return anyio.run(go)
    finally:
        if previous is None:
            os.environ.pop("MAITRE_LEDGER", None)
        else:
            os.environ["MAITRE_LEDGER"] = previous


@pytest.fixture
def sqlite(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "m.db"), f"sqlite:///{tmp_path / 'm.dbos.sqlite'}"


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def postgres() -> Iterator[tuple[str, str]]:
    """maitre's stores in a fresh schema of the test database; DBOS in a database of its own."""
    psycopg = pytest.importorskip("psycopg")
    try:
        _admin("SELECT 1")
    except psycopg.OperationalError:
        pytest.skip("no Postgres at " + PG)
    tag = secrets.token_hex(4)
    base = PG.rsplit("/", 1)[0]
    system_db = f"{base}/maitre_dbos_{tag}"
    yield f"{PG}?schema=kill_{tag}", system_db
    _admin(f"DROP SCHEMA IF EXISTS kill_{tag} CASCADE")
    _admin(f"DROP DATABASE IF EXISTS maitre_dbos_{tag} WITH (FORCE)")


CASES = [
    # (kill point, recovering executor, extra model calls: the one killed mid-call ran twice)
    pytest.param("model:2", "w1", 1, id="inside-model-call-restart"),
    pytest.param("before:book_flight", "w2", 0, id="inside-tool-before-effect-other-worker"),
    pytest.param("inside:book_flight", "w2", 0, id="inside-tool-after-effect-reconciled"),
    pytest.param("after:book_flight", "w1", 0, id="after-tool-before-step-recorded"),
]


@pytest.mark.parametrize(("kill", "recoverer", "extra"), CASES)
def test_killed_run_recovers_with_each_effect_once_and_the_same_answer(
    tmp_path: Path, sqlite: tuple[str, str], kill: str, recoverer: str, extra: int
) -> None:
    answer, steps = uninterrupted(tmp_path)
    db, system_db = sqlite
    assert start(tmp_path, db, system_db, kill) == -9
    run, _ = outcome(db)
    assert run.status == "running"  # left behind by the dead process
    worker(tmp_path, db, system_db, recoverer)
    run, intact = outcome(db)
    assert (run.status, run.final_text) == ("finished", answer)
    assert effects(tmp_path) == {"book_flight": 1, "charge_card": 1}
    assert model_calls(tmp_path) == steps + extra
    assert intact


def test_in_doubt_write_without_reconcile_stops_the_run_for_a_person(
    tmp_path: Path, sqlite: tuple[str, str]
) -> None:
    db, system_db = sqlite
    assert start(tmp_path, db, system_db, "inside:charge_card") == -9
    worker(tmp_path, db, system_db, "w2")
    run, intact = outcome(db)
    assert run.status == "stopped"
    assert "charge_card" in run.final_text and "person must check" in run.final_text
    assert any(e["type"] == "needs_human" and e["tool"] == "trip.charge_card" for e in run.events)
    assert effects(tmp_path) == {"book_flight": 1, "charge_card": 1}  # never charged twice
    assert model_calls(tmp_path) == 3  # the model never read the refusal and went on
    assert intact


def test_killed_while_paused_then_resumed_by_a_worker_after_approval(
    tmp_path: Path, sqlite: tuple[str, str]
) -> None:
    goal = "book and upgrade"
    answer, steps = uninterrupted_approved(tmp_path, goal)
    db, system_db = sqlite
    assert start(tmp_path, db, system_db, "paused", goal=goal) == -9
    run, _ = outcome(db)
    assert run.paused
    approve(db, run.pending[0].approval_id)
    worker(tmp_path, db, system_db, "w2")
    run, intact = outcome(db)
    assert (run.status, run.final_text) == ("finished", answer)
    assert effects(tmp_path) == {"book_flight": 1, "upgrade_seat": 1}
    assert model_calls(tmp_path) == steps
    assert intact


def test_killed_inside_the_approved_call_while_a_worker_resumes_it(
    tmp_path: Path, sqlite: tuple[str, str]
) -> None:
    db, system_db = sqlite
    goal = "book and upgrade"
    assert start(tmp_path, db, system_db, None, goal=goal) == 0
    run, _ = outcome(db)
    approve(db, run.pending[0].approval_id)
    assert worker(tmp_path, db, system_db, "w2", kill="inside:upgrade_seat") == -9
    worker(tmp_path, db, system_db, "w3")
    run, intact = outcome(db)
    assert effects(tmp_path) == {"book_flight": 1, "upgrade_seat": 1}
    assert run.status == "stopped" and "upgrade_seat" in run.final_text, run.final_text
    assert intact


def approve(db: str, approval_id: str) -> None:
    async def go() -> None:
        async with await open_stores(db) as stores:
            agent = kill_agent.make_agent(stores)
            await agent.gate.approvals.approve(approval_id, MARIA)

    anyio.run(go)


def uninterrupted_approved(tmp: Path, goal: str) -> tuple[str, int]:
    base = tmp / "baseline"
    base.mkdir()
    os.environ["MAITRE_LEDGER"] = str(base / "ledger")

    async def go() -> tuple[str, int]:
        async with await open_stores(str(base / "m.db")) as stores:
            agent = kill_agent.make_agent(stores)
            run = await agent.run(goal, ALICE, run_id="r1")
            await agent.gate.approvals.approve(run.pending[0].approval_id, MARIA)
            run = await agent.resume("r1")
            return run.final_text, run.steps

    try:
        return anyio.run(go)
    finally:
        os.environ.pop("MAITRE_LEDGER", None)


@pytest.mark.parametrize(("kill", "recoverer"), [("inside:book_flight", "w2"), ("model:3", "w1")])
def test_postgres_killed_run_recovers_once(
    tmp_path: Path, postgres: tuple[str, str], kill: str, recoverer: str
) -> None:
    answer, _ = uninterrupted(tmp_path)
    db, system_db = postgres
    assert start(tmp_path, db, system_db, kill) == -9
    worker(tmp_path, db, system_db, recoverer)
    run, intact = outcome(db)
    assert (run.status, run.final_text) == ("finished", answer)
    assert effects(tmp_path) == {"book_flight": 1, "charge_card": 1}
    assert intact


def test_maitre_audit_verify_passes_after_a_recovered_kill(tmp_path: Path, sqlite: tuple[str, str]) -> None:
    db, system_db = sqlite
    assert start(tmp_path, db, system_db, "inside:book_flight") == -9
    worker(tmp_path, db, system_db, "w2")
    done = subprocess.run(
        [sys.executable, "-m", "maitre.cli", "audit", "verify", "--db", db],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "audit chain intact" in done.stdout
