"""`maitre approvals ...` and `maitre audit ...`: the human side of governance.

`--db` takes what `maitre.stores.open_stores` takes: a SQLite file path (the default backend),
`sqlite:///path.db`, or `postgresql://...?schema=NAME`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar, get_args

import anyio
import typer
from rich.console import Console
from rich.table import Table

from ..exceptions import UserError
from ..stores import ApprovalRequest, ApprovalStateError, ApprovalStatus, AuditEntry, Stores, open_stores

if TYPE_CHECKING:
    from ..gate.approval import ApprovalService

__all__ = [
    "DB",
    "approvals_app",
    "approvals_approve",
    "approvals_deny",
    "approvals_list",
    "audit_app",
    "audit_show",
    "audit_verify",
]

approvals_app = typer.Typer(help="List and decide approval requests.", no_args_is_help=True)
audit_app = typer.Typer(help="Inspect and verify the hash-chained audit log.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)
T = TypeVar("T")

_STATUSES: tuple[ApprovalStatus, ...] = get_args(ApprovalStatus)

DB = typer.Option(..., "--db", help="Store: SQLite file path, sqlite:///path.db or postgresql://...")


def _run(db: str, job: Callable[[Stores], Awaitable[T]]) -> T:
    async def main() -> T:
        async with await open_stores(db) as stores:
            return await job(stores)

    return anyio.run(main)


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _service(stores: Stores, tools: str | None) -> ApprovalService:
    from ..gate import Gate
    from ..tools import Toolbox
    from .loader import load_toolbox

    box = load_toolbox(tools) if tools else Toolbox()
    return Gate(box, stores=stores, audit=False).approvals


@approvals_app.command("list")
def approvals_list(
    db: str = DB,
    status: str = typer.Option("pending", help="pending | approved | denied | used | expired | all"),
    tenant: str | None = typer.Option(None, help="Only this tenant's requests"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Show approval requests (pending by default)."""

    async def job(stores: Stores) -> list[ApprovalRequest]:
        if status == "all":
            return await stores.approvals.list(tenant=tenant)
        for known in _STATUSES:
            if status == known:
                return await stores.approvals.list(status=known, tenant=tenant)
        return []  # no request has a status of that name

    requests = _run(db, job)
    if as_json:
        typer.echo(json.dumps([r.__dict__ for r in requests], indent=2, default=str))
        return
    table = Table(title=f"{len(requests)} approval requests ({status})")
    for column in ("id", "tool", "arguments", "user", "tenant", "reason", "status", "expires"):
        table.add_column(column)
    for r in requests:
        table.add_row(
            r.id, r.tool, json.dumps(r.arguments), r.user, r.tenant, r.reason, r.status, _when(r.expires_at)
        )
    console.print(table)


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str = typer.Argument(..., help="The approval request id (apr_...)"),
    db: str = DB,
    approver: str = typer.Option(..., "--approver", help="Who approves (recorded; may not be the requester)"),
    edit: str | None = typer.Option(None, "--edit", help="Edited arguments as a JSON object"),
    tools: str | None = typer.Option(None, "--tools", help="MODULE_OR_FILE:ATTR toolbox, to validate --edit"),
    note: str | None = typer.Option(None, "--note", help="A note kept with the decision"),
) -> None:
    """Approve a pending request, optionally with edited arguments."""
    edited = json.loads(edit) if edit else None
    if edited is not None and not tools:
        err.print(
            "[red]--edit needs --tools MODULE_OR_FILE:ATTR so the edited arguments can be validated[/red]"
        )
        raise typer.Exit(2)

    async def job(stores: Stores) -> ApprovalRequest:
        return await _service(stores, tools).approve(approval_id, approver, edited, note=note)

    try:
        request = _run(db, job)
    except (UserError, ApprovalStateError, ValueError) as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"[green]approved[/green] {request.id} ({request.tool}) by {request.approver}")


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str = typer.Argument(..., help="The approval request id (apr_...)"),
    db: str = DB,
    approver: str = typer.Option(..., "--approver", help="Who denies"),
    message: str = typer.Option(..., "--message", help="Why; the model reads this"),
) -> None:
    """Deny a pending request; the message goes back to the model."""

    async def job(stores: Stores) -> ApprovalRequest:
        return await _service(stores, None).deny(approval_id, approver, message)

    try:
        request = _run(db, job)
    except (UserError, ApprovalStateError) as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"[yellow]denied[/yellow] {request.id} ({request.tool}) by {request.approver}")


@audit_app.command("verify")
def audit_verify(
    db: str = DB,
    anchor: str | None = typer.Option(
        None,
        "--anchor",
        help="SEQ:HASH printed by an earlier verify; also catches a truncated or rewritten log",
    ),
) -> None:
    """Check the whole chain. Exit 0 when intact; 1 naming the first bad entry otherwise.

    A hash chain alone cannot tell a log that was cut short, or rewritten from the start, from an honest
    one. Keep the `anchor` this command prints somewhere else and pass it next time.
    """
    from ..audit import verify_store

    pinned: tuple[int, str] | None = None
    if anchor:
        seq, _, digest = anchor.partition(":")
        if not seq.isdigit() or len(digest) != 64:
            err.print("[red]--anchor must be SEQ:HASH (a number, a colon, 64 hex characters)[/red]")
            raise typer.Exit(2)
        pinned = (int(seq), digest)
    report = _run(db, lambda stores: verify_store(stores.audit, anchor=pinned))
    if report.ok:
        console.print(f"[green]audit chain intact[/green]: {report.checked} entries")
        console.print(f"anchor: {report.last_seq}:{report.last_hash}")
        return
    err.print(f"[red]audit chain broken at seq {report.first_bad_seq}[/red]: {report.reason}")
    raise typer.Exit(1)


@audit_app.command("show")
def audit_show(
    db: str = DB,
    limit: int = typer.Option(50, help="How many of the newest entries"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON Lines"),
) -> None:
    """Print the newest audit entries."""

    async def job(stores: Stores) -> list[AuditEntry]:
        last = await stores.audit.last()
        since = max(0, (last.seq if last else 0) - limit)
        return await stores.audit.entries(since_seq=since)

    entries = _run(db, job)
    if as_json:
        for entry in entries:
            typer.echo(json.dumps(entry.to_dict()))
        return
    table = Table(title=f"last {len(entries)} audit entries")
    for column in ("seq", "time", "user", "tool", "decision", "error", "replayed", "approval"):
        table.add_column(column)
    for e in entries:
        table.add_row(
            str(e.seq), _when(e.at), f"{e.tenant}/{e.user}", e.tool, e.decision, e.error_code or "",
            "yes" if e.replayed else "", e.approval_id or "",
        )  # fmt: skip
    console.print(table)
