"""What a memory backend must provide: transactions, one schema, a lexical and a vector index.

`MemoryStore` owns every rule (conflicts, deletion, profile, fusion) and talks to the database
through this narrow seam, in portable SQL with `?` placeholders (the Postgres backend rewrites them).
A backend adds only what differs: how to lock and begin a write transaction across processes, the
full-text index (SQLite FTS5 bm25 / Postgres tsvector), where vectors live (a BLOB searched with
numpy, or pgvector), and how to make deleted bytes really go away afterwards.

The lexical and vector indexes hold **current facts only**: retrieval never needs history, and a
superseded fact leaves both indexes in the transaction that supersedes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from .persistence import COMMON_SCHEMA

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Backend", "COMMON_SCHEMA", "Db"]


class Db(Protocol):
    """A connection inside a transaction (or a read snapshot)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement with `?` placeholders; return all rows (empty for DML without RETURNING)."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for many parameter rows."""
        ...


class Backend(Protocol):
    """The database-specific half of a memory store."""

    kind: str
    """`sqlite` or `postgres`."""
    native_vectors: bool
    """True if the database ranks vectors itself (pgvector); else the store uses `VectorCache`."""
    location: str
    """Human-readable location (path or DSN without password) for messages."""

    def setup(self, dim: int) -> None:
        """Create the schema (idempotent, safe under concurrent first use)."""
        ...

    def read(self) -> AbstractContextManager[Db]:
        """A connection for reads."""
        ...

    def write(self, locks: Sequence[str]) -> AbstractContextManager[Db]:
        """A write transaction that holds `locks` (strings) against other processes; commits on exit."""
        ...

    def index(self, db: Db, rows: Sequence[tuple[int, str, str, str, NDArray[np.float32]]]) -> None:
        """Add current facts `(seq, tenant, user, text, vector)` to the lexical and vector indexes."""
        ...

    def unindex(self, db: Db, rows: Sequence[tuple[int, str, str, str]]) -> None:
        """Remove facts `(seq, tenant, user, text)` from both indexes (text as it was indexed)."""
        ...

    def lexical(self, db: Db, tenant: str, user: str, terms: list[str], limit: int) -> list[int]:
        """Seqs of the user's current facts matching any term, best first."""
        ...

    def dense(
        self, db: Db, tenant: str, user: str, query: NDArray[np.float32], limit: int
    ) -> list[tuple[int, float]]:
        """(seq, cosine) of the user's current facts, best first (only if `native_vectors`)."""
        ...

    def load_vectors(self, db: Db, tenant: str, user: str, dim: int) -> tuple[list[int], list[bytes]]:
        """All (seqs, float32 blobs) of the user's current facts (only if not `native_vectors`)."""
        ...

    def purge(self, db: Db) -> None:
        """Inside a deletion transaction: drop index remnants of deleted rows (e.g. FTS5 optimize)."""
        ...

    def after_delete(self) -> None:
        """After a deletion committed: schedule making freed bytes unreachable (WAL checkpoint, VACUUM).

        Must return at once: a reader may legitimately hold a snapshot from before the deletion, and
        the erasure has to wait for it, the deletion must not. A backend may also offer
        `wait_erased(timeout) -> bool`, which `MemoryStore.wait_erased` uses when present."""
        ...

    def close(self) -> None:
        """Close every connection this backend opened."""
        ...
