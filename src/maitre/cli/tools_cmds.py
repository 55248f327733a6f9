"""`maitre tools ...`: inspect a toolbox from the command line."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from ..exceptions import UserError
from ..tools.lint import lint_toolbox
from .loader import export_format, load_toolbox
from .tools_cost import cost as cost_command

__all__ = ["app", "lint", "show"]

app = typer.Typer(
    help="Inspect toolboxes: lint definitions, show schemas and token costs.", no_args_is_help=True
)
console = Console()
app.command("cost")(cost_command)


@app.command("lint")
def lint(
    target: str = typer.Argument(..., help="MODULE_OR_FILE:ATTR naming a Toolbox"),
    as_json: bool = typer.Option(False, "--json", help="Print findings as JSON"),
) -> None:
    """Flag the seeds' anti-patterns in tool definitions. Exits 1 when anything is found."""
    try:
        box = load_toolbox(target)
    except UserError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
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
    format: str = typer.Option("mcp", help="anthropic | openai | openai-responses | mcp"),
) -> None:
    """Print the tool definitions as a provider sees them, with token costs."""
    box = load_toolbox(target)
    definitions = box.definitions(export_format(format))
    typer.echo(json.dumps(list(definitions), indent=2, ensure_ascii=False))
    console.print(
        f"[dim]{len(definitions)} definitions, {definitions.total_tokens:,} tokens (cl100k_base)[/dim]"
    )
