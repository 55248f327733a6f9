"""Seed 000's arithmetic with measured token counts, in the library and on the command line."""

import json
import textwrap

import pytest
from typer.testing import CliRunner

from maitre import Toolbox, UserError
from maitre.cli.tools_cost import app, default_core, load_target
from maitre.search import estimate_tool_costs, search_tool_tokens

TOOLS_FILE = textwrap.dedent(
    '''
    """200 endpoint-shaped tools, as in seed 000's company that wrapped every API endpoint."""
    from typing import Annotated
    from pydantic import Field
    from maitre import Toolbox

    RESOURCES = ["order", "invoice", "customer", "shipment", "ticket", "product", "refund", "coupon",
                 "warehouse", "supplier"]
    VERBS = ["get", "list", "create", "update", "delete", "archive", "restore", "export", "import", "audit",
             "search", "tag", "approve", "reject", "assign", "close", "reopen", "merge", "split", "count"]

    box = Toolbox()
    for resource in RESOURCES:
        for verb in VERBS:
            def endpoint(
                resource_id: Annotated[str, Field(max_length=40, description=f"The {resource} id, e.g. X-1042")],
                note: Annotated[str, Field(max_length=200, description="Why, in a few words")] = "",
            ) -> str:
                return resource_id
            box.add_tool(
                endpoint,
                name=f"{verb}_{resource}",
                description=(
                    f"{verb.capitalize()} one {resource} by its id. Use it when the user asks to {verb} a "
                    f"{resource}. Do not use it for other kinds of records."
                ),
            )
    '''
)


@pytest.fixture
def tools_file(tmp_path):
    path = tmp_path / "endpoints.py"
    path.write_text(TOOLS_FILE)
    return path


def test_two_hundred_tools_cost_what_seed_000_says_and_core_plus_search_saves_about_94_percent(tools_file):
    box = load_target(f"{tools_file}:box")
    assert isinstance(box, Toolbox) and len(box) == 200
    core = default_core(box)
    assert core == box.names()[:5]
    (report,) = estimate_tool_costs(box, core=core, formats=["anthropic"])
    per_tool = box.definitions("anthropic").tokens
    assert report.all_tokens == sum(per_tool.values())
    assert report.core_tokens == sum(per_tool[n] for n in core)
    assert report.search_tokens == search_tool_tokens("anthropic") > 50
    all_loaded, on_demand, plus_one = report.scenarios
    assert all_loaded.tokens_per_day == report.all_tokens * 12 * 10_000
    assert all_loaded.usd_per_day == pytest.approx(all_loaded.tokens_per_day / 1e6)
    assert on_demand.tokens_per_call == report.core_tokens + report.search_tokens + report.revealed_tokens
    assert plus_one.calls_per_task == 13 and plus_one.tokens_per_call == on_demand.tokens_per_call
    assert 0.90 < plus_one.saving < on_demand.saving < 0.97  # seed 000: 94.5% and 94%


def test_every_provider_format_is_measured_separately(tools_file):
    box = load_target(f"{tools_file}:box")
    reports = estimate_tool_costs(box, core=["get_order"], revealed=3, formats=["anthropic", "openai", "mcp"])
    assert [r.format for r in reports] == ["anthropic", "openai", "mcp"]
    assert len({r.all_tokens for r in reports}) == 3  # the wrappers differ, so do the counts
    assert all(r.core == ["get_order"] and r.revealed == 3 for r in reports)


def test_unknown_core_tools_and_bad_numbers_are_refused(tools_file):
    box = load_target(f"{tools_file}:box")
    with pytest.raises(UserError):
        estimate_tool_costs(box, core=["nope"])
    with pytest.raises(UserError):
        estimate_tool_costs(box, core=[], calls_per_task=0)
    with pytest.raises(UserError):
        load_target("maitre.search:ToolIndex")  # not a Toolbox


def test_the_cost_command_prints_the_table_and_json(tools_file):
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            f"{tools_file}:box",
            "--calls-per-task",
            "12",
            "--tasks-per-day",
            "10000",
            "--price-per-mtok",
            "1.0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "200 tools" in result.output and "all 200 tools" in result.output
    assert "5 core + search + 5" in result.output and "94." in result.output

    as_json = runner.invoke(app, [f"{tools_file}:box", "--json", "--core", "get_order,list_order"])
    data = json.loads(as_json.output)
    assert [r["format"] for r in data] == ["anthropic", "openai", "mcp"]
    assert data[0]["core"] == ["get_order", "list_order"]
    assert 0.9 < data[0]["scenarios"][1]["saving"] < 0.97

    bad = runner.invoke(app, [f"{tools_file}:box", "--formats", "gemini"])
    assert bad.exit_code == 2
