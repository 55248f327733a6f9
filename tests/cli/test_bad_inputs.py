"""Every bad input a person can type ends in a one-line message, never a traceback (issue 12, item 4).

Each case runs one command and checks three things: nothing escaped as an exception (no
"Traceback", no exception left on the runner), the exit code (2 for a usage error, 1 for a
failure), and that the message names the problem. Commands run in-process with typer's CliRunner;
the few that need a real process (a closed pipe, a hanging child) run as `python -m maitre.cli`.
Read-only commands are also checked to have created or changed nothing.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.cli import app
from maitre.stores import open_stores

BOX = '''
from maitre import Toolbox

box = Toolbox()
NOT_A_BOX = 42


@box.tool(effect="write", risk="high")
def refund(order_id: str, amount: int) -> str:
    """Refund an order. Use it only when the customer is owed money."""
    return "refunded"
'''


OWN_STORES = """
from maitre import Gate, Toolbox
from maitre.mcp.app import MCPApp
from maitre.stores import SQLiteStores

box = Toolbox()
app = MCPApp(box, gate=Gate(box, stores=SQLiteStores("own.db")))
"""


def seed(db: Path) -> str:
    """A real maitre database with one pending approval requested by alice; returns its id."""
    box = Toolbox()

    @box.tool(effect="write", risk="high")
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        return "refunded"

    async def main() -> str:
        async with await open_stores(str(db)) as stores:
            gate = Gate(box, stores=stores)
            result = await gate.call(
                ToolCall(id="c1", name="refund", arguments={"order_id": "A1", "amount": 5}),
                Principal(user="alice", tenant="acme"),
            )
            assert result.error is not None
            return str(result.error.details["approval_id"])

    return anyio.run(main)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The files the cases point at, in a folder that is also the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MAITRE_CONFIG", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ok = tmp_path / "ok.db"
    approval = seed(ok)
    data = ok.read_bytes()
    (tmp_path / "truncated.db").write_bytes(data[: len(data) // 2])
    (tmp_path / "corrupt.db").write_bytes(b"this is not a database\n" * 200)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE notes (body TEXT)")
    other.commit()
    other.close()
    (tmp_path / "folder").mkdir()
    (tmp_path / "box.py").write_text(BOX)
    (tmp_path / "raises.py").write_text("raise RuntimeError('boom while importing')\n")
    (tmp_path / "own.py").write_text(OWN_STORES)
    (tmp_path / "broken.json").write_text('{"version": 1, "servers": ')
    (tmp_path / "key.pem").write_text("-----BEGIN PUBLIC KEY-----\nnot really\n-----END PUBLIC KEY-----\n")
    with socket.socket() as busy:  # a port another process listens on
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield {"approval": approval, "busy": str(busy.getsockname()[1]), "py": sys.executable}


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    code: int
    says: str
    """A piece of the message that names the problem."""
    process: bool = False
    """Run as a real process (needed for pipes and child processes)."""


def case(*args: str, code: int, says: str, process: bool = False) -> Case:
    return Case(args, code, says, process)


CASES = {
    # databases: corrupt, truncated, a folder, missing, not maitre's, a server that is down
    "audit-verify-corrupt": case("audit", "verify", "--db", "corrupt.db", code=1, says="not a usable SQLite"),
    "audit-verify-truncated": case("audit", "verify", "--db", "truncated.db", code=1, says="malformed"),
    "audit-verify-folder": case("audit", "verify", "--db", "folder", code=2, says="is a folder"),
    "audit-verify-typo": case("audit", "verify", "--db", "typo.db", code=2, says="no maitre database at typo.db"),
    "audit-show-other": case("audit", "show", "--db", "other.db", code=2, says="not a maitre database"),
    "approvals-list-nodir": case("approvals", "list", "--db", "nodir/x.db", code=2, says="no maitre database"),
    "approvals-list-other": case("approvals", "list", "--db", "other.db", code=2, says="not a maitre database"),
    "approvals-list-corrupt": case("approvals", "list", "--stores", "corrupt.db", code=1, says="not a usable"),
    "approvals-list-postgres-down": case(
        "approvals", "list", "--db", "postgresql://127.0.0.1:1/test", code=1, says="PostgreSQL"
    ),
    "approvals-list-redis": case("approvals", "list", "--db", "redis://127.0.0.1", code=2, says="rate limits"),
    "approvals-list-memory": case("approvals", "list", "--db", "memory://", code=2, says="keeps nothing"),
    "approvals-list-no-store": case("approvals", "list", code=2, says="no store given"),
    "runs-list-typo": case("runs", "list", "--db", "typo.db", code=2, says="no maitre database"),
    "runs-show-missing": case("runs", "show", "run_x", "--db", "ok.db", code=2, says="no run run_x"),
    # values a command refuses
    "approvals-list-status": case("approvals", "list", "--db", "ok.db", "--status", "bogus", code=2, says="bogus"),
    "runs-list-status": case("runs", "list", "--db", "ok.db", "--status", "bogus", code=2, says="bogus"),
    "runs-list-limit": case("runs", "list", "--db", "ok.db", "--limit", "0", code=2, says="--limit"),
    "audit-show-limit": case("audit", "show", "--db", "ok.db", "--limit", "-3", code=2, says="--limit"),
    "audit-verify-anchor": case("audit", "verify", "--db", "ok.db", "--anchor", "nonsense", code=2, says="SEQ:HASH"),
    "approve-unknown-id": case("approvals", "approve", "apr_nope", "--db", "ok.db", code=2, says="no approval request apr_nope"),
    "approve-self": case(
        "approvals", "approve", "{approval}", "--db", "ok.db", "--approver", "alice", code=1, says="self-approval"
    ),
    "approve-bad-edit": case(
        "approvals", "approve", "{approval}", "--db", "ok.db", "--edit", "{nope", "--tools", "box.py:box",
        code=2, says="not JSON",
    ),
    "approve-edit-without-tools": case(
        "approvals", "approve", "{approval}", "--db", "ok.db", "--edit", "{}", code=2, says="--tools"
    ),
    "deny-without-message": case("approvals", "deny", "{approval}", "--db", "ok.db", code=2, says="--message"),
    "tools-show-format": case("tools", "show", "box.py:box", "--format", "gemini", code=2, says="gemini"),
    "tools-show-missing-file": case("tools", "show", "nothing.py:box", code=2, says="no such file: nothing.py"),
    "tools-show-not-a-toolbox": case("tools", "show", "box.py:NOT_A_BOX", code=2, says="is a int, not a Toolbox"),
    "tools-show-no-attribute": case("tools", "show", "box.py:boxx", code=2, says="has no attribute 'boxx'"),
    "tools-show-raises": case("tools", "show", "raises.py:box", code=1, says="MAITRE_DEBUG=1"),
    "tools-lint-bad-spec": case("tools", "lint", "box", code=2, says="MODULE_OR_FILE:ATTR"),
    "tools-cost-formats": case("tools", "cost", "box.py:box", "--formats", "gemini", code=2, says="gemini"),
    "tools-cost-negative": case("tools", "cost", "box.py:box", "--calls-per-task", "-1", code=2, says="--calls-per-task"),
    # serve: every mistake is refused before anything is served
    "serve-port": case("serve", "box.py:box", "--transport", "http", "--port", "99999", code=2, says="--port"),
    "serve-path": case("serve", "box.py:box", "--transport", "http", "--path", "mcp", code=2, says="--path must start"),
    "serve-transport": case("serve", "box.py:box", "--transport", "carrier-pigeon", code=2, says="--transport"),
    "serve-key-file": case(
        "serve", "box.py:box", "--transport", "http", "--jwt-issuer", "https://id", "--jwt-audience", "me",
        "--jwt-key-file", "missing.pem", code=2, says="missing.pem",
    ),
    "serve-algorithm": case(
        "serve", "box.py:box", "--transport", "http", "--jwt-issuer", "https://id", "--jwt-audience", "me",
        "--jwt-key-file", "key.pem", "--jwt-algorithm", "RS999", code=2, says="RS999",
    ),
    "serve-jwt-over-stdio": case("serve", "box.py:box", "--jwt-issuer", "https://id", code=2, says="--transport http"),
    "serve-issuer-alone": case("serve", "box.py:box", "--transport", "http", "--jwt-issuer", "https://id", code=2, says="--jwt-audience"),
    "serve-jwks-http": case(
        "serve", "box.py:box", "--transport", "http", "--jwt-issuer", "https://id", "--jwt-audience", "me",
        "--jwt-jwks-url", "http://id.example.com/jwks", code=2, says="https://",
    ),
    "serve-stores-folder": case("serve", "box.py:box", "--transport", "http", "--stores", "folder", code=2, says="is a folder"),
    "serve-stores-corrupt": case("serve", "box.py:box", "--transport", "http", "--stores", "corrupt.db", code=1, says="not a SQLite database"),
    "serve-rate-limits": case("serve", "box.py:box", "--rate-limits", "x.db", code=2, says="redis://"),
    "serve-audience-alone": case(
        "serve", "box.py:box", "--transport", "http", "--jwt-audience", "me", code=2, says="--jwt-issuer"
    ),
    "serve-stores-redis": case("serve", "box.py:box", "--stores", "redis://127.0.0.1", code=2, says="rate limits"),
    "serve-stores-postgres-down": case(
        "serve", "box.py:box", "--transport", "http", "--stores", "postgresql://127.0.0.1:1/test", code=1,
        says="cannot open the stores",
    ),
    "serve-port-in-use": case("serve", "box.py:box", "--transport", "http", "--port", "{busy}", code=1, says="cannot listen"),
    "serve-no-target": case("serve", code=2, says="give TARGET"),
    "serve-own-stores": case("serve", "own.py:app", "--stores", "x.db", code=2, says="already has its own stores"),
    "serve-missing-target": case("serve", "nothing.py:box", code=2, says="no such file: nothing.py"),
    # mcp: unreachable, not MCP, silent, broken lockfile, refused address, nothing to talk to
    "mcp-scan-unreachable": case("mcp", "scan", "http://127.0.0.1:1/mcp", "--allow-loopback", code=1, says="cannot connect"),
    "mcp-pin-unreachable": case(
        "mcp", "pin", "http://127.0.0.1:1/mcp", "--namespace", "x", "--allow-loopback", "--lockfile", "lock.json",
        code=1, says="cannot connect",
    ),
    "mcp-scan-not-mcp": case(
        "mcp", "scan", "{py} -c pass", code=1, says="did not answer as an MCP server", process=True
    ),
    "mcp-scan-no-command": case("mcp", "scan", "no-such-command-xyz", code=1, says="no such command", process=True),
    "mcp-scan-silent": case(
        "mcp", "scan", "{py} -c 'import time; time.sleep(60)'", "--timeout", "1", code=1, says="within 1 s",
        process=True,
    ),
    "mcp-scan-private": case("mcp", "scan", "http://10.1.2.3/mcp", code=2, says="10.1.2.3"),
    "mcp-check-broken-lockfile": case(
        "mcp", "check", "http://127.0.0.1:1/mcp", "--namespace", "x", "--lockfile", "broken.json",
        code=2, says="broken.json",
    ),
    "mcp-scan-nothing": case("mcp", "scan", code=2, says="mcp.upstreams"),
    "mcp-scan-bad-header": case("mcp", "scan", "http://127.0.0.1:1/mcp", "--header", "nocolon", code=2, says="Name: value"),
    # memory, runs, demo, the root
    "memory-export-missing-folder": case(
        "memory", "export", "--user", "u", "--db", "ok.db", "-o", "/nonexistent/dir/x.json", code=2,
        says="/nonexistent/dir does not exist",
    ),
    "memory-show-missing": case("memory", "show", "--user", "u", "--db", "missing.db", code=2, says="No memory database"),
    "memory-show-folder": case("memory", "show", "--user", "u", "--db", "folder", code=2, says="folder"),
    "memory-show-gate-db": case("memory", "show", "--user", "u", "--db", "ok.db", code=2, says="without long-term memory"),
    "memory-export-other": case("memory", "export", "--user", "u", "--db", "other.db", code=2, says="not a maitre database"),
    "memory-correct-corrupt": case(
        "memory", "correct", "--user", "u", "--db", "corrupt.db", "--key", "city", "--value", "Pune", code=1,
        says="not a usable SQLite",
    ),
    "runs-resume-missing-agent": case(
        "runs", "resume", "run_x", "--db", "ok.db", "--agent", "missing.py:make", code=2, says="no such file: missing.py"
    ),
    "runs-resume-not-an-agent": case(
        "runs", "resume", "run_x", "--db", "ok.db", "--agent", "box.py:box", code=2, says="is a Toolbox"
    ),
    "demo-anthropic-no-key": case("demo", "--model", "anthropic", code=1, says="ANTHROPIC_API_KEY"),
    "demo-openai-no-key": case("demo", "--model", "openai", code=1, says="OPENAI_API_KEY"),
    "demo-unknown-model": case("demo", "--model", "gpt-banana", code=2, says="unknown model"),
    "config-missing": case("--config", "missing.toml", "config", "show", code=2, says="missing.toml"),
    "unknown-command": case("frobnicate", code=2, says="frobnicate"),
}  # fmt: skip


def _tables(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return sorted(row[0] for row in con.execute("SELECT name FROM sqlite_master"))


def _fill(arg: str, world: dict[str, str]) -> str:
    for key, value in world.items():
        arg = arg.replace("{" + key + "}", value)
    return arg


def _run(args: list[str], process: bool) -> tuple[int, str, str]:
    if process:
        done = subprocess.run(
            [sys.executable, "-m", "maitre.cli", *args], capture_output=True, text=True, timeout=120
        )
        return done.returncode, done.stdout, done.stderr
    result = CliRunner().invoke(app, args)
    escaped = result.exception if not isinstance(result.exception, SystemExit) else None
    assert escaped is None, f"{type(escaped).__name__} escaped: {escaped!r}"
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_input_is_one_line_and_the_right_exit_code(name: str, world: dict[str, str], tmp_path: Path):
    spec = CASES[name]
    args = [_fill(arg, world) for arg in spec.args]
    before = sorted(p.name for p in tmp_path.iterdir())
    other = (tmp_path / "other.db").read_bytes()
    ours = _tables(tmp_path / "ok.db")
    code, out, err = _run(args, spec.process)
    both = out + err
    assert "Traceback" not in both, both
    assert code == spec.code, (code, both)
    assert spec.says in " ".join(both.split()), both
    if name.startswith("serve"):
        assert "serving " not in both  # nothing is announced before everything checked out
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1 and all(len(e) > 10 for e in errors), err
    if name.startswith(("audit", "approvals", "runs", "approve", "deny", "memory")):
        # a command that reads a store created nothing and changed no foreign database
        assert sorted(p.name for p in tmp_path.iterdir()) == before
        assert (tmp_path / "other.db").read_bytes() == other
        assert _tables(tmp_path / "ok.db") == ours  # no memory tables added to the gate's file


def test_a_closed_pipe_ends_the_demo_quietly(world: dict[str, str]):
    """`maitre demo --json | head -1`: the reader leaves; no traceback, no 'Exception ignored'."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "maitre.cli", "demo", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.startswith(b'{"type": "chapter"')
    assert err == "", err
    assert code == 1  # as Python, click and rich do on EPIPE: the output is incomplete


