"""Exact nearest-neighbour search over one user's current facts, with numpy.

The Python here cannot load SQLite extensions (RECIPES.md 10), and the Postgres at hand may not
have pgvector, so vectors are stored as little-endian float32 BLOBs and searched exactly with a
matrix-vector product. Retrieval is always scoped to one (tenant, user), whose current facts number
in the thousands or tens of thousands: an exact scan of 10,000 x 384 floats takes well under a
millisecond, so an approximate index would add recall loss (and a filtered-ANN problem) for no gain.

Reading 10,000 BLOBs per query would cost more than the search, so each user's matrix is cached in
process. The cache is keyed by a per-user version counter that every write transaction bumps in the
database: a query compares the counter (one indexed read). A writer in this process applies its own
change to the cached matrix (append / deactivate a row). The cache is bounded by a total row count
and evicts whole users least-recently-used first.

*Several processes on one file* (issue 16): another process's write used to make every reader
reload the user's whole matrix (7.4x slower at 100,000 facts), and a new process read every BLOB
before its first answer (8.6 s). Now every write transaction also logs which rows it added and
removed (`memory_vector_log`, one row per version, no text); a reader behind by a few versions
reads just those rows (`parse_log`, `retrieval.dense_search`) and reloads only when the log cannot
say (pruned past it, or a reindex). And a large user's matrix is persisted as a snapshot file keyed
by the version it is at (`VectorSnapshots`), memory-mapped by the next process and brought up to
date from the log. A forget overwrites the forgotten rows of the snapshot in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["VectorCache", "VectorSnapshots", "decode_vector", "encode_vector", "parse_log", "vector_scope"]


def encode_vector(vec: NDArray[np.float32]) -> bytes:
    """float32 little-endian bytes (the BLOB / BYTEA stored per fact)."""
    return np.asarray(vec, dtype="<f4").tobytes()


def decode_vector(blob: bytes, dim: int) -> NDArray[np.float32]:
    """Inverse of `encode_vector`."""
    return np.frombuffer(blob, dtype="<f4", count=dim).astype(np.float32)


class _UserVectors:
    """A growable matrix of one user's vectors; rows are deactivated, not moved.

    The matrix may start as a read-only memory map of a snapshot file (`VectorSnapshots`): it is
    searched in place, and copied into a growable buffer only when a row is added."""

    def __init__(self, seqs: NDArray[np.int64], matrix: NDArray[np.float32]) -> None:
        n, dim = matrix.shape
        if isinstance(matrix, np.memmap) or not matrix.flags.writeable:
            self.buf = matrix  # searched in place; `add` copies it on first growth
        else:
            cap = max(16, n + n // 4)
            self.buf = np.zeros((cap, dim), dtype=np.float32)
            self.buf[:n] = matrix
        self.seqs = np.full(len(self.buf), -1, dtype=np.int64)
        self.seqs[:n] = seqs
        self.n = n
        self.active = n
        self.row = {int(s): i for i, s in enumerate(seqs.tolist())}

    def add(self, seq: int, vec: NDArray[np.float32]) -> None:
        if seq in self.row:
            return
        if self.n == len(self.buf) or not self.buf.flags.writeable:
            self._grow()
        self.buf[self.n] = vec
        self.seqs[self.n] = seq
        self.row[seq] = self.n
        self.n += 1
        self.active += 1

    def remove(self, seq: int) -> None:
        i = self.row.pop(seq, None)
        if i is None:
            return
        self.seqs[i] = -1
        if self.buf.flags.writeable:
            self.buf[i] = 0.0
        self.active -= 1
        if self.n > 64 and self.active < self.n // 2:
            self._compact()

    def _grow(self) -> None:
        bigger = np.zeros((max(16, len(self.buf) * 2), self.buf.shape[1]), dtype=np.float32)
        bigger[: self.n] = self.buf[: self.n]
        seqs = np.full(len(bigger), -1, dtype=np.int64)
        seqs[: self.n] = self.seqs[: self.n]
        self.buf, self.seqs = bigger, seqs

    def _compact(self) -> None:
        keep = self.seqs[: self.n] >= 0
        seqs, matrix = self.seqs[: self.n][keep], np.array(self.buf[: self.n][keep], dtype=np.float32)
        self.__init__(seqs, matrix)  # type: ignore[misc]

    def search(
        self, query: NDArray[np.float32], limit: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        if self.active == 0:
            return []
        # einsum, not `@`: a matrix-vector product this small is memory-bound, and OpenBLAS would
        # spread it over threads that, on a busy host, wait for cores (15 ms instead of 1.5 ms here).
        sims = np.einsum("ij,j->i", self.buf[: self.n], query)
        seqs = self.seqs[: self.n]
        dead = seqs < 0
        if allowed is not None:
            dead |= ~np.isin(seqs, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
        sims[dead] = -np.inf
        live = int(self.n - int(dead.sum()))
        limit = min(limit, live)
        if limit <= 0:
            return []
        top = np.argpartition(-sims, limit - 1)[:limit] if limit < self.n else np.arange(self.n)
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(int(seqs[i]), float(sims[i])) for i in top if seqs[i] >= 0 and sims[i] > -np.inf]

    def matrix(self) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """The live rows (for a snapshot)."""
        keep = self.seqs[: self.n] >= 0
        return self.seqs[: self.n][keep], np.asarray(self.buf[: self.n][keep], dtype=np.float32)


class VectorCache:
    """Per-(tenant, user) vector matrices, validated against the database's version counter."""

    def __init__(self, max_vectors: int = 200_000) -> None:
        self._max = max_vectors
        self._lock = threading.Lock()
        self._users: OrderedDict[str, tuple[int, _UserVectors]] = OrderedDict()
        self._total = 0

    def search(
        self,
        scope: str,
        version: int,
        query: NDArray[np.float32],
        limit: int,
        allowed: set[int] | None = None,
    ) -> list[tuple[int, float]] | None:
        """Top `limit` (seq, cosine) for the scope (among `allowed` seqs if given), or None if the
        cache is missing or stale."""
        with self._lock:
            entry = self._users.get(scope)
            if entry is None or entry[0] != version:
                return None
            self._users.move_to_end(scope)
            return entry[1].search(query, limit, allowed)

    def version_of(self, scope: str) -> int | None:
        """The version the scope's cached matrix is at, or None if it is not cached."""
        with self._lock:
            entry = self._users.get(scope)
            return None if entry is None else entry[0]

    def rows(self, scope: str) -> tuple[int, NDArray[np.int64], NDArray[np.float32]] | None:
        """(version, seqs, matrix) of the scope's live rows, for writing a snapshot."""
        with self._lock:
            entry = self._users.get(scope)
            if entry is None:
                return None
            seqs, matrix = entry[1].matrix()
            return entry[0], seqs, matrix

    def put(self, scope: str, version: int, seqs: NDArray[np.int64], matrix: NDArray[np.float32]) -> None:
        """Install a freshly loaded matrix for the scope at `version`."""
        with self._lock:
            self._drop(scope)
            if len(seqs) > self._max:
                return
            self._users[scope] = (version, _UserVectors(seqs, matrix))
            self._total += len(seqs)
            while self._total > self._max and len(self._users) > 1:
                oldest = next(iter(self._users))
                self._drop(oldest)

    def apply(
        self,
        scope: str,
        old_version: int,
        new_version: int,
        added: list[tuple[int, NDArray[np.float32]]],
        removed: list[int],
    ) -> None:
        """Apply this process's own committed change; drops the entry if it was not at `old_version`."""
        with self._lock:
            entry = self._users.get(scope)
            if entry is None:
                return
            if entry[0] != old_version:
                self._drop(scope)
                return
            users = entry[1]
            before = users.active
            for seq in removed:
                users.remove(seq)
            for seq, vec in added:
                users.add(seq, vec)
            self._total += users.active - before
            self._users[scope] = (new_version, users)

    def invalidate(self, scope: str | None = None) -> None:
        """Forget one scope, or everything."""
        with self._lock:
            if scope is None:
                self._users.clear()
                self._total = 0
            else:
                self._drop(scope)

    def _drop(self, scope: str) -> None:
        entry = self._users.pop(scope, None)
        if entry is not None:
            self._total -= entry[1].active


