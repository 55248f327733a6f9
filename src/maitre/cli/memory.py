"""`maitre memory ...`: users see, correct and delete what long-term memory holds about them.

`--db` takes a SQLite file path (the default backend), `sqlite:///path.db`, or
`postgresql://...?schema=NAME` (schema defaults to `maitre_memory`). If the application keys its
tombstones with its own secret, pass the name of the environment variable holding it with
`--secret-env`, so that what is forgotten here stays forgotten there.

`serve` exposes the memory tools (`save_memory`, `search_memory`, `forget_memory`) over MCP on stdio
for one user, every call through the gate. To serve many users over HTTP with authenticated
principals, serve a factory returning `memory_toolbox(store)` with `maitre serve --transport http`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import typer
from rich.table import Table

from ..exceptions import UserError
from .app import App, console, err
from .errors import CommandError

if TYPE_CHECKING:
    from ..memory import MemoryStore

__all__ = [
    "DB",
    "SECRET_ENV",
    "TENANT",
    "USER",
    "app",
    "correct_command",
    "export_command",
    "forget_command",
    "open_memory",
    "serve_command",
    "show_command",
]

app = App(help="See, correct and delete what long-term memory stores about a user.")

DB = typer.Option(..., "--db", help="SQLite file path, sqlite:///path.db or postgresql://...?schema=NAME")
USER = typer.Option(..., "--user", help="The user whose memory to act on")
TENANT = typer.Option("default", "--tenant", help="The user's tenant")
SECRET_ENV = typer.Option(
    None, "--secret-env", help="Environment variable holding the application's tombstone secret"
)


def open_memory(db: str, *, secret_env: str | None = None, create: bool = False) -> MemoryStore:
    """Open the memory store named by a `--db` value (a missing SQLite file is an error unless `create`)."""
    from ..memory import MemoryStore

    secret = None
    if secret_env:
        secret = os.environ.get(secret_env)
        if not secret:
            raise UserError(f"--secret-env {secret_env}: that environment variable is not set.")
    if db.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(db)
        query = dict(parse_qsl(parts.query))
        schema = query.pop("schema", "maitre_memory")
        dsn = urlunsplit(parts._replace(query=urlencode(query)))
        return MemoryStore.postgres(dsn, schema=schema, secret=secret)
    path = db.removeprefix("sqlite:///") if db.startswith("sqlite:///") else db
    if path != ":memory:" and not create and not Path(path).exists():
        raise UserError(f"No memory database at {path}.")
    if path != ":memory:" and Path(path).is_dir():
        raise UserError(f"{path} is a folder: name the memory database file inside it.")
    if path != ":memory:" and not create:
        from .stores import check_existing

        check_existing(path, component="memory")  # never add memory tables to another database
    return MemoryStore.sqlite(path, secret=secret)


def _fail(exc: Exception) -> typer.Exit:
    err.print(f"[red]error:[/red] {exc}", soft_wrap=True, highlight=False, markup=False)
    return typer.Exit(code=2)


def _writable(output: Path) -> Path:
    """`output` when a file can be written there; else a usage error naming what is wrong."""
    if output.is_dir():
        raise CommandError(f"-o {output} is a folder: name a file inside it", code=2)
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise CommandError(f"cannot write {output}: the folder {parent} does not exist", code=2)
    return output


@app.command("export")
def export_command(
    user: str = USER,
    db: str = DB,
    tenant: str = TENANT,
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the JSON to this file"),
    secret_env: str | None = SECRET_ENV,
) -> None:
    """Print (or write) everything stored about a user as JSON: facts with history, summaries, profile."""
    if output is not None:
        _writable(output)
    try:
        with open_memory(db, secret_env=secret_env) as store:
            data = store.export(user, tenant=tenant)
    except UserError as exc:
        raise _fail(exc) from None
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if output is not None:
        output.write_text(text + "\n", encoding="utf-8")
        err.print(f"wrote {len(data['facts'])} facts for {user!r} to {output}")
    else:
        console.print_json(text)


@app.command("show")
def show_command(
    user: str = USER,
    db: str = DB,
    tenant: str = TENANT,
    history: bool = typer.Option(False, "--history", help="Include superseded facts"),
    secret_env: str | None = SECRET_ENV,
    as_json: bool = typer.Option(False, "--json", help="Print the facts as JSON"),
) -> None:
    """Show a user's facts as a table."""
    try:
        with open_memory(db, secret_env=secret_env) as store:
            facts = store.facts(user, tenant=tenant, include_history=history)
    except UserError as exc:
        raise _fail(exc) from None
    if as_json:
        rows = [
            {
                "key": f.key,
                "value": f.value,
                "valid_from": f.valid_from.isoformat(),
                "source": f.source,
                "origin": str(f.origin),
                "status": str(f.status),
                "retracted": f.retracted,
            }
            for f in facts
        ]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"{len(facts)} facts for {user} ({tenant})")
    for column in ("key", "value", "valid from", "source", "origin", "status"):
        table.add_column(column)
    for f in facts:
        value = f.value if not f.retracted else f"(ended) {f.value}".strip()
        table.add_row(f.key, value, f.valid_from.date().isoformat(), f.source, str(f.origin), str(f.status))
    console.print(table)


