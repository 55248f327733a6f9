"""`maitre redteam` on the command line: exit 0 when every threshold is met, 1 when one is missed, 2
for a usage error; the JSON and HTML reports it writes; the npm reference server as an outside peer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maitre.cli import app
from maitre.redteam.report import SCHEMA

from .servers import GOVERNED, ROOT, WEAK, everything_command, peer_env

GOVERNED_BOX = f"{GOVERNED}:box"
HINTS = ["--tenant", "acme", "--foreign-id", "ticket_id=T-2001", "--secret", "CANARY-GLOBEX-4417"]


def _run(*args: str):
    return CliRunner().invoke(app, ["redteam", *args], env={"COLUMNS": "120"})


def test_maitre_default_policy_meets_the_default_threshold(tmp_path: Path) -> None:
    report, page = tmp_path / "r.json", tmp_path / "r.html"
    result = _run(GOVERNED_BOX, *HINTS, "--json", str(report), "--html", str(page))
    assert result.exit_code == 0, result.output
    document = json.loads(report.read_text())
    assert document["schema"] == SCHEMA and document["run"]["kind"] == "toolbox"
    assert document["metrics"]["executed"] == 0 and document["metrics"]["leaked"] == 0
    assert [r["metric"] for r in document["thresholds"]] == ["executed", "leaked"]
    assert all(r["ok"] for r in document["thresholds"])
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_an_agent_factory_is_attacked_through_its_own_gate(tmp_path: Path) -> None:
    report = tmp_path / "agent.json"
    result = _run(f"{GOVERNED}:make_agent", *HINTS, "--plugin", "approval_bypass", "--json", str(report))
    assert result.exit_code == 0, result.output
    document = json.loads(report.read_text())
    assert document["run"]["kind"] == "agent"
    assert {c["id"].rsplit(":", 1)[1] for c in document["cases"]} >= {"forged", "replayed", "edited-approved"}


def test_the_permissive_gate_misses_it_and_exits_1(tmp_path: Path) -> None:
    result = _run(f"{GOVERNED}:permissive", *HINTS)
    assert result.exit_code == 1, result.output
    assert "excessive_scope/support.delete_ticket" in result.output
    # A threshold on what the permissive gate still blocks is met; one on what it lets through is not.
    kept = _run(f"{GOVERNED}:permissive", *HINTS, "--threshold", "malicious_parameters.executed=0")
    assert kept.exit_code == 0, kept.output
    missed = _run(
        f"{GOVERNED}:permissive", *HINTS, "--plugin", "excessive_scope", "--threshold", "blocked_rate>=1"
    )
    assert missed.exit_code == 1


def test_the_weak_server_on_stdio_exits_1_with_its_findings(tmp_path: Path) -> None:
    report = tmp_path / "weak.json"
    result = _run("--stdio", f"{sys.executable} {WEAK} --stdio", *HINTS, "--json", str(report))
    assert result.exit_code == 1
    document = json.loads(report.read_text())
    assert document["metrics"]["leaked"] >= 4 and document["metrics"]["executed"] >= 20
    assert document["run"]["measured_by"] == "the side channel and the replies"  # a temporary side channel


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "name one TARGET"),
        ((GOVERNED_BOX, "--stdio", "x"), "name one TARGET"),
        ((GOVERNED_BOX, "--plugin", "nope"), "no such plugin"),
        ((GOVERNED_BOX, "--threshold", "pass_rate=1"), "unknown metric"),
        ((GOVERNED_BOX, "--threshold", "executed"), "METRIC=VALUE"),
        ((GOVERNED_BOX, "--threshold", "cases=3"), "neither better high nor low"),
        ((GOVERNED_BOX, "--threshold", "nope.executed=0"), "no plugin"),
        ((GOVERNED_BOX, "--foreign-id", "T-2001"), "PARAM=ID"),
        ((f"{GOVERNED}:DOCS",), "is a str"),
        (("missing.py:box",), "no such file"),
        (("http://127.0.0.1:9/mcp",), "cannot list the tools"),  # nothing listens on the discard port
        (("--stdio", "false"), "cannot list the tools"),
        ((GOVERNED_BOX, "--bogus"), "No such option"),
        ((GOVERNED_BOX, "--stores", "x.db"), "--stores is for an MCP server"),
    ],
)
def test_usage_errors_exit_2(args: tuple[str, ...], says: str) -> None:
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_help_documents_the_exit_codes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "maitre.cli", "redteam", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"COLUMNS": "200", "PATH": ""},
        timeout=60,
    )
    text = " ".join(result.stdout.split())
    assert "Exit status: 0 every threshold met" in text and "1 a threshold missed, 2 a usage error" in text


@pytest.mark.skipif(
    everything_command() is None, reason="run `bash scripts/mcp_peers.sh` for server-everything"
)
def test_the_npm_reference_server_as_an_outside_peer(tmp_path: Path) -> None:
    report = tmp_path / "everything.json"
    command = everything_command()
    assert command is not None
    result = subprocess.run(
        [sys.executable, "-m", "maitre.cli", "redteam", "--stdio", command, "--json", str(report)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=peer_env(),
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    document = json.loads(report.read_text())
    assert "echo" in document["run"]["tools"] and document["run"]["kind"] == "mcp-stdio"
    assert not [p for p in document["plugins"] if p["note"].startswith("failed")]
    outcomes = {
        c["id"].rsplit(":", 1)[0] if c["plugin"] == "malicious_parameters" else c["id"]: c["outcome"]
        for c in document["cases"]
    }
    # What the reference server refuses (zod validation, unknown names) is blocked ...
    assert outcomes["unknown_tool/unlisted-name"] == "blocked"
    assert outcomes["malicious_parameters/wrong_type:get-sum.a"] == "blocked"
    # ... and what it lets through is found: a 300,000-character echo, a toggle that runs every time.
    assert outcomes["malicious_parameters/oversize:echo.message"] == "executed"
    assert outcomes["duplicate_writes/toggle-simulated-logging"] == "executed"
    assert result.returncode == 1
    # Its listing is clean: no poisoning, no shadowing, no rug pull, nothing asks for a token.
    for plugin in ("description_injection", "tool_poisoning", "shadowing", "rug_pull", "token_passthrough"):
        assert {c["outcome"] for c in document["cases"] if c["plugin"] == plugin} == {"blocked"}
