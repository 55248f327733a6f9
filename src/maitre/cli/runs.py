"""`maitre runs list|show|resume`: paused and finished agent runs in a store."""

from __future__ import annotations

import json
from typing import Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from ..stores import open_stores
from .governance import DB, _when
from .loader import load_object

__all__ = ["app", "runs_list", "runs_resume", "runs_show"]

app = typer.Typer(help="List, inspect and resume agent runs.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)


@app.command("list")
def runs_list(
    db: str = DB,
    status: str | None = typer.Option(None, help="paused | finished | stopped | running"),
    tenant: str | None = typer.Option(None, help="Only this tenant's runs"),
) -> None:
    """Show runs, newest first."""

    async def main() -> list[Any]:
        async with await open_stores(db) as stores:
            return await stores.runs.list(status=status, tenant=tenant)

    table = Table(title="runs")
    for column in ("run", "status", "updated"):
        table.add_column(column)
    for summary in anyio.run(main):
        table.add_row(summary.run_id, summary.status, _when(summary.updated_at))
    console.print(table)


@app.command("show")
def runs_show(
    run_id: str = typer.Argument(...), db: str = DB, as_json: bool = typer.Option(False, "--json")
) -> None:
    """Print a run: status, stop reason, pending approvals, messages."""
    from ..agent.run import Run

    async def main() -> Any:
        async with await open_stores(db) as stores:
            return await stores.runs.load(run_id)

    saved = anyio.run(main)
    if saved is None:
        err.print(f"[red]no run {run_id}[/red]")
        raise typer.Exit(1)
    if as_json:
        typer.echo(saved.state_json)
        return
    run = Run.from_json(saved.state_json)
    console.print(
        f"[bold]{run.id}[/bold] {run.status} ({run.stop_reason}) steps={run.steps} tokens={run.usage.total_tokens}"
    )
    for pending in run.pending:
        console.print(f"  waiting: {pending.approval_id} {pending.tool} {json.dumps(pending.arguments)}")
    for message in run.messages:
        console.print(f"  {message.role}: {json.dumps(message.to_dict(), ensure_ascii=False)[:200]}")
    if run.final_text:
        console.print(f"[green]{run.final_text}[/green]")


@app.command("resume")
def runs_resume(
    run_id: str = typer.Argument(...),
    db: str = DB,
    agent: str = typer.Option(..., "--agent", help="MODULE_OR_FILE:ATTR of a function(store) -> Agent"),
    approve: list[str] = typer.Option([], "--approve", help="Approval ids to approve before resuming"),
    deny: list[str] = typer.Option([], "--deny", help="Approval ids to deny before resuming"),
    approver: str | None = typer.Option(
        None, "--approver", help="Who decides (needed with --approve/--deny)"
    ),
    message: str = typer.Option("denied", "--message", help="Denial message for the model"),
) -> None:
    """Continue a paused run (in this process, from the store), optionally deciding its approvals."""
    from ..agent import ApprovalDecision

    factory = load_object(agent)
    decisions: dict[str, ApprovalDecision] = {}
    if approve or deny:
        if not approver:
            err.print("[red]--approve/--deny need --approver[/red]")
            raise typer.Exit(2)
        decisions = {a: ApprovalDecision.approved(approver) for a in approve}
        decisions.update({d: ApprovalDecision.denied(approver, message) for d in deny})

    async def main() -> Any:
        async with await open_stores(db) as stores:
            return await factory(stores).resume(run_id, decisions=decisions)

    run = anyio.run(main)
    console.print(f"{run.id}: {run.status} ({run.stop_reason})")
    if run.final_text:
        console.print(run.final_text)
    raise typer.Exit(0 if str(run.status) in ("finished", "paused") else 1)