@app.command("correct")
def correct_command(
    user: str = USER,
    db: str = DB,
    key: str = typer.Option(..., "--key", help="The fact's key, e.g. city"),
    value: str = typer.Option(..., "--value", help="The correct value"),
    tenant: str = TENANT,
    secret_env: str | None = SECRET_ENV,
) -> None:
    """Set the correct value of a fact, as stated by the user now (the old value becomes history)."""
    try:
        with open_memory(db, secret_env=secret_env) as store:
            current = store.write(user, key, value, None, "cli:correct", tenant=tenant, unforget=True)
    except UserError as exc:
        raise _fail(exc) from None
    console.print(f"{key} = {current.value if current else '(none)'}")


@app.command("forget")
def forget_command(
    user: str = USER,
    db: str = DB,
    tenant: str = TENANT,
    key: str | None = typer.Option(None, "--key", help="Forget this key (all its values and history)"),
    value: str | None = typer.Option(None, "--value", help="With --key: forget only this value"),
    everything: bool = typer.Option(False, "--all", help="Forget everything stored about the user"),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation"),
    secret_env: str | None = SECRET_ENV,
) -> None:
    """Delete facts everywhere (rows, history, embeddings, search index, summaries, profile).

    A tombstone (a keyed hash, never the text) keeps the forgotten facts from being extracted again.
    """
    if (key is None) == (not everything):
        raise _fail(UserError("Give either --key KEY (optionally with --value) or --all."))
    if value is not None and key is None:
        raise _fail(UserError("--value needs --key."))
    what = "everything" if everything else (f"{key}={value!r}" if value is not None else f"all of {key!r}")
    if not yes and not typer.confirm(f"Forget {what} for user {user!r} in tenant {tenant!r}?"):
        err.print("nothing deleted")
        raise typer.Exit(code=1)
    try:
        with open_memory(db, secret_env=secret_env) as store:
            if everything:
                report = store.delete_user(user, tenant=tenant)
            else:
                assert key is not None
                report = store.delete(user, key, value, tenant=tenant)
    except UserError as exc:
        raise _fail(exc) from None
    table = Table(title=f"forgot {what} for {user}")
    table.add_column("removed")
    table.add_column("count", justify="right")
    table.add_row("facts (with history, embeddings, search entries)", str(report.facts))
    table.add_row("summaries built from them", str(report.summaries_removed))
    table.add_row("profile rebuilt", "yes" if report.profile_rebuilt else "no")
    table.add_row("tombstones written", str(report.tombstones))
    console.print(table)
    if report.facts == 0:
        raise typer.Exit(code=1)


@app.command("serve")
def serve_command(
    user: str = USER,
    db: str = DB,
    tenant: str = TENANT,
    secret_env: str | None = SECRET_ENV,
) -> None:
    """Serve this user's memory tools over MCP on stdio (creates the SQLite file if needed)."""
    import anyio

    from ..mcp.app import MCPApp
    from ..mcp.server import GovernedServer, ServerOptions
    from ..mcp.transports import serve_stdio
    from ..memory import memory_toolbox
    from ..types import Principal

    try:
        store = open_memory(db, secret_env=secret_env, create=True)
    except UserError as exc:
        raise _fail(exc) from None
    server = GovernedServer(
        MCPApp(memory_toolbox(store), name="maitre-memory"),
        ServerOptions(principal=Principal(user=user, tenant=tenant)),
    )
    try:
        anyio.run(serve_stdio, server)
    finally:
        store.close()
