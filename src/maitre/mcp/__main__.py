"""`python -m maitre.mcp serve TARGET ...`: the `maitre serve` command without the root CLI.

The command is `maitre.mcp.serve.serve_command`, the one `maitre serve` mounts too; this entry point
imports nothing of `maitre.cli` (the MCP door sits below the command line).
"""

from __future__ import annotations

import typer

from .serve import serve_command

__all__ = ["app"]

app = typer.Typer(add_completion=False)
app.command("serve")(serve_command)


@app.callback()
def _main() -> None:
    """maitre MCP server."""


if __name__ == "__main__":
    app()
