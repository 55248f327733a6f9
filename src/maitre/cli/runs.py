"""`maitre runs list|show|resume|worker`: paused and finished agent runs in a store.

`--agent` names a function that takes the opened `Stores` and returns the `Agent` to continue the
run with (the same tools, model and policy as the process that started it), as `FILE.py:NAME`
or `module:NAME`, e.g. `shop.py:make_agent` in the README's five-minute app.

`maitre runs worker` resumes, by itself, every paused run whose approvals have all been decided (in
the console, with `maitre approvals approve`, ...), and continues a run another worker left
`running` when it was killed mid-resume: see `maitre.agent.worker`. Several workers may run against
one store; each run is resumed once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from .app import App, console, err, wide_console
from .errors import CommandError
from .governance import _when
from .stores import STORES, run_on_stores, store_url

if TYPE_CHECKING:
    from ..stores import RunState, RunSummary, Stores

__all__ = ["RUN_STATUSES", "app", "runs_list", "runs_resume", "runs_show", "runs_worker"]

app = App(help="List, inspect and resume agent runs.")

RUN_STATUSES = ("running", "paused", "finished", "stopped")
"""What `runs list --status` accepts."""


def _status(value: str | None) -> str | None:
    if value is not None and value not in RUN_STATUSES:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(RUN_STATUSES)}")
    return value


@app.command("list")
def runs_list(
    db: str | None = STORES,
    status: str | None = typer.Option(None, callback=_status, help="running | paused | finished | stopped"),
    tenant: str | None = typer.Option(None, help="Only this tenant's runs"),
    limit: int = typer.Option(100, min=1, help="At most this many, newest first"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON"),
    wide: bool = typer.Option(False, "--wide", help="Never wrap: one run per line"),
) -> None:
    """Show runs, newest first."""

    async def job(stores: Stores) -> list[RunSummary]:
        return await stores.runs.list(status=status, tenant=tenant, limit=limit)

    runs = run_on_stores(store_url(db), job)
    if as_json:
        typer.echo(json.dumps([summary._asdict() for summary in runs], indent=2))
        return
    table = Table(title=f"{len(runs)} runs")
    table.add_column("run", no_wrap=True, min_width=max((len(s.run_id) for s in runs), default=3))
    for column in ("status", "updated"):
        table.add_column(column)
    for summary in runs:
        table.add_row(summary.run_id, summary.status, _when(summary.updated_at))
    wide_console(wide).print(table)


@app.command("show")
def runs_show(
    run_id: str = typer.Argument(...),
    db: str | None = STORES,
    as_json: bool = typer.Option(False, "--json", help="Print the saved run state as JSON"),
) -> None:
    """Print a run: status, stop reason, pending approvals, messages."""
    from ..agent.run import Run

    async def job(stores: Stores) -> RunState | None:
        return await stores.runs.load(run_id)

    saved = run_on_stores(store_url(db), job)
    if saved is None:
        raise CommandError(f"no run {run_id} in that store: see `maitre runs list`", code=2)
    if as_json:
        typer.echo(saved.state_json)
        return
    run = Run.from_json(saved.state_json)
    console.print(
        f"[bold]{run.id}[/bold] {run.status} ({run.stop_reason}) steps={run.steps} tokens={run.usage.total_tokens}",
        soft_wrap=True,
    )
    for pending in run.pending:
        console.print(
            f"  waiting: {pending.approval_id} {pending.tool} {json.dumps(pending.arguments)}",
            soft_wrap=True,
            highlight=False,
        )
    for message in run.messages:
        console.print(f"  {message.role}: {json.dumps(message.to_dict(), ensure_ascii=False)[:200]}")
    if run.final_text:
        console.print(run.final_text, style="green", markup=False, highlight=False)


def _build_agent(factory: Any, agent: str, stores: Stores) -> Any:
    from ..agent import Agent

    built = factory(stores)
    if not isinstance(built, Agent):
        raise CommandError(f"--agent {agent} returned a {type(built).__name__}, not an Agent", code=2)
    return built


def _load_factory(agent: str) -> Any:
    from .loader import load_object

    factory = load_object(agent)
    if not callable(factory):
        raise CommandError(
            f"--agent {agent} is a {type(factory).__name__}; name a function that takes the stores "
            "and returns an Agent",
            code=2,
        )
    return factory


@app.command("resume")
def runs_resume(
    run_id: str = typer.Argument(...),
    db: str | None = STORES,
    agent: str = typer.Option(
        ..., "--agent", help="MODULE_OR_FILE:ATTR of a function(stores) -> Agent that continues the run"
    ),
    approve: list[str] = typer.Option([], "--approve", help="Approval ids to approve before resuming"),
    deny: list[str] = typer.Option([], "--deny", help="Approval ids to deny before resuming"),
    approver: str | None = typer.Option(
        None, "--approver", help="A name to record beside your OS account (a claim, not a login)"
    ),
    message: str = typer.Option("denied", "--message", help="Denial message for the model"),
) -> None:
    """Continue a paused run (in this process, from the store), optionally deciding its approvals.

    Decisions are recorded under your OS account, marked via=cli.
    """
    from ..agent import ApprovalDecision
    from .identity import CliApprover

    factory = _load_factory(agent)
    who = CliApprover(approver) if approve or deny else None

    async def job(stores: Stores) -> Any:
        built = _build_agent(factory, agent, stores)
        saved = await stores.runs.load(run_id)
        if saved is None:
            raise CommandError(f"no run {run_id} in that store: see `maitre runs list`", code=2)
        decisions: dict[str, ApprovalDecision] = {}
        for approval_id, yes in [(a, True) for a in approve] + [(d, False) for d in deny]:
            assert who is not None
            request = await built.gate.approvals.get(approval_id)
            if request is None:
                raise CommandError(f"no approval request {approval_id} in that store", code=2)
            who.check(built.gate.policy, request)
            principal = who.principal(request.tenant)
            decisions[approval_id] = (
                ApprovalDecision.approved(principal) if yes else ApprovalDecision.denied(principal, message)
            )
        return await built.resume(run_id, decisions=decisions)

    run = run_on_stores(store_url(db), job)
    console.print(f"{run.id}: {run.status} ({run.stop_reason})", soft_wrap=True)
    if run.final_text:
        console.print(run.final_text, markup=False, highlight=False)
    raise typer.Exit(0 if str(run.status) in ("finished", "paused") else 1)


@app.command("worker")
def runs_worker(
    db: str | None = STORES,
    agent: str = typer.Option(
        ..., "--agent", help="MODULE_OR_FILE:ATTR of a function(stores) -> Agent that continues the runs"
    ),
    once: bool = typer.Option(False, "--once", help="One pass, then exit (print how many runs resumed)"),
    poll: float = typer.Option(1.0, "--poll", min=0.01, help="Seconds between passes"),
    durable: bool = typer.Option(
        False,
        "--durable",
        help="A durable worker (maitre[durable]): also recover a dead worker's runs from their last "
        "recorded step (DBOS)",
    ),
    executor_id: str | None = typer.Option(
        None, "--executor-id", help="With --durable: this worker's executor id, stable across restarts"
    ),
    system_db: str | None = typer.Option(
        None,
        "--system-db",
        help="With --durable: DBOS's database (default: a file or database beside the stores)",
    ),
    name: str = typer.Option("default", "--name", help="With --durable: the durable agent's name"),
    timeout: float = typer.Option(
        30.0, "--timeout", min=0.0, help="With --durable --once: the longest wait for recovered runs"
    ),
) -> None:
    """Resume paused runs by themselves once their approvals are decided (each run once, across workers).

    Also continues a run a killed worker left running. Runs until interrupted (Ctrl-C), printing a
    line per resumed run; with --once, one pass. With --durable (and --executor-id), the worker also
    takes an executor lease and recovers, through DBOS, the runs of workers whose lease has lapsed.
    """
    if durable:
        _durable_worker(store_url(db), agent, executor_id, system_db, name, poll, once, timeout)
        return
    if executor_id is not None or system_db is not None:
        raise CommandError("--executor-id and --system-db need --durable", code=2)
    from ..agent import ResumeWorker, Run

    factory = _load_factory(agent)

    def report(run: Run) -> None:
        console.print(f"{run.id}: {run.status} ({run.stop_reason})", soft_wrap=True, highlight=False)

    async def job(stores: Stores) -> int:
        worker = ResumeWorker(_build_agent(factory, agent, stores), poll_s=poll, on_resume=report)
        if once:
            return len(await worker.run_once())
        err.print(f"resume worker started (a pass every {poll}s; Ctrl-C stops it)", highlight=False)
        await worker.run_forever()
        return 0  # pragma: no cover - run_forever returns only when cancelled

    resumed = run_on_stores(store_url(db), job)
    if once:
        typer.echo(f"resumed {resumed} run{'' if resumed == 1 else 's'}")


def _durable_worker(
    db: str,
    agent: str,
    executor_id: str | None,
    system_db: str | None,
    name: str,
    poll: float,
    once: bool,
    timeout: float,
) -> None:
    """`maitre runs worker --durable`: the same job as `python -m maitre.durable worker`."""
    import anyio

    from .._extras import require

    if not executor_id:
        raise CommandError(
            "--durable needs --executor-id (a name that stays the same across restarts)", code=2
        )
    require("durable", "maitre runs worker --durable")
    from ..durable.worker import run_worker

    async def job() -> tuple[list[str], list[Any], list[str]]:
        return await run_worker(
            db,
            agent,
            executor_id=executor_id,
            system_db=system_db,
            name=name,
            poll_s=poll,
            once=once,
            timeout_s=timeout,
        )

    if not once:
        err.print(f"durable worker {executor_id} started (Ctrl-C stops it)", highlight=False)
    recovered, resumed, waited = anyio.run(job)
    if once:
        typer.echo(
            f"recovered {len(recovered)} workflows, resumed {len(resumed)} runs, waited for {len(waited)}"
        )
