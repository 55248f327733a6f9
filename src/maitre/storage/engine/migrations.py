"""Forward migrations, written once for every engine: what version a database is at, and the steps.

An engine calls `apply_schema` inside one transaction that it has made exclusive (SQLite
`BEGIN IMMEDIATE`, Postgres an advisory lock), handing it an `Introspection` of its catalogue. The
rules, in order:

1. The legacy marker (SQLite `PRAGMA user_version`, Postgres `<schema>.meta.schema_version`) newer
   than the code: refused. The gate component keeps writing it, so a maitre older than the version
   table refuses a database this code wrote instead of misreading it.
2. A `maitre_schema` row for the component: that is the version (newer than the code: refused).
3. No row: a database written before `maitre_schema` existed is recognised by its tables and the
   legacy marker (`Schema.legacy_version`); a database with only other maitre components' tables
   (or none) starts at 0; a database with tables and nothing of maitre's is refused, since writing
   our tables into somebody else's database is never what was meant.
4. Every migration above the version runs (a step's `upgrade` statements only when the database
   had the component before), then `repair_columns` (nullable columns, checked on
   every open because a column can be dropped by hand) and the row is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from maitre.exceptions import StoreError
from maitre.storage.engine.base import Dialect, Schema, Tx

__all__ = ["Introspection", "VERSION_TABLE", "apply_schema", "is_maitre_table", "newer_error"]

VERSION_TABLE = "maitre_schema"

_MAITRE_TABLES = frozenset(
    {"approvals", "idempotency", "audit", "handles", "runs", "rate_limits", "meta", VERSION_TABLE}
)


def is_maitre_table(name: str) -> bool:
    """True for a table some maitre component creates (gate tables, `maitre_*`, `memory_*`)."""
    return name in _MAITRE_TABLES or name.startswith(("maitre_", "memory_"))


@dataclass(kw_only=True)
class Introspection:
    """What an engine can tell about its own catalogue, inside the migration transaction."""

    tables: Callable[[Tx], Awaitable[frozenset[str]]]
    """The user tables present (the engine's internal tables left out)."""
    columns: Callable[[Tx, str], Awaitable[frozenset[str]]]
    """The columns of one table."""
    legacy_marker: Callable[[Tx], Awaitable[int]]
    """The pre-`maitre_schema` version marker (0 when there is none)."""
    set_legacy_marker: Callable[[Tx, int], Awaitable[None]]
    """Store the gate's version in the legacy marker."""


def newer_error(location: str, component: str, found: int, known: int) -> StoreError:
    """The one-line refusal of a database written by a newer maitre."""
    return StoreError(
        f"{location} has schema version {found} ({component}); this maitre knows {known}: "
        "upgrade maitre to open it"
    )


async def apply_schema(
    tx: Tx, schema: Schema, *, dialect: Dialect, location: str, introspect: Introspection
) -> int:
    """Migrate `schema` forward inside `tx` (see the module docstring); returns the version before."""
    marker = await introspect.legacy_marker(tx)
    if schema.component == "gate" and marker > schema.version:
        raise newer_error(location, schema.component, marker, schema.version)
    present = await introspect.tables(tx)
    version: int | None = None
    if VERSION_TABLE in present:
        row = await tx.fetchone(
            f"SELECT version FROM {{s}}.{VERSION_TABLE} WHERE component = ?", (schema.component,)
        )
        version = None if row is None else int(row[0])
    if version is None:
        legacy = schema.legacy_version(present, marker) if schema.legacy_version is not None else None
        if legacy is None and present and not any(is_maitre_table(name) for name in present):
            raise StoreError(
                f"{location} is not a maitre database (it has tables {', '.join(sorted(present)[:5])} "
                "and no maitre schema version): point maitre at a new file or schema"
            )
        version = legacy or 0
    if version > schema.version:
        raise newer_error(location, schema.component, version, schema.version)
    before = version
    if version < schema.version:
        await tx.execute(
            f"CREATE TABLE IF NOT EXISTS {{s}}.{VERSION_TABLE} "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        for step in schema.migrations:
            if step.version <= version:
                continue
            own = step.sqlite if dialect.name == "sqlite" else step.postgres
            for statement in (*step.statements, *own, *(step.upgrade if before >= 1 else ())):
                await tx.execute(statement)
            await _add_columns(tx, step.add_columns, introspect)
        await tx.execute(
            f"INSERT INTO {{s}}.{VERSION_TABLE} (component, version) VALUES (?, ?) "
            "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            (schema.component, schema.version),
        )
        if schema.component == "gate":
            await introspect.set_legacy_marker(tx, schema.version)
    await _add_columns(tx, schema.repair_columns, introspect)
    return before


async def _add_columns(tx: Tx, columns: Sequence[tuple[str, str, str]], introspect: Introspection) -> None:
    for table, column, kind in columns:
        if column not in await introspect.columns(tx, table):
            await tx.execute(f"ALTER TABLE {{s}}.{table} ADD COLUMN {column} {kind}")
