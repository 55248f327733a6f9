"""A process killed with SIGKILL inside a write tool: on retry the side effect has run at most once."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from maitre.cli import app

WORKER = Path(__file__).with_name("crash_worker.py")


def run_worker(db: Path, ledger: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(db), str(ledger), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkill_inside_a_write_tool_never_leads_to_a_second_execution(tmp_path: Path):
    db, ledger = tmp_path / "maitre.db", tmp_path / "ledger.txt"
    victim = run_worker(db, ledger, "hang")
    assert victim.stdout.readline().strip() == "IN_TOOL"
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    assert ledger.read_text().splitlines() == ["ORD-1"]

    retry = run_worker(db, ledger, "normal")
    out, err = retry.communicate(timeout=60)
    assert retry.returncode == 0, err
    outcome = json.loads(out.strip().splitlines()[-1])
    assert outcome["code"] in ("CONFLICT", "INVALID_STATE")  # in flight (lease) or uncertain: never re-run
    assert ledger.read_text().splitlines() == ["ORD-1"]

    verified = CliRunner().invoke(app, ["audit", "verify", "--db", str(db)])
    assert verified.exit_code == 0, verified.output
