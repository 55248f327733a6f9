"""`python -m maitre.mcp serve TARGET ...`: the `maitre serve` command without the root CLI."""

from __future__ import annotations

import typer

from ..cli.mcp_cmds import serve_command

__all__ = ["app"]

app = typer.Typer(add_completion=False)
app.command("serve")(serve_command)


@app.callback()
def _main() -> None:
    """maitre MCP server."""


if __name__ == "__main__":
    app()
