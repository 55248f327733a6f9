"""The seam between each concern and a database: a unit of work, a dialect, schema versions.

Every concern (approvals, idempotency, audit, handles, runs, rate limits, MCP tasks) is written once,
in SQL with `?` placeholders and tables written `{s}.name`, against the `Engine` protocol. An engine
adds only what really differs between databases:

- **the unit of work** (`Engine.transact`): run an async function with a `Tx` inside one
  transaction, committed when it returns and rolled back when it raises. `immediate=True` asks for
  the write lock up front (SQLite `BEGIN IMMEDIATE`), so a read-check-write cannot interleave with
  another process; `Tx.lock(table)` takes a table-wide writer lock where the database has one
  (Postgres `LOCK TABLE ... IN EXCLUSIVE MODE`; SQLite's immediate transaction already holds the
  file's single write lock). Row locking is `Dialect.for_update`, appended to a `SELECT`. Because
  the engine owns the retry (SQLite busy, a lost Postgres connection before anything ran), the unit
  of work must touch the database only through its `Tx`: it may be run again.
- **the dialect** (`Dialect`): placeholder and schema rendering, the few SQL spellings that differ
  (`LEAST` vs `min`, a typed NULL parameter), column types in DDL, and whether `LIMIT` takes NULL.
- **schema management** (`Engine.migrate`): a `maitre_schema (component, version)` table and each
  component's forward migrations (`Schema`), applied under a lock so processes opening one database
  together do not race. A database whose version is newer than the code, or a non-empty database
  with none of maitre's tables, is refused with a one-line `StoreError`.

Several concerns can share one unit of work: `complete` of an idempotency key and the audit append
that records it are written as `complete_in(tx, ...)` / `append_in(tx, ...)`, so a caller holding
the engine can run both in one `transact(..., immediate=True)` (one commit instead of two).

Full-text and vector search are part of the seam (`SearchHooks`) so memory facts and the tool index
can move onto the engine later; no engine implements them yet (memory keeps its own `Backend`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["Dialect", "Engine", "Executor", "Migration", "Schema", "SearchHooks", "Tx"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """How one database spells the few things that differ; used to render portable SQL once."""

    name: str
    """`sqlite` or `postgres`."""
    mark: str
    """The parameter placeholder `?` is rewritten to (`?` or `%s`)."""
    schema_prefix: str
    """What `{s}.` in a table name becomes (`""` for SQLite, `"name".` for Postgres)."""
    least: str
    """The two-argument minimum function (`min` or `LEAST`)."""
    greatest: str
    """The two-argument maximum function (`max` or `GREATEST`)."""
    for_update: str
    """Appended to a `SELECT` that must lock its rows (`""` where the transaction already does)."""
    types: dict[str, str] = field(default_factory=dict)
    """DDL type tokens (`{REAL}`, `{BOOL}`, `{BIGINT}`, `{WITHOUT_ROWID}`) and their spelling."""

    def render(self, sql: str) -> str:
        """Portable SQL (`?`, `{s}.table`, `{least}`, `{greatest}`, type tokens) in this dialect."""
        text = sql.replace("{s}.", self.schema_prefix)
        text = text.replace("{least}", self.least).replace("{greatest}", self.greatest)
        for token, spelling in self.types.items():
            text = text.replace("{" + token + "}", spelling)
        if self.mark != "?":
            text = text.replace("%", "%%").replace("?", self.mark)
        return text


@dataclass(frozen=True, kw_only=True)
class Migration:
    """One forward step of a component's schema: statements run in the migration transaction."""

    version: int
    """The version the schema has once this step ran."""
    statements: Sequence[str] = ()
    """Portable DDL run in every dialect."""
    sqlite: Sequence[str] = ()
    """Statements for SQLite only (after `statements`)."""
    postgres: Sequence[str] = ()
    """Statements for Postgres only (after `statements`)."""
    add_columns: Sequence[tuple[str, str, str]] = ()
    """`(table, column, type)` nullable columns this step adds if they are missing."""


@dataclass(frozen=True, kw_only=True)
class Schema:
    """A component's tables as a list of forward migrations (version 1 creates them)."""

    component: str
    """The row name in `maitre_schema` (`gate`, `mcp_tasks`, later `memory`, `tool_index`)."""
    migrations: Sequence[Migration]
    """In version order, starting at 1."""
    tables: frozenset[str]
    """The tables this component owns (to recognise a database written before `maitre_schema`)."""
    legacy_version: Callable[[frozenset[str], int], int | None] | None = None
    """Given the tables present and the legacy version marker (SQLite `user_version`, Postgres
    `meta.schema_version`, 0 if none), the version a pre-`maitre_schema` database is at, or None."""
    repair_columns: Sequence[tuple[str, str, str]] = ()
    """Nullable columns checked on every open (cheap) and added if missing, whatever the version."""

    @property
    def version(self) -> int:
        """The newest version this code knows."""
        return self.migrations[-1].version


class Executor(Protocol):
    """**Protocol:** what runs statements: a `Tx`, or an `Engine` (each statement autocommitted).

    A concern step written against it (`complete_in`, `append_in`) runs on its own or inside a
    larger unit of work, unchanged."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of one query, or None."""
        ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one query."""
        ...


@runtime_checkable
class Tx(Protocol):
    """**Protocol:** statements inside one unit of work (portable SQL; see `Dialect.render`)."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of one query, or None."""
        ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one query."""
        ...

    async def lock(self, table: str) -> None:
        """Block other writers of `table` until the unit of work ends (readers are not blocked)."""
        ...


@runtime_checkable
class SearchHooks(Protocol):
    """**Protocol (not implemented yet):** what memory facts and the tool index will need from an
    engine: a full-text index (SQLite FTS5 bm25 / Postgres tsvector) and a vector index (BLOBs
    searched in numpy / pgvector). Declared so the engine seam is complete; `memory.Backend` and
    `search.lexical` still carry their own until they move onto the engine."""

    async def lexical(self, tx: Tx, index: str, scope: str, terms: Sequence[str], limit: int) -> list[int]:
        """Row ids in `index` for `scope` matching any term, best first."""
        ...

    async def dense(
        self, tx: Tx, index: str, scope: str, vector: bytes, limit: int
    ) -> list[tuple[int, float]]:
        """(row id, cosine) in `index` for `scope`, best first."""
        ...


@runtime_checkable
class Engine(Protocol):
    """**Protocol:** one database, as the concerns see it."""

    dialect: Dialect
    """How SQL is spelled here."""
    location: str
    """The file or schema, for messages (no password)."""

    async def transact(
        self, op: Callable[[Tx], Awaitable[T]], *, immediate: bool = False, pipeline: bool = False
    ) -> T:
        """Run `op` in one transaction (see the module docstring; `op` may be run more than once).

        `pipeline` is a hint that the statements may be sent together (Postgres pipeline mode);
        an engine without pipelining ignores it."""
        ...

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement in its own transaction; the number of rows it changed."""
        ...

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of one query, or None."""
        ...

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one query."""
        ...

    async def migrate(self, schema: Schema) -> None:
        """Bring `schema` to its newest version (idempotent; safe when processes race)."""
        ...

    async def close(self) -> None:
        """Release every connection. Idempotent."""
        ...
