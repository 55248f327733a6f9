"""`maitre approvals ...` and `maitre audit ...`: the human side of governance.

`--stores` (alias `--db`) names the store the server or app writes: a SQLite file path,
`sqlite:///path.db`, or `postgresql://...?schema=NAME`; without it, `[stores] url` from
maitre.toml. These commands never create a store: a path that is not there, or a database that is
not maitre's, is refused before anything is opened.

A decision is recorded under the operating-system account running the command, marked
`via=cli` (see `maitre.cli.identity`); `--approver NAME` is kept only as a claimed name beside it.
The decision is also a line of the audit chain (`approval_decided`, "approved by alice (via=cli)"),
so the log says who let a call run, not only that it ran.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

import typer
from rich.table import Table

from .app import App, console, settings, wide_console
from .errors import CommandError
from .stores import STORES, run_on_stores, store_url

if TYPE_CHECKING:
    from ..gate import Gate
    from ..gate.approval import ApprovalService
    from ..stores import ApprovalRequest, AuditEntry, Stores
    from ..tools import Toolbox

__all__ = [
    "DB",
    "STATUSES",
    "approvals_app",
    "approvals_approve",
    "approvals_deny",
    "approvals_list",
    "approvals_show",
    "audit_app",
    "audit_show",
    "audit_verify",
]

approvals_app = App(help="List and decide approval requests.")
audit_app = App(help="Inspect and verify the hash-chained audit log.")

DB = STORES
"""The `--stores` / `--db` option (the older name, kept for the commands that imported it)."""

STATUSES = ("pending", "approved", "denied", "used", "expired", "all")
"""What `approvals list --status` accepts."""


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _gate(stores: Stores, box: Toolbox) -> Gate:
    """A gate over `stores` with the configured policy (which says who may approve), to decide with."""
    from ..gate import Gate

    return Gate(box, stores=stores, audit=False, policy=settings().config.policy.build())


def _status(value: str) -> str:
    if value not in STATUSES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(STATUSES)}")
    return value


@approvals_app.command("list")
def approvals_list(
    db: str | None = STORES,
    status: str = typer.Option(
        "pending", callback=_status, help="pending | approved | denied | used | expired | all"
    ),
    tenant: str | None = typer.Option(None, help="Only this tenant's requests"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (every field, ids in full)"),
    wide: bool = typer.Option(False, "--wide", help="Never wrap: one request per line"),
) -> None:
    """Show approval requests (pending by default). Ids are never cut: copy them from here."""
    from ..stores import ApprovalStatus

    known: tuple[ApprovalStatus, ...] = get_args(ApprovalStatus)

    async def job(stores: Stores) -> list[ApprovalRequest]:
        for name in known:
            if status == name:
                return await stores.approvals.list(status=name, tenant=tenant)
        return await stores.approvals.list(tenant=tenant)

    requests = run_on_stores(store_url(db), job)
    if as_json:
        typer.echo(json.dumps([_as_json(r) for r in requests], indent=2, default=str))
        return
    table = Table(title=f"{len(requests)} approval requests ({status})")
    width = max((len(r.id) for r in requests), default=2)
    table.add_column("id", no_wrap=True, min_width=width, overflow="fold")
    columns = ["tool", "arguments", "requester", "reason"] + (["status"] if status == "all" else [])
    for column in [*columns, "expires"]:
        table.add_column(column, overflow="fold")
    for r in requests:
        row = [r.id, r.tool, json.dumps(r.arguments), f"{r.tenant}/{r.user}", r.reason]
        row += [r.status] if status == "all" else []
        table.add_row(*row, _when(r.expires_at))
    wide_console(wide).print(table)


def _as_json(request: ApprovalRequest) -> dict[str, Any]:
    """Every field of a request, JSON-ready (the taint source as an object, not its repr)."""
    return dataclasses.asdict(request)


def _show_lines(r: ApprovalRequest) -> list[tuple[str, str]]:
    """The labelled lines of `approvals show`: what a person needs to decide, the decision if any."""
    lines = [
        ("id", r.id),
        ("tool", r.tool),
        ("status", r.status),
        ("requester", f"{r.tenant}/{r.user}"),
        ("run", r.run_id or "none (a call outside any run)"),
    ]
    if r.rule:
        lines.append(("rule", r.rule))
    lines.append(("reason", r.reason))
    if r.effect is not None or r.risk is not None:
        lines.append(("effect", f"{r.effect or '?'}, risk {r.risk or '?'}"))
    if r.taint is not None:
        lines.append(("tainted by", f"{r.taint.tool} (call {r.taint.call_id}, at {_when(r.taint.at)})"))
    lines += [
        ("arguments", json.dumps(r.arguments, ensure_ascii=False)),
        ("call hash", r.call_hash),
        ("created", _when(r.created_at)),
        ("expires", _when(r.expires_at)),
    ]
    if r.approver is not None:
        lines += [("approver", r.approver), ("decided", _when(r.decided_at))]
    if r.message is not None:
        lines.append(("message", r.message))
    if r.edited_arguments is not None:
        lines.append(("edited to", json.dumps(r.edited_arguments, ensure_ascii=False)))
    if r.used_at is not None:
        lines.append(("used", _when(r.used_at)))
    return lines


@approvals_app.command("show")
def approvals_show(
    approval_id: str = typer.Argument(..., help="The approval request id (apr_...)"),
    db: str | None = STORES,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (every field)"),
) -> None:
    """Print one approval request: who asked, the rule that asked, effect and risk, taint, arguments."""

    async def job(stores: Stores) -> ApprovalRequest | None:
        return await stores.approvals.get(approval_id)

    request = run_on_stores(store_url(db), job)
    if request is None:
        raise CommandError(
            f"no approval request {approval_id} in that store: copy the id from `maitre approvals list`",
            code=2,
        )
    if as_json:
        typer.echo(json.dumps(_as_json(request), indent=2, default=str))
        return
    for label, value in _show_lines(request):
        # Values are written by models and tools: printed as text, never read as console markup.
        console.print(f"{label:<11}{value}", markup=False, highlight=False, soft_wrap=True)


def _edits(edit: str | None) -> dict[str, Any] | None:
    if edit is None:
        return None
    try:
        edited = json.loads(edit)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f"not JSON ({exc.msg} at character {exc.pos})", param_hint="--edit"
        ) from None
    if not isinstance(edited, dict):
        raise typer.BadParameter("must be a JSON object of arguments", param_hint="--edit")
    return edited


def _decide(
    db: str | None,
    approval_id: str,
    claimed: str | None,
    decide: Any,
    tools: str | None = None,
) -> ApprovalRequest:
    """Check that this person may decide the request, then record `decide(service, principal)`."""
    from ..tools import Toolbox
    from .identity import CliApprover
    from .loader import load_toolbox

    who = CliApprover(claimed)
    box = load_toolbox(tools) if tools else Toolbox()
    url = store_url(db)

    async def job(stores: Stores) -> ApprovalRequest:
        from ..gate.approval import decision_entry
        from ..stores import ApprovalStateError

        gate = _gate(stores, box)
        service = gate.approvals
        request = await service.get(approval_id)
        if request is None:
            raise CommandError(
                f"no approval request {approval_id} in that store: copy the id from `maitre approvals list`",
                code=2,
            )
        if request.status != "pending":
            raise CommandError(f"refused: {approval_id} is {request.status}, not pending")
        who.check(gate.policy, request)
        try:
            decided: ApprovalRequest = await decide(service, who.principal(request.tenant))
        except ApprovalStateError as exc:
            raise CommandError(f"refused: {exc}") from None
        await stores.audit.append(decision_entry(decided, who.user))
        return decided

    from ..exceptions import UserError

    try:
        return run_on_stores(url, job)
    except UserError as exc:  # the service's own refusal (edited arguments, role): a refusal, exit 1
        raise CommandError(f"refused: {exc}") from None


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str = typer.Argument(..., help="The approval request id (apr_...)"),
    db: str | None = STORES,
    approver: str | None = typer.Option(
        None,
        "--approver",
        help="A name to record beside your OS account (a claim, not a login; may not be the requester)",
    ),
    edit: str | None = typer.Option(None, "--edit", help="Edited arguments as a JSON object"),
    tools: str | None = typer.Option(None, "--tools", help="MODULE_OR_FILE:ATTR toolbox, to validate --edit"),
    note: str | None = typer.Option(None, "--note", help="A note kept with the decision"),
) -> None:
    """Approve a pending request (as your OS account, via=cli), optionally with edited arguments."""
    edited = _edits(edit)
    if edited is not None and not tools:
        raise typer.BadParameter(
            "--edit needs --tools MODULE_OR_FILE:ATTR so the edited arguments can be validated",
            param_hint="--edit",
        )

    async def decide(service: ApprovalService, who: Any) -> ApprovalRequest:
        return await service.approve(approval_id, who, edited, note=note)

    request = _decide(db, approval_id, approver, decide, tools)
    console.print(
        f"[green]approved[/green] {request.id} ({request.tool}) by {request.approver}",
        highlight=False,
        soft_wrap=True,
    )


@approvals_app.command("deny")
def approvals_deny(
    approval_id: str = typer.Argument(..., help="The approval request id (apr_...)"),
    db: str | None = STORES,
    message: str = typer.Option(..., "--message", help="Why; the model reads this"),
    approver: str | None = typer.Option(
        None, "--approver", help="A name to record beside your OS account (a claim, not a login)"
    ),
) -> None:
    """Deny a pending request (as your OS account, via=cli); the message goes back to the model."""

    async def decide(service: ApprovalService, who: Any) -> ApprovalRequest:
        return await service.deny(approval_id, who, message)

    request = _decide(db, approval_id, approver, decide)
    console.print(
        f"[yellow]denied[/yellow] {request.id} ({request.tool}) by {request.approver}",
        highlight=False,
        soft_wrap=True,
    )


def _anchor(value: str | None) -> str | None:
    if value is None:
        return None
    seq, _, digest = value.partition(":")
    if not seq.isdigit() or len(digest) != 64:
        raise typer.BadParameter("must be SEQ:HASH (a number, a colon, 64 hex characters)")
    return value


@audit_app.command("verify")
def audit_verify(
    db: str | None = STORES,
    anchor: str | None = typer.Option(
        None,
        "--anchor",
        callback=_anchor,
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
        pinned = (int(seq), digest)
    report = run_on_stores(store_url(db), lambda stores: verify_store(stores.audit, anchor=pinned))
    if report.ok:
        console.print(f"[green]audit chain intact[/green]: {report.checked} entries")
        console.print(f"anchor: {report.last_seq}:{report.last_hash}", soft_wrap=True)
        return
    raise CommandError(f"audit chain broken at seq {report.first_bad_seq}: {report.reason}")


@audit_app.command("show")
def audit_show(
    db: str | None = STORES,
    limit: int = typer.Option(50, min=1, help="How many of the newest entries"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON Lines"),
    wide: bool = typer.Option(False, "--wide", help="Never wrap: one entry per line"),
) -> None:
    """Print the newest audit entries."""

    async def job(stores: Stores) -> list[AuditEntry]:
        last = await stores.audit.last()
        since = max(0, (last.seq if last else 0) - limit)
        return await stores.audit.entries(since_seq=since)

    entries = run_on_stores(store_url(db), job)
    if as_json:
        for entry in entries:
            typer.echo(json.dumps(entry.to_dict()))
        return
    table = Table(title=f"last {len(entries)} audit entries")
    for column in ("seq", "time", "user", "tool", "decision", "error", "replayed"):
        table.add_column(column, overflow="fold")
    width = max((len(e.approval_id or "") for e in entries), default=8)
    table.add_column("approval", no_wrap=True, min_width=width)
    for e in entries:
        table.add_row(
            str(e.seq), _when(e.at), f"{e.tenant}/{e.user}", e.tool, e.decision, e.error_code or "",
            "yes" if e.replayed else "", e.approval_id or "",
        )  # fmt: skip
    wide_console(wide).print(table)
