"""`maitre demo`: the seeds' story in the terminal (rich) or as JSON Lines (`--json`).

Offline by default: SQLite in a temporary folder and the scripted model. With ANTHROPIC_API_KEY or
OPENAI_API_KEY set, or `--model openai-compatible:URL#MODEL` (a local server) or `--model local`
(a GGUF in this process, `maitre[local]`), the same story runs on a real model, with its options
from the flags, the `[model]` configuration section or the string itself (`maitre.models.spec`);
a local model gets limits that suit a CPU (15 minutes a chapter, 512 tokens a call). A provider
named without its key, or without its SDK installed, is refused in one line before the story
starts; a story whose model could not be reached exits 1. A reader that stops reading
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

from ..config import load_settings
from ..demo import demo_limits, run_story, scripted_model
from ..exceptions import UserError
from ..models.spec import ModelOptions, build_model, parse_model_spec
from ..stores import open_stores
from .errors import CommandError, quiet_broken_pipe

__all__ = ["API_KEYS", "configured_model_options", "demo_command", "model_from_spec"]

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


def model_from_spec(spec: str | None, options: ModelOptions | None = None) -> Any:
    """The model a `--model` string names (see `maitre.models.spec`); None picks from the
    configuration's `[model] spec`, then the environment (a provider key), else the scripted model.

    `options` are the command line's; the `[model]` section of the configuration file fills what
    they leave unset, and options written in the string itself win over both.
    """
    configured = configured_model_options()
    if spec is None:
        spec = _configured_spec()
    if spec is None:
        if os.environ.get("ANTHROPIC_API_KEY"):
            spec = "anthropic"
        elif os.environ.get("OPENAI_API_KEY"):
            spec = "openai"
        else:
            spec = "scripted"
    parsed = parse_model_spec(spec)
    if parsed.kind == "scripted":
        return scripted_model()
    _needs_key(parsed.kind)
    return build_model(parsed, configured.merged(options or ModelOptions()))


def configured_model_options() -> ModelOptions:
    """The `[model]` section of the configuration file as `ModelOptions` (all unset without a file)."""
    section = load_settings().config.model
    values = section.model_dump(exclude={"spec"})
    return ModelOptions(**values)


def _configured_spec() -> str | None:
    return load_settings().config.model.spec


def demo_command(
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON Lines, one event per line"),
    model: str | None = typer.Option(
        None,
        "--model",
        help="scripted | anthropic[:M] | openai[:M] | openai-compatible:URL[#M][?OPTIONS] | local[:GGUF] (default: [model] "
        "spec in the configuration, else a provider key in the environment, else scripted)",
    ),
    db: str | None = typer.Option(None, "--db", help="Keep the store here instead of a temporary folder"),
    keep: Path | None = typer.Option(
        None,
        "--keep",
        help="Keep the store in this folder (DIR/maitre.db) and leave one refund waiting for the console",
        file_okay=False,
    ),
    temperature: float | None = typer.Option(None, "--temperature", min=0, help="Sampling temperature"),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed, for runs that repeat"),
    max_output_tokens: int | None = typer.Option(
        None,
        "--max-output-tokens",
        min=1,
        help="Output tokens per model call (default: 512 local, 4096 hosted)",
    ),
    request_timeout: float | None = typer.Option(
        None, "--request-timeout", min=0.1, help="Seconds one model request may take"
    ),
    run_seconds: float | None = typer.Option(
        None, "--run-seconds", min=0.1, help="Time limit per chapter (default: 900 local, 120 hosted)"
    ),
    tools_in_prompt: str | None = typer.Option(
        None, "--tools-in-prompt", help="auto | on | off: describe the tools in the prompt (local servers)"
    ),
    constrained: bool | None = typer.Option(
        None,
        "--constrained/--no-constrained",
        help="Constrained tool calls: the step's JSON schema enforced while the model writes (local "
        "servers; on by default there)",
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

    try:
        flags = ModelOptions.from_mapping(
            {
                key: value
                for key, value in {
                    "temperature": temperature,
                    "seed": seed,
                    "max_output_tokens": max_output_tokens,
                    "request_timeout_s": request_timeout,
                    "run_seconds": run_seconds,
                    "tools_in_prompt": tools_in_prompt,
                    "constrained": constrained,
                }.items()
                if value is not None
            },
            where="maitre demo",
        )
        chosen = model_from_spec(model, flags)
        options = configured_model_options().merged(flags)
        if model is not None:
            options = options.merged(parse_model_spec(model).options)
    except (UserError, ImportError) as exc:  # a bad option, no GGUF, an extra not installed: one line
        raise CommandError(str(exc), code=2) from None
    limits = demo_limits(chosen, options)

    async def main(path: str) -> dict[str, Any]:
        try:
            async with await open_stores(path) as stores:
                return await run_story(chosen, stores, emit, leave_waiting=keep is not None, limits=limits)
        finally:
            close = getattr(chosen, "aclose", None)
            if close is not None:  # the adapter's HTTP client, closed in the loop that used it
                await close()

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
