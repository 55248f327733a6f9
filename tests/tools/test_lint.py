"""`maitre tools lint` flags the seeds' anti-patterns, and a well-made toolbox passes."""

from pathlib import Path

from typer.testing import CliRunner

from maitre.cli import app
from maitre.tools.lint import lint_toolbox

BAD = '''
from maitre import Toolbox
box = Toolbox()

@box.tool
def order(customer: str, amount: float) -> str:
    """Handles orders."""
    return ""

@box.tool(effect="write")
def get_and_update_profile(user_id: str) -> str:
    """Get and update a profile. Use it when the user edits a profile. Do not use it to read."""
    return ""

@box.tool
def fetch_profile(user_id: str) -> str:
    """Get and update a profile. Use it when the user edits a profile. Do not use it to read."""
    return ""

@box.tool
def delete_note(note_id: str) -> str:
    """Delete a note. Use it when asked. Do not use it otherwise."""
    return ""
'''

GOOD = '''
from typing import Annotated
from pydantic import Field
from maitre import Toolbox
box = Toolbox()

@box.tool
def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
    """Look up one order by its id. Use it when the user asks about status or delivery date.
    Do not use it to search by customer name."""
    return ""
'''


def _codes(findings):
    return {(f.tool.split(" + ")[0], f.code) for f in findings}


def test_lint_flags_each_anti_pattern(tmp_path: Path):
    path = tmp_path / "bad_tools.py"
    path.write_text(BAD)
    from maitre.cli.loader import load_toolbox

    codes = _codes(lint_toolbox(load_toolbox(f"{path}:box")))
    assert ("order", "no-when-to-use") in codes
    assert ("order", "no-when-not-to-use") in codes
    assert ("order", "free-form-string") in codes
    assert ("order", "float-money") in codes
    assert ("order", "not-verb-first") in codes
    assert ("get_and_update_profile", "reads-and-writes") in codes
    assert ("get_and_update_profile", "overlapping-tools") in codes
    assert ("delete_note", "effect-mismatch") in codes


def test_cli_lint_exit_codes(tmp_path: Path):
    bad, good = tmp_path / "bad.py", tmp_path / "good.py"
    bad.write_text(BAD)
    good.write_text(GOOD)
    runner = CliRunner()
    result = runner.invoke(app, ["tools", "lint", f"{bad}:box", "--json"])
    assert result.exit_code == 1
    assert '"float-money"' in result.output
    result = runner.invoke(app, ["tools", "lint", f"{good}:box"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["tools", "lint", f"{good}:nope"])
    assert result.exit_code == 2


OPEN = '''
from typing import Annotated, Any
from pydantic import Field
from maitre import Toolbox
box = Toolbox()

@box.tool(effect="write")
def update_profile(
    user_id: Annotated[str, Field(pattern=r"^u[0-9]{3}$")], extra: dict, note: Any
) -> str:
    """Update a profile. Use it when the user edits a profile. Do not use it to read one."""
    return ""
'''


def test_lint_says_why_a_tool_is_not_openai_strict(tmp_path: Path):
    """An open object (a free dict) or an untyped value: the tool is exported strict: false, and why."""
    path = tmp_path / "open_tools.py"
    path.write_text(OPEN)
    from maitre.cli.loader import load_toolbox

    box = load_toolbox(f"{path}:box")
    findings = {f.code: f for f in lint_toolbox(box)}
    assert findings["open-object"].message == (
        "parameter `extra` is an open object: OpenAI strict mode needs every object closed; "
        "exported with strict: false"
    )
    assert findings["untyped-value"].message.startswith("parameter `note` accepts a value of any type")
    (definition,) = box.definitions("openai")
    assert "strict" not in definition["function"]


def test_a_closed_tool_has_no_strict_finding(tmp_path: Path):
    path = tmp_path / "good_tools.py"
    path.write_text(GOOD)
    from maitre.cli.loader import load_toolbox

    codes = {f.code for f in lint_toolbox(load_toolbox(f"{path}:box"))}
    assert not codes & {"open-object", "untyped-value"}