def parse_log(
    rows: Sequence[tuple[Any, ...]], since: int, until: int, kind: str
) -> tuple[list[int], list[int]] | None:
    """Net (added, removed) seqs of one kind (`f` facts, `e` episodes) between two versions.

    `rows` are `memory_vector_log` rows `(version, added, removed)` with `since < version <= until`.
    None when the log cannot say (a version is missing, it was pruned, or a reindex reset it): the
    caller then reloads the whole matrix."""
    if len(rows) != until - since:
        return None
    added: dict[int, None] = {}
    removed: set[int] = set()
    for _, plus, minus in sorted(rows, key=lambda r: int(r[0])):
        if plus == "*":
            return None
        for token in minus.split():
            if token[0] == kind:
                seq = int(token[1:])
                if seq in added:
                    del added[seq]
                else:
                    removed.add(seq)
        for token in plus.split():
            if token[0] == kind:
                seq = int(token[1:])
                removed.discard(seq)
                added[seq] = None
    return list(added), sorted(removed)


_MAGIC = b"MAITREV2"
_OLD_MAGICS = (b"MAITREV1",)
_KEY_DIGEST = 16
_HEADER = 8 + _KEY_DIGEST + 24  # magic, key digest, then version, rows, dim: 8 bytes each
_STALE_TMP_S = 60.0
"""A temporary snapshot file this old was left by a writer that died before its rename."""


