"""Durable runs killed with SIGKILL at each point, in real processes, then recovered by workers.

Each run starts in a process of its own, as executor `e<N>`, which SIGKILLs itself where
`MAITRE_KILL` says (see `kill_agent.py`). Then `python -m maitre.durable worker --once` runs as
executor `e0`'s restart: DBOS recovers `e0`'s own workflows at launch, and every other dead
executor is found by its lease (the gate's dead-owner rule) and its workflows recovered through
DBOS. For every run:

- the ledger holds each side effect exactly once;
- the model log shows that no recorded model call ran again (only the one killed mid-call);
- the run ends with the answer an uninterrupted run gives (or stops for a person when a write is
  in doubt and its tool has no reconcile hook - never as a refusal the model reads past);
- the audit chain verifies (`maitre audit verify`).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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


def start(tmp: Path, db: str, system_db: str, run_id: str, goal: str, kill: str | None, executor: str) -> int:
    command = [sys.executable, str(HERE / "driver.py"), "--db", db, "--system-db", system_db]
    command += ["--executor-id", executor, "--run-id", run_id, "--goal", goal]
    done = subprocess.run(command, env=_env(tmp, kill), capture_output=True, text=True, timeout=40)
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
        "30",
    ]
    done = subprocess.run(command, env=_env(tmp, kill), capture_output=True, text=True, timeout=50)
    assert done.returncode in (0, -9), done.stderr[-3000:]
    return done.returncode


def effects(tmp: Path, run_id: str) -> dict[str, int]:
    path = tmp / "ledger"
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        tool, _, of_run = line.split(" ")[:3]
        if of_run == run_id:
            counts[tool] = counts.get(tool, 0) + 1
    return counts


def model_calls(tmp: Path, goal: str) -> int:
    path = tmp / "models"
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(1 for line in lines if line.split(" ", 2)[2] == goal)


async def _outcomes(db: str, run_ids: list[str], saved_only: bool) -> tuple[dict[str, Run], bool]:
    async with await open_stores(db) as stores:
        runs: dict[str, Run] = {}
        for run_id in run_ids:
            saved = await stores.runs.load(run_id)
            assert saved is not None or saved_only, run_id
            if saved is not None:
                runs[run_id] = Run.from_json(saved.state_json)
        return runs, (await verify_store(stores.audit)).ok


def outcomes(db: str, run_ids: list[str], *, saved_only: bool = False) -> tuple[dict[str, Run], bool]:
    """The runs as saved, and whether the audit chain verifies (`saved_only`: skip unsaved runs)."""
    return anyio.run(_outcomes, db, run_ids, saved_only)


def approve(db: str, approval_id: str) -> None:
    async def go() -> None:
        async with await open_stores(db) as stores:
            await kill_agent.make_agent(stores).gate.approvals.approve(approval_id, MARIA)

    anyio.run(go)


def uninterrupted(tmp: Path, run_id: str, goal: str) -> tuple[str, int]:
    """(answer, model calls) of the same run, never killed and not durable (approved if it asks)."""
    base = tmp / f"baseline-{run_id}"
    base.mkdir()
    os.environ["MAITRE_LEDGER"] = str(base / "ledger")

    async def go() -> tuple[str, int]:
        async with await open_stores(str(base / "m.db")) as stores:
            agent = kill_agent.make_agent(stores)
            run = await agent.run(goal, ALICE, run_id=run_id)
            if run.paused:
                await agent.gate.approvals.approve(run.pending[0].approval_id, MARIA)
                run = await agent.resume(run_id)
            return run.final_text, run.steps

    try:
        return anyio.run(go)
    finally:
        os.environ.pop("MAITRE_LEDGER", None)


def _side_by_side(jobs: list[tuple[str, str, str | None, str]], tmp: Path, db: str, system_db: str) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = list(pool.map(lambda job: start(tmp, db, system_db, *job), jobs))
    for (run_id, _, kill, _), code in zip(jobs, codes, strict=True):
        assert code == (-9 if kill else 0), run_id


# run id: (goal, kill point in the first process, extra model calls; the one killed mid-call ran twice)
RECOVERS = {
    "model": ("book and charge #1", "model:2", 1),  # inside a model call (restarts as its executor)
    "before": ("book and charge #2", "before:book_flight", 0),  # in the tool, before its effect
    "inside": ("book and charge #3", "inside:book_flight", 0),  # after its effect: reconcile finds it
    "after": ("book and charge #4", "after:book_flight", 0),  # gate done, step not yet recorded
    "together": ("book and charge together #6", "inside:book_flight", 0),  # 2nd of two calls in a step
}


def test_sqlite_kills_at_each_point_recover_with_each_effect_once(tmp_path: Path) -> None:
    db, system_db = str(tmp_path / "m.db"), f"sqlite:///{tmp_path / 'm.dbos.sqlite'}"
    expected = {run_id: uninterrupted(tmp_path, run_id, goal) for run_id, (goal, _, _) in RECOVERS.items()}
    upgrade = {
        run_id: uninterrupted(tmp_path, run_id, f"book and upgrade #{run_id}") for run_id in ("paused",)
    }
    jobs: list[tuple[str, str, str | None, str]] = [
        (run_id, goal, kill, f"e{index}") for index, (run_id, (goal, kill, _)) in enumerate(RECOVERS.items())
    ]
    jobs.append(("person", "book and charge #5", "inside:charge_card", "e5"))  # in doubt, no reconcile
    jobs.append(("paused", "book and upgrade #paused", "paused", "e6"))  # killed while paused
    jobs.append(("approved", "book and upgrade #approved", None, "e7"))  # paused; its resume is killed
    _side_by_side(jobs, tmp_path, db, system_db)

    left, _ = outcomes(db, [job[0] for job in jobs], saved_only=True)
    assert {run_id: str(run.status) for run_id, run in left.items()} == {
        **{run_id: "running" for run_id in RECOVERS if run_id != "together"},  # killed in its 1st step
        "person": "running",
        "paused": "paused",
        "approved": "paused",
    }
    approve(db, left["paused"].pending[0].approval_id)
    worker(tmp_path, db, system_db, "e0")  # e0's restart; recovers e1..e5, resumes the decided run

    runs, intact = outcomes(db, [job[0] for job in jobs])
    for run_id, (goal, _, extra) in RECOVERS.items():
        answer, steps = expected[run_id]
        assert (runs[run_id].status, runs[run_id].final_text) == ("finished", answer), run_id
        assert effects(tmp_path, run_id) == {"book_flight": 1, "charge_card": 1}, run_id
        assert model_calls(tmp_path, goal) == steps + extra, run_id  # no recorded model call ran again
    person = runs["person"]
    assert (
        person.status == "stopped"
        and person.stop_reason == "needs_human"
        and "person must check" in person.final_text
    )
    assert any(e["type"] == "needs_human" and e["tool"] == "trip.charge_card" for e in person.events)
    assert effects(tmp_path, "person") == {"book_flight": 1, "charge_card": 1}  # never charged twice
    assert model_calls(tmp_path, "book and charge #5") == 3  # the model never read a refusal and went on
    answer, steps = upgrade["paused"]
    assert (runs["paused"].status, runs["paused"].final_text) == ("finished", answer)
    assert effects(tmp_path, "paused") == {"book_flight": 1, "upgrade_seat": 1}
    assert model_calls(tmp_path, "book and upgrade #paused") == steps
    assert runs["approved"].paused
    assert intact

    # A worker killed inside the approved call it resumes; another worker recovers the resume.
    approve(db, runs["approved"].pending[0].approval_id)
    assert worker(tmp_path, db, system_db, "e8", kill="inside:upgrade_seat@approved") == -9
    worker(tmp_path, db, system_db, "e9")
    runs, intact = outcomes(db, ["approved"])
    approved = runs["approved"]
    assert effects(tmp_path, "approved") == {"book_flight": 1, "upgrade_seat": 1}
    # in doubt: the attempt that died had used the approval, and the tool has no reconcile hook
    assert approved.status == "stopped" and "upgrade_seat" in approved.final_text, approved.final_text
    assert intact
    done = subprocess.run(
        [sys.executable, "-m", "maitre.cli", "audit", "verify", "--db", db],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and "audit chain intact" in done.stdout, done.stdout + done.stderr


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
    yield f"{PG}?schema=kill_{tag}", f"{PG.rsplit('/', 1)[0]}/maitre_dbos_{tag}"
    _admin(f"DROP SCHEMA IF EXISTS kill_{tag} CASCADE")
    # Dropping a database waits for a checkpoint of the whole server (seconds on a busy one): let
    # it finish while the next tests run (a non-daemon thread: the test process waits for it).
    threading.Thread(target=_admin, args=(f"DROP DATABASE IF EXISTS maitre_dbos_{tag} WITH (FORCE)",)).start()


@pytest.mark.postgres
def test_postgres_kills_recovered_by_several_workers_at_once(
    tmp_path: Path, postgres: tuple[str, str]
) -> None:
    db, system_db = postgres
    cases = {
        "inside": ("book and charge #3", "inside:book_flight"),
        "model": ("book and charge #1", "model:3"),
    }
    expected = {run_id: uninterrupted(tmp_path, run_id, goal)[0] for run_id, (goal, _) in cases.items()}
    jobs = [(run_id, goal, kill, f"p{i}") for i, (run_id, (goal, kill)) in enumerate(cases.items())]
    _side_by_side(jobs, tmp_path, db, system_db)
    with ThreadPoolExecutor(max_workers=2) as pool:  # two workers notice the dead executors together
        list(pool.map(lambda executor: worker(tmp_path, db, system_db, executor), ["q1", "q2"]))
    runs, intact = outcomes(db, list(cases))
    for run_id in cases:
        assert (runs[run_id].status, runs[run_id].final_text) == ("finished", expected[run_id]), run_id
        assert effects(tmp_path, run_id) == {"book_flight": 1, "charge_card": 1}, run_id
    assert intact
