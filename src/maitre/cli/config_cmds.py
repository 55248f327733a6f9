"""`maitre config show`: the configuration every command runs with, and where each value came from."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from .app import App, console, settings, wide_console

__all__ = ["app", "show_command"]

app = App(help="Show the effective configuration (maitre.toml or [tool.maitre] in pyproject.toml).")


def _text(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


@app.command("show")
def show_command(
    as_json: bool = typer.Option(False, "--json", help="Print JSON: the file, every value and its source"),
    wide: bool = typer.Option(False, "--wide", help="Never wrap"),
) -> None:
    """Print every setting with its source (the file, or default); secrets are masked."""
    from ..config import effective_rows

    current = settings()
    rows = effective_rows(current)
    if as_json:
        document = {
            "file": str(current.path) if current.path else None,
            "values": {row.key: row.value for row in rows},
            "sources": {row.key: row.source for row in rows},
        }
        typer.echo(json.dumps(document, indent=2))
        return
    where = str(current.path) if current.path else "none found (every value is a default)"
    console.print(f"configuration file: {where}", soft_wrap=True, highlight=False)
    table = Table(show_header=True)
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("from", overflow="fold")
    for row in rows:
        table.add_row(row.key, _text(row.value), "file" if row.source != "default" else "default")
    wide_console(wide).print(table)
