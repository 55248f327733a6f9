"""`maitre tools ...`: inspect a toolbox from the command line."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from .app import App, console, err
from .loader import FORMATS, export_format, load_toolbox
from .tools_cost import cost as cost_command

__all__ = ["app", "lint", "show"]

app = App(help="Inspect toolboxes: lint definitions, show schemas and token costs.")
app.command("cost")(cost_command)


def _format(value: str) -> str:
    if value not in FORMATS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(FORMATS)}")
    return value


@app.command("lint")
def lint(
    target: str = typer.Argument(..., help="MODULE_OR_FILE:ATTR naming a Toolbox"),
    as_json: bool = typer.Option(False, "--json", help="Print findings as JSON"),
) -> None:
    """Flag the seeds' anti-patterns in tool definitions. Exits 1 when anything is found."""
    from ..tools.lint import lint_toolbox

    box = load_toolbox(target)
    findings = lint_toolbox(box)
    if as_json:
        typer.echo(json.dumps([f.__dict__ for f in findings], indent=2))
    elif not findings:
        console.print(f"[green]{len(box)} tools, no findings[/green]")
    else:
        table = Table(title=f"{len(findings)} findings in {len(box)} tools")
        for column in ("tool", "check", "message"):
            table.add_column(column)
        for f in findings:
            table.add_row(f.tool, f.code, f.message)
        console.print(table)
    raise typer.Exit(1 if findings else 0)


@app.command("show")
def show(
    target: str = typer.Argument(..., help="MODULE_OR_FILE:ATTR naming a Toolbox"),
    format: str = typer.Option("mcp", callback=_format, help="anthropic | openai | openai-responses | mcp"),
) -> None:
    """Print the tool definitions as a provider sees them (JSON on stdout, token costs on stderr)."""
    box = load_toolbox(target)
    definitions = box.definitions(export_format(format))
    typer.echo(json.dumps(list(definitions), indent=2, ensure_ascii=False))
    err.print(f"[dim]{len(definitions)} definitions, {definitions.total_tokens:,} tokens (cl100k_base)[/dim]")
