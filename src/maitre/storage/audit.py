"""The hash-chained audit log in the `audit` table, for every SQL engine.

`append` reads the chain's head and inserts the next entry in one unit of work that excludes every
other appender, in any process: an immediate transaction on SQLite (the file's write lock), plus
`LOCK TABLE audit IN EXCLUSIVE MODE` on Postgres (blocks appenders, never readers; scoped to this
schema's table, unlike an advisory lock id shared by every schema of a database). `seq` is the
primary key, so even a writer bypassing the lock could not create a duplicate. Triggers refuse
UPDATE and DELETE on the table (see `maitre.storage.schema`).

**Group commit.** Appends that arrive while one is being written wait for it and then go in together:
one transaction, one head read and one commit for the whole batch, each entry sealed after the one
before it. On Postgres that happens by itself: the writer's transaction awaits the server, and the
appends of other tasks queue meanwhile (measured: 8 concurrent writers, twice the calls per second).
A SQLite transaction never suspends (`Engine.commits_inline`), so nothing can queue behind it: each
append is written at once, without the queue's bookkeeping. (Making SQLite callers wait on purpose
so that they share a commit would add a loop turn to every call; on one event loop they do not
overlap anyway.)

`append_after(entry, step)` runs `step(tx)` - for instance `complete_in` of the idempotency key the
entry records - in the same transaction just before the entry is inserted: the result and the line
that says it was produced commit together or not at all. A step that raises a `StoreError` (a
completion refused) fails only its own append; the rest of the batch commits.

`append_in(tx, entry)` is the same step inside a caller's immediate unit of work.

**The known head (one statement per batch).** After a batch commits, the store remembers the head it
wrote. The next batch is sealed after that head and inserted by one statement that checks it:
`INSERT INTO audit SELECT ... FROM (VALUES ...) WHERE EXISTS (the head row, seq and hash)`. On
Postgres an append without a step is then one autocommitted round trip instead of five (BEGIN, LOCK,
head read, INSERT, COMMIT), and a step's transaction loses the lock and the head read. The chain is
held by the database, not by the memory of the head:

- the head row must exist with the remembered hash, or no row is inserted (the guard; then the batch
  is written the locked way: lock, read the head, reseal);
- `seq` is the primary key, so if another writer (another process or replica) appended after that
  head, the insert of `head + 1` fails on the key and the whole statement is undone - no entry of a
  batch is ever inserted without the others, and never after a head it was not sealed over. The
  batch is then resealed under the lock (it is retried once that way, with the lost round trip as
  the price of a stale head);
- entries are never updated or deleted (triggers), so a head that existed keeps its hash.

A store that sees a stale head falls back to the lock for its next batches (`_STALE_BACKOFF`), so
replicas that take turns on one database do not pay a failed insert on every append.

It is on by default where a statement is a round trip (Postgres). On SQLite the lock, the head read
and the commit are calls into the library, not round trips: the guarded statement measured the same
or a little slower there (benchmarks/store_bench.py), so SQLite keeps the locked path unless
`known_head=True` asks for it; `known_head=False` keeps the locked path on any engine.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable

import anyio

from maitre.audit.chain import AuditEntry
from maitre.exceptions import StoreError
from maitre.storage._rows import (
    AUDIT_COLUMNS,
    audit_from_row,
    audit_to_row,
    insert_sql,
    limit_sql,
    select_sql,
)
from maitre.storage.base import seal_next
from maitre.storage.engine.base import Engine, Tx

__all__ = ["SQLAuditStore", "TxStep", "guarded_insert_sql"]

_SELECT = select_sql("audit", AUDIT_COLUMNS)
_INSERT = insert_sql("audit", AUDIT_COLUMNS)
_HEAD = "SELECT seq, hash FROM {s}.audit ORDER BY seq DESC LIMIT 1"
_CASTS = {"seq": "{BIGINT}", "at_ts": "{REAL}", "duration_ms": "{REAL}", "replayed": "{BOOL}"}
_FIRST_ROW = "(" + ", ".join(f"CAST(? AS {_CASTS.get(c, 'TEXT')})" for c in AUDIT_COLUMNS) + ")"
_ROW = "(" + ", ".join("?" for _ in AUDIT_COLUMNS) + ")"
_GUARD_AFTER = " WHERE EXISTS (SELECT 1 FROM {s}.audit WHERE seq = ? AND hash = ?)"
_GUARD_FIRST = " WHERE NOT EXISTS (SELECT 1 FROM {s}.audit)"
_STALE_BACKOFF = 32
"""Batches written the locked way after the known head was found stale (another writer appended)."""
_MAX_ROWS = 50
"""Rows per guarded INSERT (18 parameters each: well under SQLite's oldest limit of 999). A larger
batch is several guarded INSERTs in one transaction."""
_UNIQUE_VIOLATION = "23505"  # Postgres SQLSTATE


def guarded_insert_sql(rows: int, *, first: bool) -> str:
    """One statement inserting `rows` audit rows only if the chain's head is the one they were sealed
    after: `first` for an empty table, else a head `(seq, hash)` given after the rows' parameters.
    The first row's parameters are cast to the column types (a `VALUES` list is typed by it)."""
    values = ", ".join([_FIRST_ROW, *([_ROW] * (rows - 1))])
    guard = _GUARD_FIRST if first else _GUARD_AFTER
    return f"INSERT INTO {{s}}.audit ({', '.join(AUDIT_COLUMNS)}) SELECT * FROM (VALUES {values}) AS v{guard}"


def _is_conflict(exc: BaseException) -> bool:
    """True for a clash on the audit table's `seq` key: another writer appended after the head we
    sealed over (any other error is not a stale head and goes on as it is)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return "audit.seq" in str(exc)  # "UNIQUE constraint failed: audit.seq"
    if getattr(exc, "sqlstate", None) != _UNIQUE_VIOLATION:
        return False
    diag = getattr(exc, "diag", None)
    return getattr(diag, "table_name", None) == "audit"


class _Stale(Exception):
    """The known head was not the chain's head (the guarded insert changed nothing or clashed)."""


TxStep = Callable[[Tx], Awaitable[None]]
"""A step of another concern run inside the audit append's transaction (`append_after`)."""


class _Pending:
    """One append waiting in a batch."""

    __slots__ = ("entry", "error", "sealed", "step", "wake")

    def __init__(self, entry: AuditEntry, step: TxStep | None) -> None:
        self.entry = entry
        self.step = step
        self.sealed: AuditEntry | None = None
        self.error: BaseException | None = None
        self.wake: anyio.Event | None = None
        """Set when a batch was written (made only for an append that has to wait)."""

    def outcome(self) -> AuditEntry:
        if self.error is not None:
            raise self.error
        assert self.sealed is not None
        return self.sealed


class SQLAuditStore:
    """`AuditStore` over an engine, with group commit (see the module docstring)."""

    def __init__(self, engine: Engine, *, known_head: bool | None = None) -> None:
        self.engine = engine
        """The engine (so another concern's step can join an append: `append_after`)."""
        self.known_head = not engine.commits_inline if known_head is None else known_head
        """Seal after the head this store last wrote and insert with one guarded statement (see
        the module docstring; by default where commits wait for a server); False: lock and read
        the head in every batch."""
        self._head: tuple[int, str] | None = None
        self._head_known = False
        self._locked_left = 0
        self.stale_heads = 0
        """How many batches found the known head stale (another writer had appended)."""
        self._inline = engine.commits_inline
        self._queue: list[_Pending] = []
        self._writing = False

    async def append(self, entry: AuditEntry) -> AuditEntry:
        return await self._submit(_Pending(entry, None))

    async def append_after(self, entry: AuditEntry, step: TxStep) -> AuditEntry:
        """Run `step(tx)`, then append `entry`, in one transaction (see the module docstring).

        What the pair records has already happened (a tool ran), so a host's cancellation does not
        stop it half-way: on an engine that waits (Postgres) the write is shielded; a SQLite
        transaction never suspends, so nothing can interrupt it (and the shield's cost is saved)."""
        if self._inline:
            return await self._submit(_Pending(entry, step))
        with anyio.CancelScope(shield=True):
            sealed = await self._submit(_Pending(entry, step))
        return sealed

    async def append_in(self, tx: Tx, entry: AuditEntry) -> AuditEntry:
        """`append` inside `tx`, which must be an immediate unit of work."""
        await tx.lock("audit")
        sealed = seal_next(entry, await tx.fetchone(_HEAD))
        await tx.execute(_INSERT, audit_to_row(sealed))
        return sealed

    async def _submit(self, item: _Pending) -> AuditEntry:
        if self._inline:  # the write cannot suspend, so no other append is ever queued behind it
            await self._write([item])
            return item.outcome()
        self._queue.append(item)
        try:
            while item.sealed is None and item.error is None:
                if not self._writing:
                    await self._lead(item)
                else:
                    item.wake = anyio.Event()
                    await item.wake.wait()  # a batch was written (ours, or one before it)
        except BaseException:
            if item.sealed is None and item.error is None and item in self._queue:
                self._queue.remove(item)  # the caller gave up before its entry was written
            raise
        return item.outcome()

    async def _lead(self, item: _Pending) -> None:
        """Write every queued append (ours among them) in one batch, then hand over to a waiter."""
        self._writing = True
        batch: list[_Pending] = []
        try:
            batch, self._queue = self._queue, []
            try:
                await self._write(batch)
            except BaseException as exc:
                failed = exc if isinstance(exc, Exception) else StoreError("the audit write was interrupted")
                for pending in batch:
                    if pending is not item:
                        pending.error = failed
                raise
        finally:
            self._writing = False
            for pending in (*batch, *self._queue):  # and the appends that came in meanwhile:
                if pending.wake is not None:  # the first of them to run leads the next batch
                    pending.wake.set()

    async def _write(self, batch: list[_Pending]) -> None:
        if self.known_head and self._head_known and self._locked_left == 0:
            head = self._head
            self._head_known = False  # until this batch is known to have committed
            try:
                self._remember(await self._write_guarded(batch, head))
                return
            except _Stale:
                pass
            except Exception as exc:
                if not _is_conflict(exc):
                    raise
            self.stale_heads += 1
            self._locked_left = _STALE_BACKOFF
        elif self._locked_left:
            self._locked_left -= 1
        self._head_known = False
        await self._write_locked(batch)
        last = [p.sealed for p in batch if p.sealed is not None]
        if last:
            self._remember((last[-1].seq, last[-1].hash))

    def _remember(self, head: tuple[int, str] | None) -> None:
        self._head, self._head_known = head, True

    async def _write_guarded(
        self, batch: list[_Pending], head: tuple[int, str] | None
    ) -> tuple[int, str] | None:
        """Write `batch` sealed after `head` with one guarded INSERT; the new head. Raises `_Stale`
        (nothing written) when `head` is not the chain's head."""

        def seal_all(
            items: list[_Pending],
        ) -> tuple[list[tuple[str, list[object], int]], tuple[int, str] | None]:
            """Seal `items` after `head`: the guarded INSERTs (at most `_MAX_ROWS` rows each, each
            guarded by the entry before its first) and the new head."""
            statements: list[tuple[str, list[object], int]] = []
            last = head
            for start in range(0, len(items), _MAX_ROWS):
                chunk, after = items[start : start + _MAX_ROWS], last
                params: list[object] = []
                for pending in chunk:
                    sealed = seal_next(pending.entry, last)
                    params.extend(audit_to_row(sealed))
                    pending.sealed, last = sealed, (sealed.seq, sealed.hash)
                if after is not None:
                    params.extend(after)
                statements.append((guarded_insert_sql(len(chunk), first=after is None), params, len(chunk)))
            return statements, last

        for pending in batch:
            pending.sealed = pending.error = None
        if len(batch) <= _MAX_ROWS and all(pending.step is None for pending in batch):
            ((sql, params, rows),), last = seal_all(batch)  # one statement, autocommitted: all or none
            try:
                written = await self.engine.execute(sql, params)
            except BaseException:
                for pending in batch:
                    pending.sealed = None
                raise
            if written != rows:
                for pending in batch:
                    pending.sealed = None
                raise _Stale
            return last

        async def op(tx: Tx) -> tuple[int, str] | None:
            for pending in batch:  # the engine may run this again (busy, reconnect): start clean
                pending.sealed = pending.error = None
            kept: list[_Pending] = []
            for pending in batch:
                if pending.step is not None:
                    try:
                        await pending.step(tx)
                    except StoreError as exc:
                        pending.error = exc
                        continue
                kept.append(pending)
            statements, last = seal_all(kept)
            for sql, params, rows in statements:
                if await tx.execute(sql, params) != rows:
                    raise _Stale  # rolls the steps back too: the locked path runs them again
            return last

        try:
            return await self.engine.transact(op, immediate=True)
        except BaseException:
            for pending in batch:
                pending.sealed = pending.error = None
            raise

    async def _write_locked(self, batch: list[_Pending]) -> None:
        async def op(tx: Tx) -> None:
            await tx.lock("audit")
            head = await tx.fetchone(_HEAD)
            for pending in batch:  # the engine may run this again (busy, reconnect): start clean
                pending.sealed = pending.error = None
            for pending in batch:
                if pending.step is not None:
                    try:
                        await pending.step(tx)
                    except StoreError as exc:
                        pending.error = exc
                        continue
                sealed = seal_next(pending.entry, head)
                await tx.execute(_INSERT, audit_to_row(sealed))
                pending.sealed, head = sealed, (sealed.seq, sealed.hash)

        # Not pipelined: psycopg's async pipeline mode costs more than the round trips it saves here
        # (benchmarks/gateway_profile.py; one appender: ~1050 -> ~850 µs CPU and ~7.8 -> ~6.4 ms
        # wall per append; eight: the same appends/s and CPU), and concurrent appends share a
        # commit by the group commit above anyway.
        await self.engine.transact(op, immediate=True)

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        params: list[object] = [since_seq]
        sql = f"{_SELECT} WHERE seq > ? ORDER BY seq{limit_sql(limit, params)}"
        return [audit_from_row(row) for row in await self.engine.fetchall(sql, params)]

    async def entries_for_run(
        self,
        run_id: str,
        *,
        tenant: str | None = None,
        since_seq: int = 0,
        until_seq: int | None = None,
        limit: int | None = None,
    ) -> list[AuditEntry]:
        """The entries of run `run_id` (and of `tenant`, when given) with seq in (`since_seq`,
        `until_seq`], in seq order, at most `limit` of them.

        Read-only. The run is matched by the database as it reads the seq range (the primary key), so
        other runs' and tenants' entries cost no rows fetched; give a range to bound the rows read."""
        params: list[object] = [run_id, since_seq]
        sql = f"{_SELECT} WHERE run_id = ? AND seq > ?"
        if until_seq is not None:
            sql += " AND seq <= ?"
            params.append(until_seq)
        if tenant is not None:
            sql += " AND tenant = ?"
            params.append(tenant)
        sql += f" ORDER BY seq{limit_sql(limit, params)}"
        return [audit_from_row(row) for row in await self.engine.fetchall(sql, params)]

    async def last(self) -> AuditEntry | None:
        row = await self.engine.fetchone(f"{_SELECT} ORDER BY seq DESC LIMIT 1")
        return None if row is None else audit_from_row(row)
