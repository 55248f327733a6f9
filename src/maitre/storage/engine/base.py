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

Full-text and vector search are part of the seam (`SearchHooks`): each engine module implements
them once (FTS5 + BLOB vectors; tsvector + pgvector or BYTEA), and memory's persistence
(`maitre.memory.persistence`) is written over them.
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
    upgrade: Sequence[str] = ()
    """Portable statements run only when the database already had this component (it was at
    version 1 or later before this step): how an upgrade marks data that the new code must still
    read in its old form. A new database never runs them."""


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
    """**Protocol:** a scoped hybrid index in one database: full text and vectors.

    An index is named by a prefix (`memory`); its rows are keyed by an integer (the owner's row id),
    belong to one scope (tenant, user), and carry a text and a float32 vector (little-endian bytes).
    The engine chooses the tables: SQLite keeps an FTS5 table `<index>_fts` (bm25) and the vectors
    as BLOBs in `<index>_vectors`, ranked by the caller in numpy (`native_vectors` is False);
    Postgres keeps one table `<index>_index` with a `tsvector` (ts_rank_cd) and the vector as
    pgvector's `vector(dim)` when the extension is there (ranked in SQL, `dense`) or a BYTEA.
    Implemented by `SQLiteSearch` and `PostgresSearch` (`SQLiteEngine.search`,
    `PostgresEngine.search`); the statements run on any `Tx`, so a caller on its own synchronous
    connection can drive them too (memory does)."""

    def index_ddl(self, index: str, *, dim: int, native_vectors: bool) -> list[str]:
        """The portable statements that create the index's tables (idempotent where the database can)."""
        ...

    async def add(
        self, tx: Tx, index: str, rows: Sequence[tuple[int, str, str, str, bytes]], *, native_vectors: bool
    ) -> None:
        """Index rows `(key, tenant, user, text, float32 bytes)`."""
        ...

    async def remove(self, tx: Tx, index: str, keys: Sequence[int]) -> None:
        """Drop rows from the text and the vector index."""
        ...

    async def lexical(
        self,
        tx: Tx,
        index: str,
        tenant: str,
        user: str,
        terms: Sequence[str],
        limit: int,
        *,
        rows_table: str | None = None,
    ) -> list[int]:
        """Keys in the scope matching any term, best first. `rows_table` (with `seq`, `tenant`,
        `user_id`, `status`) is joined to keep current rows of that scope where the text index
        does not hold the scope exactly (SQLite's scope token is a hash)."""
        ...

    async def dense(
        self, tx: Tx, index: str, tenant: str, user: str, vector: bytes, limit: int
    ) -> list[tuple[int, float]]:
        """(key, cosine) in the scope, best first: only with native vectors (pgvector)."""
        ...

    async def load_vectors(self, tx: Tx, index: str, tenant: str, user: str) -> tuple[list[int], list[bytes]]:
        """Every (key, float32 bytes) of the scope, for an exact scan in numpy."""
        ...

    async def purge(self, tx: Tx, index: str) -> None:
        """Inside a deletion: drop what the text index keeps of removed rows (FTS5 `optimize`)."""
        ...


@runtime_checkable
class Engine(Protocol):
    """**Protocol:** one database, as the concerns see it."""

    dialect: Dialect
    """How SQL is spelled here."""
    location: str
    """The file or schema, for messages (no password)."""
    commits_inline: bool
    """True when `transact` runs to its end without suspending (SQLite): a concern that wants
    concurrent callers to share a transaction (group commit) must yield to the loop first."""

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
