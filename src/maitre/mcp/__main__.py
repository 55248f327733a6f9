"""`python -m maitre.mcp serve TARGET ...`: the `maitre serve` command without the root CLI.

The command is `maitre.mcp.serve.serve_command`, the one `maitre serve` mounts too; this entry point
imports nothing of `maitre.cli` (the MCP door sits below the command line). `serve_command` reports
its own mistakes and failures in one line; anything else is one line too here, with how to see the
traceback (`MAITRE_DEBUG=1`).
"""

from __future__ import annotations

import os
import sys

import typer

from .serve import serve_command

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("serve")(serve_command)


@app.callback()
def _main() -> None:
    """maitre MCP server."""


def main() -> None:
    """Run the app; an unexpected exception is one line on stderr and exit 1."""
    try:
        app()
    except Exception as exc:
        if os.environ.get("MAITRE_DEBUG"):
            raise
        text = " ".join(str(exc).split())[:300]
        print(
            f"error: unexpected {type(exc).__name__}: {text} (run with MAITRE_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
