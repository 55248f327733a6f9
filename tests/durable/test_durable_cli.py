"""`maitre runs worker --durable`: the CLI door to the durable worker (`python -m maitre.durable worker`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _maitre(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAITRE_DURABLE_QUEUE_POLL_S": "0.1", "MAITRE_LEDGER": str(cwd / "ledger")}
    command = [sys.executable, "-m", "maitre.cli", "runs", "worker", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_durable_worker_pass_from_the_cli_takes_its_lease_and_reports_what_it_recovered(
    tmp_path: Path,
) -> None:
    db = tmp_path / "maitre.db"
    agent = f"{HERE / 'kill_agent.py'}:make_agent"
    done = _maitre(
        "--durable", "--once", "--executor-id", "cli-1", "--db", str(db), "--agent", agent, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "recovered 0 workflows, resumed 0 runs, waited for 0" in done.stdout
    assert (tmp_path / "maitre.dbos.sqlite").exists() or any(tmp_path.glob("*dbos*")), list(
        tmp_path.iterdir()
    )


def test_the_durable_options_are_refused_where_they_mean_nothing(tmp_path: Path) -> None:
    agent = f"{HERE / 'kill_agent.py'}:make_agent"
    db = str(tmp_path / "maitre.db")
    no_id = _maitre("--durable", "--once", "--db", db, "--agent", agent, cwd=tmp_path)
    assert no_id.returncode == 2 and "--executor-id" in no_id.stderr
    not_durable = _maitre("--once", "--executor-id", "x", "--db", db, "--agent", agent, cwd=tmp_path)
    assert not_durable.returncode == 2 and "need --durable" in not_durable.stderr
