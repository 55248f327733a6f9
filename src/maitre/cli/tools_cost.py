"""`maitre tools cost MODULE_OR_FILE:ATTR`: seed 000's cost table, with measured token counts.

Seed 000 assumes ~150 tokens per definition; this command exports the toolbox in each provider's
format, counts every definition with the offline tokenizer, and prints what a day of tasks costs
with all tools loaded against a core set + `search_tools` + the tools a search reveals.

The core set is `--core a,b,c`; without it, the tools tagged "core", else the first five tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ..exceptions import UserError
from .app import App, console
from .loader import FORMATS, export_format, load_toolbox

if TYPE_CHECKING:
    from ..search.cost import CostReport, CostScenario
    from ..tools import Toolbox

__all__ = ["app", "cost", "default_core", "load_target"]

app = App(
    help="What tool definitions cost per call, task and day: all loaded vs core + search.",
    no_args_is_help=False,
)

_FORMATS = FORMATS


def load_target(spec: str) -> Toolbox:
    """Load `MODULE_OR_FILE:ATTR` (dotted module or path to a .py file); it must be a Toolbox
    (or a zero-argument factory returning one). Uses the CLI's shared loader."""
    return load_toolbox(spec)


def default_core(box: Toolbox, size: int = 5) -> list[str]:
    """The tools tagged "core", else the first `size` tools of the toolbox."""
    tagged = [t.name for t in box if "core" in t.tags]
    return tagged or box.names()[:size]


def _table(report: CostReport, price: float) -> Table:
    """Seed 000's layout: one column per set-up, one row per quantity."""
    table = Table(
        title=(
            f"{report.format}: {report.tools} tools = {report.all_tokens:,} tokens "
            f"(mean {report.mean_tool_tokens:.0f}); core {report.core_tokens:,}, search_tools "
            f"{report.search_tokens:,}, {report.revealed} revealed ~{report.revealed_tokens:,}"
        ),
        title_justify="left",
    )
    all_loaded, on_demand, plus_one = report.scenarios
    table.add_column("")
    table.add_column(f"all {report.tools} tools", justify="right")
    table.add_column(f"{len(report.core)} core + search + {report.revealed}", justify="right")
    table.add_column(f"same, {plus_one.calls_per_task} calls", justify="right")
    rows: list[tuple[str, Callable[[CostScenario], str]]] = [
        ("per call", lambda s: f"{s.tokens_per_call:,}"),
        ("calls per task", lambda s: str(s.calls_per_task)),
        ("per task", lambda s: f"{s.tokens_per_task:,}"),
        ("per day", lambda s: f"{s.tokens_per_day:,}"),
        (f"USD/day at {price:g}/Mtok", lambda s: f"{s.usd_per_day:,.2f}"),
        ("saving", lambda s: "-" if s is all_loaded else f"{s.saving:.1%}"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(s) for s in (all_loaded, on_demand, plus_one)))
    return table


def _as_dict(report: CostReport) -> dict[str, Any]:
    return {
        "format": report.format,
        "tools": report.tools,
        "all_tokens": report.all_tokens,
        "core": report.core,
        "core_tokens": report.core_tokens,
        "search_tokens": report.search_tokens,
        "revealed": report.revealed,
        "revealed_tokens": report.revealed_tokens,
        "mean_tool_tokens": round(report.mean_tool_tokens, 1),
        "scenarios": [s.__dict__ for s in report.scenarios],
    }


@app.command("cost")
def cost(
    target: str = typer.Argument(..., help="MODULE_OR_FILE:ATTR naming a Toolbox"),
    calls_per_task: int = typer.Option(12, "--calls-per-task", min=1, help="Model calls in one task"),
    tasks_per_day: int = typer.Option(10_000, "--tasks-per-day", min=1, help="Tasks run per day"),
    price_per_mtok: float = typer.Option(
        1.0, "--price-per-mtok", min=0.0, help="USD per million input tokens"
    ),
    core: str | None = typer.Option(
        None, "--core", help="Comma-separated always-loaded tools (default: tagged 'core', else first 5)"
    ),
    revealed: int = typer.Option(
        5, "--revealed", min=0, help="Tools a search reveals (they travel with every call)"
    ),
    formats: str = typer.Option("anthropic,openai,mcp", "--formats", help="Comma-separated provider formats"),
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as JSON"),
) -> None:
    """Print seed 000's table with measured token counts: all tools loaded vs core + search_tools."""
    from ..search.cost import estimate_tool_costs

    box = load_target(target)
    core_names = [n.strip() for n in core.split(",") if n.strip()] if core else default_core(box)
    chosen = [f.strip() for f in formats.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in _FORMATS]
    if unknown:
        raise UserError(f"unknown format(s) {unknown}; use {', '.join(_FORMATS)}")
    reports = estimate_tool_costs(
        box,
        core=core_names,
        revealed=revealed,
        calls_per_task=calls_per_task,
        tasks_per_day=tasks_per_day,
        price_per_mtok=price_per_mtok,
        formats=[export_format(f) for f in chosen],
    )
    if as_json:
        typer.echo(json.dumps([_as_dict(r) for r in reports], indent=2))
        return
    console.print(
        f"{target}: {len(box)} tools; core = {', '.join(core_names) or '(none)'}; "
        f"{calls_per_task} calls/task, {tasks_per_day:,} tasks/day; tokens counted with cl100k_base"
    )
    for report in reports:
        console.print(_table(report, price_per_mtok))
