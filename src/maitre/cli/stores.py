"""Which store a command uses, and the check that a command reading one never creates or alters it.

`--stores URL` (alias `--db`) wins; else `[stores] url` from the configuration file; else the
command says how to name one. A SQLite path is a file path, `sqlite:///path.db` or
`sqlite://rel/path.db`; Postgres is `postgresql://...[?schema=NAME]` (schema `maitre` by default).

Opening the stores creates a missing SQLite file (and its folder) and adds the gate's tables to any
database it is given; that is right for `maitre serve` and wrong for `maitre audit verify --db
typo.db`. So the commands that read or decide (`audit`, `approvals`, `runs`) first run
`check_existing`, which looks without writing: the file must exist, be SQLite, and hold maitre's
gate tables; a Postgres schema must exist and hold them. Only then are the stores opened.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import typer

from .app import settings
from .errors import CommandError

if TYPE_CHECKING:
    from ..stores import Stores

__all__ = ["STORES", "check_existing", "run_on_stores", "sqlite_path", "store_url"]

T = TypeVar("T")

STORES = typer.Option(
    None,
    "--stores",
    "--db",
    help="The stores: a SQLite file, sqlite:///path.db or postgresql://...?schema=NAME "
    "(default: [stores] url in maitre.toml)",
    show_default=False,
)


def store_url(flag: str | None) -> str:
    """The store URL for this command: the flag, else the configuration file's."""
    from ..config import check_store_url

    if flag:
        try:
            return check_store_url(flag)
        except ValueError as exc:
            raise CommandError(str(exc), code=2) from None
    config = settings()
    if config.config.stores.url:
        return config.store_url(config.config.stores.url)
    raise CommandError(
        "no store given: pass --stores PATH_OR_URL (the file or database `maitre serve` uses), "
        'or set stores = "..." in maitre.toml',
        code=2,
    )


def sqlite_path(url: str) -> str | None:
    """The file path of a SQLite store URL; None for Postgres or memory://."""
    if url.startswith(("postgresql://", "postgres://")) or url in ("memory://", "memory:", ":memory:"):
        return None
    if url.startswith("sqlite://"):
        parts = urlsplit(url)
        return parts.netloc + parts.path
    return url


_LEGACY_TABLES = {"gate": {"approvals", "audit"}, "memory": {"memory_facts"}}
"""Tables that mark a database written before `maitre_schema`, per component."""
_WHAT = {"gate": "the gate's stores", "memory": "long-term memory"}
_WRITER = {
    "gate": "`maitre serve` (or your app's Gate)",
    "memory": "your app's MemoryStore (or `maitre memory serve`)",
}


def check_existing(url: str, *, component: str = "gate") -> None:
    """Refuse, without creating or changing anything, a store that is not there or not maitre's.

    `component` is what the database must hold: `gate` (approvals, audit, runs, ...) or `memory`.
    """
    if url in ("memory://", "memory:", ":memory:"):
        raise CommandError(
            "memory:// keeps nothing between processes; name the store the server or app uses", code=2
        )
    path = sqlite_path(url)
    if path is None:
        if component == "gate":
            _check_postgres(url)
    else:
        _check_sqlite(path, component)


def _connect_without_creating(path: Path) -> sqlite3.Connection:
    # mode=rw never creates the file; a read-write connection (that only reads) also removes the
    # WAL side files on close. A file we may not write is still looked at, read-only.
    uri = f"file:{quote(str(path.resolve()))}"
    try:
        return sqlite3.connect(f"{uri}?mode=rw", uri=True)
    except sqlite3.OperationalError:
        return sqlite3.connect(f"{uri}?mode=ro", uri=True)


def _check_sqlite(path_text: str, component: str = "gate") -> None:
    path = Path(path_text)
    if not path.exists():
        raise CommandError(
            f"no maitre database at {path_text}: check the path, or point at the file "
            f"{_WRITER[component]} writes",
            code=2,
        )
    if path.is_dir():
        raise CommandError(f"{path_text} is a folder: name the database file inside it", code=2)
    try:
        con = _connect_without_creating(path)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            components = (
                {row[0] for row in con.execute("SELECT component FROM maitre_schema")}
                if "maitre_schema" in tables
                else set()
            )
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise CommandError(
            f"{path_text} is not a usable SQLite database ({exc}): it is damaged or not a database; "
            "restore it from a backup or check the path",
            code=1,
        ) from None
    if component in components or _LEGACY_TABLES[component] <= tables:
        return
    if components:
        held = ", ".join(sorted(components))
        raise CommandError(
            f"{path_text} is a maitre database without {_WHAT[component]} (it holds: {held}); "
            f"point at the file {_WRITER[component]} uses",
            code=2,
        )
    raise CommandError(
        f"{path_text} is not a maitre database (no maitre tables in it); check the path", code=2
    )


def _check_postgres(url: str) -> None:
    from .._extras import import_optional

    psycopg = import_optional("psycopg", extra="postgres", feature="a postgresql:// store")
    from psycopg import sql

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for key, value in query if key == "schema"), "maitre")
    dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
    quoted = '"' + schema.replace('"', '""') + '"'
    with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as con:
        row = con.execute(
            "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
            (f"{quoted}.maitre_schema", f"{quoted}.approvals"),
        ).fetchone()
        versioned, legacy = row if row is not None else (False, False)
        if versioned:
            statement = sql.SQL("SELECT 1 FROM {}.maitre_schema WHERE component = %s").format(
                sql.Identifier(schema)
            )
            gate = con.execute(statement, ("gate",)).fetchone()
            if gate is not None:
                return
        elif legacy:
            return
    raise CommandError(
        f"no maitre stores in schema {schema!r} of that database: check ?schema= in the URL "
        "(default maitre), or point --stores at the database `maitre serve` uses",
        code=2,
    )


def run_on_stores(url: str, job: Callable[[Stores], Awaitable[T]], *, existing: bool = True) -> T:
    """Open the stores at `url` (checked first unless `existing` is False), run `job`, close them."""
    import anyio

    from ..stores import open_stores

    if existing:
        check_existing(url)

    async def main() -> T:
        async with await open_stores(url) as stores:
            return await job(stores)

    return anyio.run(main)
