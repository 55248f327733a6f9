"""The `maitre` command line (typer + rich). The CLI prints; the library never does.

Layer: the outermost door. It may import every other layer (through public names); nothing in
`maitre` imports it. `maitre serve` is `maitre.mcp.serve.serve_command`, shared with
`python -m maitre.mcp serve`.

Importing it loads typer, rich and the core only: each command imports what it needs (the MCP
SDK, numpy, a database driver) when it runs, so `pip install maitre` without extras has a working
`maitre --help`, and a command whose extra is missing says which `pip install` to run. Every
command runs inside `errors.guard`: a mistake is one line on stderr, never a traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer

from ..mcp.serve import serve_command
from . import config_cmds, console_cmds, eval_cmds, governance, memory, runs, tools_cmds
from .app import App, use_config
from .demo import demo_command
from .gateway_cmds import gateway_command
from .mcp_cmds import mcp_app
from .redteam_cmds import redteam_command

__all__ = ["app", "main", "version"]

app = App(
    name="maitre",
    help="maitre: the governed runtime between language models and the real world.",
)
app.add_typer(tools_cmds.app, name="tools")
app.add_typer(governance.approvals_app, name="approvals")
app.add_typer(governance.audit_app, name="audit")
app.add_typer(runs.app, name="runs")
app.add_typer(mcp_app, name="mcp")
app.add_typer(memory.app, name="memory")
app.add_typer(config_cmds.app, name="config")
app.add_typer(console_cmds.app, name="console")
app.add_typer(eval_cmds.app, name="eval")
app.command("serve")(serve_command)
app.command("demo")(demo_command)
app.command("gateway")(gateway_command)
app.command("redteam")(redteam_command)


def version() -> str:
    """The installed maitre's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("maitre")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "(not installed: no package metadata)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"maitre {version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        envvar="MAITRE_CONFIG",
        help="The configuration file (default: maitre.toml or pyproject.toml [tool.maitre], "
        "searched from here upward)",
        show_envvar=True,
    ),
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit"
    ),
) -> None:
    """maitre: the governed runtime between language models and the real world."""
    use_config(config)
    ctx.call_on_close(lambda: use_config(None))  # the choice is this invocation's, not the process's


def main() -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    app()
