"""The `maitre` command line (typer + rich). The CLI prints; the library never does.

Layer: the outermost door. It may import every other layer (through public names); nothing in
`maitre` imports it. `maitre serve` is `maitre.mcp.serve.serve_command`, shared with
`python -m maitre.mcp serve`.
"""

from __future__ import annotations

import logging
import sys

import typer

from ..mcp.serve import serve_command
from . import governance, memory, runs, tools_cmds
from .demo import demo_command
from .mcp_cmds import mcp_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="maitre",
    help="maitre: the governed runtime between language models and the real world.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(tools_cmds.app, name="tools")
app.add_typer(governance.approvals_app, name="approvals")
app.add_typer(governance.audit_app, name="audit")
app.add_typer(runs.app, name="runs")
app.add_typer(mcp_app, name="mcp")
app.add_typer(memory.app, name="memory")
app.command("serve")(serve_command)
app.command("demo")(demo_command)


def main() -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    app()