def test_version_and_help_exit_zero(world: dict[str, str]):
    runner = CliRunner()
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.stdout.startswith("maitre ")
    assert runner.invoke(app, ["--help"]).exit_code == 0


def test_a_read_only_command_never_creates_a_database_or_its_folder(world: dict[str, str], tmp_path: Path):
    runner = CliRunner()
    for args in (
        ["audit", "verify", "--db", "typo.db"],
        ["approvals", "list", "--db", "nodir/x.db"],
        ["runs", "list", "--db", "sqlite:///" + str(tmp_path / "deep" / "x.db")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "intact" not in result.output
    assert not (tmp_path / "typo.db").exists()
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "deep").exists()
    tables = sqlite3.connect(tmp_path / "other.db").execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("notes",)]


def test_unexpected_errors_show_the_traceback_with_maitre_debug(world: dict[str, str]):
    quiet = subprocess.run(
        [sys.executable, "-m", "maitre.cli", "tools", "show", "raises.py:box"], capture_output=True, text=True
    )
    assert quiet.returncode == 1 and "Traceback" not in quiet.stderr
    assert "boom while importing" in quiet.stderr
    loud = subprocess.run(
        [sys.executable, "-m", "maitre.cli", "tools", "show", "raises.py:box"],
        capture_output=True,
        text=True,
        env={**os.environ, "MAITRE_DEBUG": "1"},
    )
    assert "Traceback" in loud.stderr and "boom while importing" in loud.stderr


PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.mark.postgres
def test_a_postgres_schema_without_maitre_is_refused_and_not_created(world: dict[str, str]):
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(PG_DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {PG_DSN} is not reachable: {exc}")
    schema = f"maitre_typo_{os.getpid()}"
    result = CliRunner().invoke(app, ["audit", "verify", "--db", f"{PG_DSN}?schema={schema}"])
    assert result.exit_code == 2 and "no maitre stores in schema" in result.stderr, result.output
    with psycopg.connect(PG_DSN) as con:
        found = con.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert found is None  # looking did not create it

    async def create() -> None:
        async with await open_stores(f"{PG_DSN}?schema={schema}"):
            pass

    anyio.run(create)
    try:
        listed = CliRunner().invoke(app, ["approvals", "list", "--db", f"{PG_DSN}?schema={schema}", "--json"])
        assert listed.exit_code == 0 and listed.stdout.strip() == "[]", listed.output
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as con:
            con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
