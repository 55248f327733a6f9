"""`maitre demo` tells its story through the real gate, as text and as JSON Lines."""

import json

from typer.testing import CliRunner

from maitre.cli import app


def test_demo_json_lines_show_each_guard():
    result = CliRunner().invoke(app, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    codes = [e["error_code"] for e in events if e["type"] == "tool_result"]
    assert codes[0] is None
    assert "INVALID_ARGUMENTS" in codes and "TIMEOUT" in codes and "LOOP_DETECTED" in codes
    assert any(e.get("handle") for e in events if e["type"] == "tool_result")
    assert events[-1]["type"] == "run_finished"


def test_demo_renders_for_people():
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0
    assert "LOOP_DETECTED" in result.output and "TIMEOUT" in result.output
