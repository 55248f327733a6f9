"""`maitre demo`: the seeds' story in the terminal (rich) or as JSON Lines (`--json`).

Offline by default: SQLite in a temporary folder and the scripted model. With ANTHROPIC_API_KEY or
OPENAI_API_KEY set, or `--model openai-compatible:URL`, the same story runs on a real model. A
provider named without its key, or without its SDK installed, is refused in one line before the
story starts; a story whose model could not be reached exits 1. A reader that stops reading
(`maitre demo --json | head`) ends the demo quietly.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from ..demo import run_story, scripted_model
from ..exceptions import UserError
from ..stores import open_stores
from .errors import CommandError, quiet_broken_pipe

__all__ = ["API_KEYS", "demo_command", "model_from_spec"]

API_KEYS = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "openai": ("OPENAI_API_KEY",),
}
"""The environment variables each hosted provider reads its credentials from."""


def _needs_key(kind: str) -> None:
    names = API_KEYS.get(kind, ())
    if names and not any(os.environ.get(name) for name in names):
        raise CommandError(
            f"--model {kind} needs {names[0]} in the environment (or run the offline story with "
            "--model scripted)"
        )


def model_from_spec(spec: str | None) -> Any:
    """`scripted`, `anthropic[:MODEL]`, `openai[:MODEL]`, `openai-compatible:URL[#MODEL]`; None picks from env."""
    if spec is None:
        if os.environ.get("ANTHROPIC_API_KEY"):
            spec = "anthropic"
        elif os.environ.get("OPENAI_API_KEY"):
            spec = "openai"
        else:
            spec = "scripted"
    kind, _, rest = spec.partition(":")
    if kind == "scripted":
        return scripted_model()
    if kind == "anthropic":
        _needs_key(kind)
        from ..models.anthropic import AnthropicModel

        return AnthropicModel(rest) if rest else AnthropicModel()
    if kind == "openai":
        _needs_key(kind)
        from ..models.openai import OpenAIChatModel

        return OpenAIChatModel(rest or "gpt-4.1-mini")
    if kind == "openai-compatible":
        from ..models.openai_compat import OpenAICompatibleModel

        url, _, model = rest.partition("#")
        if not url:
            raise UserError("use --model openai-compatible:http://127.0.0.1:11434/v1#MODEL")
        return OpenAICompatibleModel(url, model or "local")
    raise UserError(
        f"unknown model {spec!r}: use scripted, anthropic[:MODEL], openai[:MODEL] or openai-compatible:URL"
    )


def demo_command(
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON Lines, one event per line"),
    model: str | None = typer.Option(
        None, "--model", help="scripted | anthropic[:M] | openai[:M] | openai-compatible:URL[#M]"
    ),
    db: str | None = typer.Option(None, "--db", help="Keep the store here instead of a temporary folder"),
    keep: Path | None = typer.Option(
        None,
        "--keep",
        help="Keep the store in this folder (DIR/maitre.db) and leave one refund waiting for the console",
        file_okay=False,
    ),
) -> None:
    """Tell the seeds' story through the real agent loop, gate and store."""
    if keep is not None and db is not None:
        raise CommandError("use --keep DIR or --db FILE, not both", code=2)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        db = str(keep / "maitre.db")
    console = Console()
    render = _Renderer(console)
    closed: list[bool] = []

    def emit(event: dict[str, Any]) -> None:
        if closed:
            return  # the reader has gone; the story ends without another word
        try:
            if as_json:
                typer.echo(json.dumps(_public(event), ensure_ascii=False, default=str))
            else:
                render(event)
        except BrokenPipeError:
            closed.append(True)

    chosen = model_from_spec(model)

    async def main(path: str) -> dict[str, Any]:
        async with await open_stores(path) as stores:
            return await run_story(chosen, stores, emit, leave_waiting=keep is not None)

    try:
        if db:
            outcome = anyio.run(main, db)
        else:
            with tempfile.TemporaryDirectory(prefix="maitre-demo-") as folder:
                outcome = anyio.run(main, str(Path(folder) / "maitre.db"))
    except UserError as exc:
        raise CommandError(str(exc), code=2) from None
    if closed:
        quiet_broken_pipe()
    failed = [key for key, run in outcome["runs"].items() if str(run.stop_reason) == "model_error"]
    if not as_json:
        world = outcome["world"]
        console.rule("[bold]What happened in the world")
        console.print(f"refunds issued: {len(world.refunds)} {world.refunds}")
        console.print(f"emails sent: {len(world.emails)}")
    if keep is not None and db is not None and not as_json:
        _console_steps(console, db)
    if failed:
        raise CommandError(
            f"the model could not be used in {len(failed)} chapter(s) ({', '.join(failed)}): check the "
            "key, the model name and the network, or run with --model scripted"
        )
    raise typer.Exit(0 if outcome["audit"].ok else 1)


def _console_steps(console: Console, db: str) -> None:
    """What to type to decide the refund left waiting, in the console, as the demo's manager."""
    console.rule("[bold]A refund is waiting for you")
    console.print(
        "Decide it in the approval console (pip install 'maitre[console]'):", markup=False, highlight=False
    )
    for line in (
        f"maitre console add-user maria --tenant demo --role approver --stores {db}",
        f"maitre console --stores {db} --resume-agent maitre.demo:console_agent",
    ):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    console.print(
        "then open http://127.0.0.1:8765/ and sign in as maria: approve (or edit) the refund and the run "
        "finishes by itself.",
        highlight=False,
    )


def _public(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "raw"}


class _Renderer:
    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: dict[str, Any]) -> None:
        c = self.console
        kind = event["type"]
        if kind == "chapter":
            c.rule(f"[bold]{escape(event['title'])}")
            c.print(f"[bold]user:[/bold] {escape(event['goal'])}")
        elif kind == "tool_call":
            c.print(
                f"[cyan]model proposes[/cyan] {escape(event['name'])}({escape(json.dumps(event['arguments'], ensure_ascii=False))})"
            )
        elif kind == "tool_result":
            label = event["error_code"] or ("replayed" if event["replayed"] else "ok")
            style = "red" if event["is_error"] else ("magenta" if event["replayed"] else "green")
            trust = " [yellow](untrusted)[/yellow]" if event.get("trust") == "untrusted" else ""
            c.print(
                Panel(
                    escape(event["content"][:600]), title=f"[{style}]{label}[/{style}]{trust}", expand=False
                )
            )
        elif kind == "approval_requested":
            c.print(
                f"[yellow]approval requested[/yellow] {event['approval_id']} for {event['tool']} {json.dumps(event['arguments'])}",
                soft_wrap=True,
            )
        elif kind == "run_paused":
            c.print("[yellow]run paused[/yellow] (saved; it can resume in any process)")
        elif kind == "approval_decided":
            c.print(f"[yellow]human decision[/yellow]: {event['status']} by {event['approver']}")
        elif kind == "run_resumed":
            c.print("[yellow]run resumed[/yellow]")
        elif kind == "run_finished":
            c.print(f"[bold]{event['stop_reason']}[/bold]: {escape(event['text'])}")
            if event.get("rule"):  # the scripted model's rule that wrote the answer, apart and dimmed
                c.print(f"[dim](scripted rule: {escape(event['rule'])})[/dim]")
        elif kind == "audit_verified":
            ok = "[green]intact[/green]" if event["ok"] else f"[red]broken at {event['first_bad_seq']}[/red]"
            c.rule("[bold]The audit log")
            c.print(f"hash chain {ok}: {event['entries']} entries, head {event['last_hash'][:16]}…")
