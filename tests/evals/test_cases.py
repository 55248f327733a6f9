"""Case files: seed 003's line loads as written; every mistake names its file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maitre.evals import CaseFileError, load_cases

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "evals"
SEED = {
    "input": "Check the status of ticket T-123456",
    "expected_tool": "get_ticket_status",
    "expected_arguments": {"ticket_id": "T-123456"},
    "forbidden_tools": ["create_ticket_draft"],
    "max_tool_calls": 1,
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_seed_003s_case_loads_as_the_seed_writes_it(tmp_path: Path) -> None:
    path = write(tmp_path, "cases.jsonl", "# a comment\n\n" + json.dumps(SEED) + "\n")
    [case] = load_cases(path)
    assert case.id == "cases.jsonl:3" and case.source.endswith("cases.jsonl:3")
    assert [(e.tool, e.arguments) for e in case.expected_calls] == [
        ("get_ticket_status", {"ticket_id": "T-123456"})
    ]
    assert case.minimum_calls == 1 and case.minimum_steps == 2


def test_the_examples_load(tmp_path: Path) -> None:
    assert len(load_cases(EXAMPLES / "cases.jsonl")) == 7
    status, callback = load_cases(EXAMPLES / "cases.yaml")
    assert status.source.endswith("cases.yaml:2") and callback.source.endswith("cases.yaml:8")
    assert callback.expected_calls[0].arguments == {"day": "2026-08-03"}  # a YAML date, as ISO text


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"input": "x", "expected_tool": "a"', ":2:"),
        ('{"input": "x", "expected_tools": ["a"], "surprise": 1}', "surprise"),
        ('{"input": ""}', "input"),
        ('{"input": "x", "expected_arguments": {"a": 1}}', "expected_arguments belongs with expected_tool"),
        ('{"input": "x", "expected_tool": "a", "expected_tools": []}', "not both"),
        (
            '{"input": "x", "expected_tool": "a", "expected_arguments": {"a": {"$between": [1, 2]}}}',
            "$between",
        ),
        ('{"input": "x", "expected_stop_reason": "finished"}', "not a stop reason"),
        ('{"input": "x", "max_tool_calls": -1}', "max_tool_calls"),
        ('{"input": "x", "constraints": {"t": {"a": {"$regex": "["}}}}', "does not compile"),
        ('["input"]', "a case is an object"),
    ],
)
def test_a_bad_line_is_refused_with_its_file_and_line(tmp_path: Path, line: str, fragment: str) -> None:
    path = write(tmp_path, "bad.jsonl", '{"input": "fine"}\n' + line + "\n")
    with pytest.raises(CaseFileError) as caught:
        load_cases(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2"), message
    assert fragment in message, message


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.jsonl", '{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n')
    with pytest.raises(CaseFileError, match=r"dup.jsonl:2: duplicate case id 'a' \(first at .*dup.jsonl:1\)"):
        load_cases(path)


def test_yaml_errors_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "- input: fine\n- input: [unclosed\n  expected_tool: a\n")
    with pytest.raises(CaseFileError, match=r"bad.yaml:\d+: not valid YAML"):
        load_cases(path)
    path = write(tmp_path, "wrong.yaml", "- input: fine\n- input: also fine\n  max_tool_calls: many\n")
    with pytest.raises(CaseFileError, match=r"wrong.yaml:2: max_tool_calls"):
        load_cases(path)


def test_files_that_are_not_case_files(tmp_path: Path) -> None:
    with pytest.raises(CaseFileError, match="no such case file"):
        load_cases(tmp_path / "missing.jsonl")
    with pytest.raises(CaseFileError, match="JSON Lines"):
        load_cases(write(tmp_path, "cases.csv", "input\nx\n"))
    with pytest.raises(CaseFileError, match="no cases"):
        load_cases(write(tmp_path, "empty.jsonl", "\n# nothing\n"))
    with pytest.raises(CaseFileError, match="list of cases"):
        load_cases(write(tmp_path, "map.yaml", "input: x\n"))
    with pytest.raises(CaseFileError, match="not UTF-8"):
        path = tmp_path / "latin.jsonl"
        path.write_bytes(b'{"input": "caf\xe9"}\n')
        load_cases(path)
