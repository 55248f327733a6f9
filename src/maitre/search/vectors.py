"""Tool vectors kept on disk, so a process opens a large tool index without re-embedding it.

Embedding is what makes building a tool index slow (about 3 minutes for 2,000 tools on a 2-core
machine); everything else takes well under a second. `VectorCache` is a SQLite file of
`key -> float32 vector`, where the key is the SHA-256 of the embedder's identity and the exact text
embedded for a tool. That text is a function of the tool's definition (name, description,
parameters and the index's text settings), so the key is a definition hash: a changed definition,
another embedder or another text recipe misses and is embedded afresh, and an unchanged tool is
read back in microseconds, in this process or any later one. Several processes may share the file
(SQLite WAL mode, a busy timeout); a vector is written once and never updated in place, so a reader
never sees half a row.

The file holds no tool names or descriptions - only hashes and vectors - and stale rows cost disk
only (`prune` drops the rows no live index uses, when the caller wants to).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..embeddings import Embedder

__all__ = ["VectorCache", "embedder_identity", "vector_key"]

log = logging.getLogger(__name__)

_SCHEMA_VERSION = "1"
_LOOKUP_CHUNK = 500  # SQLite's default limit on host parameters is 999 (older builds)


def embedder_identity(embedder: Embedder) -> str:
    """What distinguishes one embedder's vectors from another's: its `name` (or class) and `dim`."""
    name = getattr(embedder, "name", None) or f"{type(embedder).__module__}.{type(embedder).__qualname__}"
    return f"{name}/{embedder.dim}"


def vector_key(identity: str, text: str) -> bytes:
    """The cache key of `text` embedded by the embedder with this identity (32 bytes)."""
    return hashlib.sha256(f"{_SCHEMA_VERSION}\0{identity}\0{text}".encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """A SQLite file of embedded texts' vectors, shared by processes; thread-safe.

    Args:
        path: the database file (created with its folder when missing).
        dim: the vectors' length; a stored vector of another length is ignored (and re-embedded).
    """

    def __init__(self, path: str | Path, *, dim: int) -> None:
        self.path = Path(path)
        self.dim = dim
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID"
        )
        self.hits = 0
        """Vectors found since this cache was opened."""
        self.misses = 0
        """Keys looked up and not found since this cache was opened."""

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, NDArray[np.float32]]:
        """The stored vectors of those keys that are present."""
        found: dict[bytes, NDArray[np.float32]] = {}
        width = self.dim * 4
        with self._lock:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = list(keys[start : start + _LOOKUP_CHUNK])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk)
                for key, blob in rows:
                    if len(blob) == width:
                        found[key] = np.frombuffer(blob, dtype=np.float32)
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def put_many(self, items: Iterable[tuple[bytes, NDArray[np.float32]]]) -> None:
        """Store vectors (a key already present keeps its vector: same key, same text, same model)."""
        rows = [(key, np.ascontiguousarray(vector, dtype=np.float32).tobytes()) for key, vector in items]
        if not rows:
            return
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("INSERT OR IGNORE INTO vectors (key, vector) VALUES (?, ?)", rows)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:  # a full disk or a locked file must not break indexing
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                log.warning("tool vectors not saved to %s: %s", self.path, exc)

    def prune(self, keep: Iterable[bytes]) -> int:
        """Delete every vector whose key is not in `keep`; returns how many were deleted."""
        wanted = set(keep)
        with self._lock:
            stale = [(k,) for (k,) in self._db.execute("SELECT key FROM vectors") if k not in wanted]
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM vectors WHERE key = ?", stale)
            self._db.execute("COMMIT")
        return len(stale)

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT count(*) FROM vectors").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"VectorCache({str(self.path)!r}, dim={self.dim})"
