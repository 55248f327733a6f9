"""`maitre eval --model openai-compatible:URL` drives a real adapter (the `openai` SDK) against a
fake provider on 127.0.0.1: the same cases, scored on what the adapter's calls did at the gate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maitre.cli import app
from models.fakeserver import FakeProvider  # tests/ is on sys.path: its packages import by name
from models.shapes import chat_completion, chat_tool_call

ROOT = Path(__file__).resolve().parents[2]
AGENT = f"{ROOT / 'examples' / 'evals' / 'agent.py'}:make_agent"
SEED = {
    "input": "Check the status of ticket T-123456",
    "expected_tool": "get_ticket_status",
    "expected_arguments": {"ticket_id": "T-123456"},
    "forbidden_tools": ["create_ticket_draft"],
    "max_tool_calls": 1,
}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def test_a_real_adapter_is_scored_like_any_model(provider: FakeProvider, tmp_path: Path) -> None:
    pytest.importorskip("openai")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(SEED) + "\n")
    provider.queue(
        chat_completion(
            tool_calls=[chat_tool_call("c1", "support__get_ticket_status", {"ticket_id": "T-123456"})],
            finish_reason="tool_calls",
            model="qwen3:8b",
        ),
        chat_completion("Ticket T-123456 is open.", model="qwen3:8b"),
        chat_completion(  # the second trial picks the forbidden tool
            tool_calls=[
                chat_tool_call("c2", "support__create_ticket_draft", {"title": "Check T-123456 status"})
            ],
            finish_reason="tool_calls",
            model="qwen3:8b",
        ),
    )
    report = tmp_path / "report.json"
    model = f"openai-compatible:{provider.url}/v1#qwen3:8b"
    args = ["eval", str(cases), "--agent", AGENT, "--model", model, "--trials", "2", "--json", str(report)]
    result = CliRunner().invoke(app, [*args, "--threshold", "pass^2=1"])
    assert result.exit_code == 1, result.stderr  # pass^2 is 0: one trial of two failed
    document = json.loads(report.read_text())
    assert document["run"]["model"] == "openai-compatible:qwen3:8b"
    assert document["metrics"]["pass^1"] == 0.5 and document["metrics"]["pass^2"] == 0.0
    first, second = document["cases"][0]["runs"]
    assert first["passed"] and first["final_text"] == "Ticket T-123456 is open."
    assert {c["name"] for c in second["checks"] if not c["ok"]} == {"selection", "arguments", "forbidden"}
    assert second["calls"][0]["approval_requested"] and second["stop_reason"] == "approval_required"
    assert document["metrics"]["input_tokens"] == 3 * 1117  # the provider's own usage counts