def vector_scope(tenant: str, user: str, kind: str) -> str:
    """The cache and snapshot key of one (tenant, user)'s vectors of one kind (`f`, `e`, `w`).

    Length-prefixed, so no two (tenant, user) pairs share one: joining them with a separator let
    tenant `a` / user `b\x1fc` and tenant `a\x1fb` / user `c` read each other's cached matrix."""
    return f"{kind}:{len(tenant)}:{tenant}:{len(user)}:{user}"


def _key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:_KEY_DIGEST]


class VectorSnapshots:
    """Per-scope vector matrices persisted as files and memory-mapped: a cold start reads no BLOBs.

    One file per (scope, kind) in `directory`, `<sha256>.vec`: a 48-byte header (magic, a digest of the
    scope key, the user's version counter the matrix is at, rows, dim), the seqs (int64) and the matrix (float32), so one
    `np.memmap` opens 100,000 rows in well under a millisecond, and the search reads the pages it
    needs from the OS page cache, shared by every process on the host. The version in the header
    keys it: a reader applies the vector log from there (`parse_log`), or reloads if the log has
    been pruned past it. Files are written to a temporary name and renamed, so a reader never sees a
    half-written one, and several processes can write them.

    Forgetting must reach these copies too: after a deletion commits, `zero` overwrites the rows of
    the deleted seqs in place (any process mapping the file sees zeros), and a writer that renames a
    new snapshot zeroes the rows deleted after the version it was built at (`zero` again), so a
    deletion racing a snapshot still reaches it.

    A file is trusted only as far as its header agrees with it: the key digest must be this
    scope's (a file copied from another user's name is not read), and the file's size must be
    exactly what the header's rows and dim say (a truncated or tampered file is not read, and a
    header claiming 2**60 rows allocates nothing). Any other file is removed, so the next full
    load writes a good one: files of an older layout (`MAITREV1`, keyed by a scope token that two
    (tenant, user) pairs could share) go when the directory is first used."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._swept = False

    def path(self, key: str) -> Path:
        return self.directory / (
            hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".vec"
        )

    def _header(self, fh: Any, key: str, size: int) -> tuple[int, int, int] | None:
        """(version, rows, dim) if the open file's header is this key's and matches its size."""
        header = fh.read(_HEADER)
        if len(header) < _HEADER or header[:8] != _MAGIC or header[8 : 8 + _KEY_DIGEST] != _key_digest(key):
            return None
        version, rows, dim = struct.unpack("<qqq", header[8 + _KEY_DIGEST :])
        if rows < 0 or dim <= 0 or size != _HEADER + rows * (8 + 4 * dim):
            return None
        return version, rows, dim

    def _sweep(self) -> None:
        """Once per directory: remove snapshot files of an older layout (never read again) and
        stale temporary files (`sweep_temporary`)."""
        if self._swept:
            return
        self._swept = True
        for path in self.directory.glob("*.vec"):
            with contextlib.suppress(OSError), path.open("rb") as fh:
                magic = fh.read(8)
            with contextlib.suppress(OSError):
                if magic in _OLD_MAGICS:
                    path.unlink()
        self.sweep_temporary()

    def sweep_temporary(self, older_than_s: float = _STALE_TMP_S) -> int:
        """Remove temporary files a killed writer left (`save` renames its own at once): they hold
        vectors that no forget would ever zero. Returns how many were removed."""
        cutoff = time.time() - older_than_s
        removed = 0
        for path in self.directory.glob("*.tmp"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
        return removed

    def load(self, key: str, dim: int) -> tuple[int, NDArray[np.int64], NDArray[np.float32]] | None:
        """(version, seqs, read-only mapped matrix) of the scope's snapshot, or None.

        A file that is not this scope's valid snapshot is removed (the next full load rewrites it)."""
        self._sweep()
        path = self.path(key)
        try:
            with path.open("rb") as fh:
                header = self._header(fh, key, os.fstat(fh.fileno()).st_size)
                if header is None:
                    fh.close()
                    self.remove(key)
                    return None
                if header[2] != dim:  # another embedder's (a reindex removes those)
                    return None
                version, rows, _ = header
                seqs = np.frombuffer(fh.read(8 * rows), dtype="<i8").astype(np.int64)
            if len(seqs) != rows:
                return None
            if rows == 0:
                return version, seqs, np.zeros((0, dim), dtype=np.float32)
            matrix = np.memmap(path, dtype="<f4", mode="r", offset=_HEADER + 8 * rows, shape=(rows, dim))
        except (OSError, ValueError, OverflowError, MemoryError, struct.error):
            return None
        return version, seqs, matrix

    def save(self, key: str, version: int, seqs: NDArray[np.int64], matrix: NDArray[np.float32]) -> Path:
        """Write the scope's snapshot atomically (temporary file, fsync, rename)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        fd, tmp = tempfile.mkstemp(prefix=path.stem, suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_MAGIC + _key_digest(key) + struct.pack("<qqq", version, len(seqs), matrix.shape[1]))
                fh.write(np.asarray(seqs, dtype="<i8").tobytes())
                fh.write(np.asarray(matrix, dtype="<f4").tobytes())
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path

    def zero(self, key: str, seqs: Sequence[int]) -> int:
        """Overwrite the rows of `seqs` in the scope's snapshot with zeros; how many were found.

        A file that is not this scope's valid snapshot cannot be trusted to hold the rows where
        its header says: it is removed instead (and counted as nothing found)."""
        if not seqs:
            return 0
        path = self.path(key)
        try:
            with path.open("r+b") as fh:
                header = self._header(fh, key, os.fstat(fh.fileno()).st_size)
                if header is None:
                    fh.close()
                    self.remove(key)
                    return 0
                _, rows, dim = header
                stored = np.frombuffer(fh.read(8 * rows), dtype="<i8")
                hits = np.flatnonzero(np.isin(stored, np.asarray(list(seqs), dtype=np.int64)))
                zeros = bytes(4 * dim)
                for i in hits.tolist():
                    fh.seek(_HEADER + 8 * rows + 4 * dim * i)
                    fh.write(zeros)
                fh.flush()
                os.fsync(fh.fileno())
                return len(hits)
        except FileNotFoundError:
            return 0

    def remove(self, key: str) -> None:
        """Delete the scope's snapshot file, if any (a user with no vectors left, a bad file)."""
        with contextlib.suppress(OSError):
            self.path(key).unlink()

    def remove_all(self) -> None:
        """Delete every snapshot file (after a reindex: they hold the old embedder's vectors)."""
        for path in self.directory.glob("*.vec"):
            with contextlib.suppress(OSError):
                path.unlink()
