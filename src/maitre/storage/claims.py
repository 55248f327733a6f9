"""Leases on runs: which worker process is resuming a run right now, so no two ever resume it together.

A worker `claim`s a run before it touches it and `release`s it when done; while the work lasts it
`renew`s the lease. A claim is taken, in one guarded statement, when the run is unclaimed or its
lease has passed:

    INSERT ... ON CONFLICT (run_id) DO UPDATE SET ... WHERE lease_until <= now

so of several processes claiming at once exactly one sees a row change. A claim whose lease still
runs is taken over only when its owner is dead by the rule the gate applies to in-flight
idempotency keys (`maitre.storage.owners`: same host, boot and pid namespace, and the process is gone
or its pid was reused); the take-over matches the exact claim that was read (its token), so it too
goes to one process at most. An owner on another host is never "dead" from here: only its lease
ends its claim.

Lease times are the database's clock, not the worker's: every comparison and every new lease is
computed in the statement itself (Postgres `statement_timestamp()`), so workers on hosts whose
clocks disagree still agree on whose lease has run out. On SQLite the clock is the one of the host
the worker runs on (SQLite is a library, not a server: `julianday('now')` is read in-process), which
is the host the file lives on for every setup SQLite supports - a file shared by hosts over a
network file system is not one. A caller that passes `now=` explicitly (tests, a caller keeping its
own time) is compared against that instead.

Every claim carries a random `token`: `renew` and `release` act only on the claim they were given,
so a worker whose lease ran out and was taken over cannot release its successor's claim, and two
workers of one process (one owner record) still exclude each other.

`left_behind()` lists the claims nobody holds any more (lease passed, or owner dead): a run a
worker claimed and then left, possibly mid-resume (the resume worker takes those over).

The table is `maitre_run_claims`, component `run_claims` in `maitre_schema`, beside the gate's
tables in the stores' own database (SQLite or Postgres) and migrated on first use; in-memory stores
get a dict. `claim_store(stores)` returns the one for a `Stores`.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from maitre.storage.base import RunSummary, now_or
from maitre.storage.engine.base import Engine, Migration, Schema
from maitre.storage.owners import current_owner, owner_status

__all__ = [
    "CLAIMS_SCHEMA",
    "Claim",
    "ClaimStore",
    "MemoryClaimStore",
    "SQLClaimStore",
    "claim_store",
    "runs_to_resume",
]

_TABLE = """CREATE TABLE IF NOT EXISTS {s}.maitre_run_claims (
    run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, token TEXT NOT NULL, claimed_at {REAL} NOT NULL,
    lease_until {REAL} NOT NULL)"""

CLAIMS_SCHEMA = Schema(
    component="run_claims",
    migrations=(Migration(version=1, statements=(_TABLE,)),),
    tables=frozenset({"maitre_run_claims"}),
)
"""The claims table, as forward migrations."""


@dataclass(frozen=True, kw_only=True)
class Claim:
    """A run held by one worker until `lease_until` (or until it is released)."""

    run_id: str
    """The run held."""
    owner: str
    """The holding process, as `maitre.storage.owners.current_owner()` writes it."""
    token: str
    """Random per claim: what `renew` and `release` match, so they act on this claim only."""
    claimed_at: float
    """Unix time the claim was taken."""
    lease_until: float
    """After this the claim is free for anyone, alive or not."""


@runtime_checkable
class ClaimStore(Protocol):
    """**Protocol:** leases on runs, exclusive across every process sharing the store."""

    async def claim(
        self, run_id: str, *, lease_s: float, owner: str | None = None, now: float | None = None
    ) -> Claim | None:
        """Take `run_id` for `lease_s` seconds: when unclaimed, when its lease has passed, or when its
        owner is dead. None when someone else holds it. `owner` defaults to this process."""
        ...

    async def renew(self, claim: Claim, *, lease_s: float, now: float | None = None) -> Claim | None:
        """Extend `claim` to `now + lease_s`; None when it is no longer held (released or taken over)."""
        ...

    async def release(self, claim: Claim) -> bool:
        """Give `claim` back; True when it was still held."""
        ...

    async def expire(self, claim: Claim) -> bool:
        """End `claim`'s lease now but keep it stored, so it is left behind (`left_behind`) for
        another worker to take over: a run stopped mid-way. True when it was still held."""
        ...

    async def get(self, run_id: str) -> Claim | None:
        """The claim on `run_id` as stored (possibly past its lease), or None."""
        ...

    async def left_behind(self, *, limit: int = 100, now: float | None = None) -> list[Claim]:
        """Up to `limit` stored claims whose lease has passed or whose owner is dead (oldest lease
        first): what `claim` would take over right now."""
        ...


def _this_process() -> str:
    return current_owner()


def _dead(owner: str) -> bool:
    return owner_status(owner) == "dead"


def _new_claim(run_id: str, owner: str | None, at: float, lease_s: float) -> Claim:
    if lease_s <= 0:
        raise ValueError(f"lease_s must be > 0, got {lease_s}")
    return Claim(
        run_id=run_id,
        owner=owner if owner is not None else _this_process(),
        token=secrets.token_hex(16),
        claimed_at=at,
        lease_until=at + lease_s,
    )


class MemoryClaimStore:
    """Claims in a dict, for in-memory stores (one process; the same rules as the SQL store)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claims: dict[str, Claim] = {}

    async def claim(
        self, run_id: str, *, lease_s: float, owner: str | None = None, now: float | None = None
    ) -> Claim | None:
        mine = _new_claim(run_id, owner, now_or(now), lease_s)
        with self._lock:
            held = self._claims.get(run_id)
            if held is not None and held.lease_until > mine.claimed_at and not _dead(held.owner):
                return None
            self._claims[run_id] = mine
        return mine

    async def renew(self, claim: Claim, *, lease_s: float, now: float | None = None) -> Claim | None:
        with self._lock:
            held = self._claims.get(claim.run_id)
            if held is None or held.token != claim.token:
                return None
            renewed = self._claims[claim.run_id] = replace(held, lease_until=now_or(now) + lease_s)
        return renewed

    async def release(self, claim: Claim) -> bool:
        with self._lock:
            held = self._claims.get(claim.run_id)
            if held is None or held.token != claim.token:
                return False
            del self._claims[claim.run_id]
        return True

    async def expire(self, claim: Claim) -> bool:
        return await self.renew(claim, lease_s=0.0) is not None

    async def get(self, run_id: str) -> Claim | None:
        with self._lock:
            return self._claims.get(run_id)

    async def left_behind(self, *, limit: int = 100, now: float | None = None) -> list[Claim]:
        at = now_or(now)
        with self._lock:
            held = sorted(self._claims.values(), key=lambda c: c.lease_until)
        return [c for c in held if c.lease_until <= at or _dead(c.owner)][:limit]


_COLUMNS = "run_id, owner, token, claimed_at, lease_until"
_NOW = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgres": "CAST(EXTRACT(EPOCH FROM statement_timestamp()) AS DOUBLE PRECISION)",
}
"""The database's unix time, per dialect: one value for the whole statement in both."""
_AT = "COALESCE(CAST(? AS {REAL}), {now})"
"""The time a statement compares and leases with: the caller's `now=` if given, else the database's."""
_CLAIM = (
    f"INSERT INTO {{s}}.maitre_run_claims AS c ({_COLUMNS}) VALUES (?, ?, ?, {_AT}, {_AT} + ?) "
    "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
    "claimed_at = excluded.claimed_at, lease_until = excluded.lease_until "
    "WHERE c.lease_until <= excluded.claimed_at"
)
_TAKE_OVER = (
    f"UPDATE {{s}}.maitre_run_claims SET owner = ?, token = ?, claimed_at = {_AT}, lease_until = {_AT} + ? "
    "WHERE run_id = ? AND token = ?"
)
_RENEW = f"UPDATE {{s}}.maitre_run_claims SET lease_until = {_AT} + ? WHERE run_id = ? AND token = ?"
_RELEASE = "DELETE FROM {s}.maitre_run_claims WHERE run_id = ? AND token = ?"
_SELECT = f"SELECT {_COLUMNS}, {_AT} FROM {{s}}.maitre_run_claims WHERE run_id = ?"
_MINE = f"SELECT {_COLUMNS} FROM {{s}}.maitre_run_claims WHERE run_id = ? AND token = ?"
_ALL = f"SELECT {_COLUMNS}, {_AT} FROM {{s}}.maitre_run_claims ORDER BY lease_until, run_id LIMIT ?"


def _from_row(row: tuple[Any, ...]) -> Claim:
    return Claim(
        run_id=row[0], owner=row[1], token=row[2], claimed_at=float(row[3]), lease_until=float(row[4])
    )


class SQLClaimStore:
    """`ClaimStore` over an engine (SQLite or Postgres); the table is migrated on first use. Lease
    times are the database's clock (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        """Where the claims live (the stores' own database)."""
        self._ready = False
        now = _NOW.get(engine.dialect.name, _NOW["sqlite"])
        self._sql = {
            name: sql.replace("{now}", now)
            for name, sql in (
                ("claim", _CLAIM),
                ("take_over", _TAKE_OVER),
                ("renew", _RENEW),
                ("select", _SELECT),
                ("all", _ALL),
            )
        }

    async def _migrate(self) -> None:
        if not self._ready:
            # another process may be writing: the engine waits for the lock (SQLITE_BUSY backoff)
            await self.engine.migrate(CLAIMS_SCHEMA)
            self._ready = True

    async def _read(self, run_id: str, token: str) -> Claim | None:
        row = await self.engine.fetchone(_MINE, (run_id, token))
        return None if row is None else _from_row(row)

    async def claim(
        self, run_id: str, *, lease_s: float, owner: str | None = None, now: float | None = None
    ) -> Claim | None:
        await self._migrate()
        at = None if now is None else float(now)
        for _ in range(5):  # a claim that changes between our reads (released, taken over): look again
            mine = _new_claim(run_id, owner, 0.0, lease_s)
            params = (run_id, mine.owner, mine.token, at, at, lease_s)
            if await self.engine.execute(self._sql["claim"], params) == 1:
                return await self._read(run_id, mine.token)
            row = await self.engine.fetchone(self._sql["select"], (at, run_id))
            if row is None:
                continue  # released between our claim and our read: claim it again
            held, clock = _from_row(row), float(row[5])
            if held.lease_until <= clock:
                continue  # its lease ended since: the guarded insert takes it now
            if not _dead(held.owner):
                return None
            take_over = (mine.owner, mine.token, at, at, lease_s, run_id, held.token)
            if await self.engine.execute(self._sql["take_over"], take_over) == 1:
                return await self._read(run_id, mine.token)
        return None  # contended by others the whole time: someone holds it

    async def renew(self, claim: Claim, *, lease_s: float, now: float | None = None) -> Claim | None:
        await self._migrate()
        at = None if now is None else float(now)
        renew = (at, lease_s, claim.run_id, claim.token)
        if await self.engine.execute(self._sql["renew"], renew) != 1:
            return None
        return await self._read(claim.run_id, claim.token)

    async def release(self, claim: Claim) -> bool:
        await self._migrate()
        return await self.engine.execute(_RELEASE, (claim.run_id, claim.token)) == 1

    async def expire(self, claim: Claim) -> bool:
        return await self.renew(claim, lease_s=0.0) is not None

    async def get(self, run_id: str) -> Claim | None:
        await self._migrate()
        row = await self.engine.fetchone(self._sql["select"], (None, run_id))
        return None if row is None else _from_row(row)

    async def left_behind(self, *, limit: int = 100, now: float | None = None) -> list[Claim]:
        await self._migrate()
        at = None if now is None else float(now)
        found: list[Claim] = []
        for row in await self.engine.fetchall(self._sql["all"], (at, max(limit * 4, 1000))):
            claim = _from_row(row)
            if claim.lease_until <= float(row[5]) or _dead(claim.owner):
                found.append(claim)
        return found[:limit]


_DECIDED = (
    "SELECT r.run_id, r.status, r.updated_at FROM {s}.runs r WHERE r.status = 'paused' "
    "AND (r.updated_at > ? OR (r.updated_at = ? AND r.run_id > ?)) "
    "AND (r.run_id, r.tenant) IN (SELECT a.run_id, a.tenant FROM {s}.approvals a "
    "WHERE a.run_id IS NOT NULL AND (a.status <> 'pending' OR a.expires_at <= ?)) "
    "ORDER BY r.updated_at, r.run_id LIMIT ?"
)
_EVERYTHING = 1 << 31


async def runs_to_resume(
    stores: Any, *, after: tuple[float, str] | None = None, limit: int = 100, now: float | None = None
) -> list[RunSummary]:
    """Paused runs an approval of which has been decided (approved, denied, used, or pending past its
    expiry), oldest update first, after the `(updated_at, run_id)` cursor `after`: up to `limit`.

    Candidates, not a verdict: a run that paused again may still wait on a newer approval, and an
    approval naming a run id is not proof the run waits on it, so the worker reads each run's own
    pending approvals before it resumes it. What the listing guarantees is that a decided run is
    found however many runs wait for a person (they are not candidates), and, paged by `after`,
    within a bounded number of passes. On stores with a database (`stores.db`) it is one query
    there; other stores list their paused runs and page them the same way.
    """
    at = now_or(now)
    updated, last = after if after is not None else (-1.0, "")
    engine = getattr(stores, "db", None)
    if isinstance(engine, Engine):
        rows = await engine.fetchall(_DECIDED, (updated, updated, last, at, max(0, limit)))
        return [RunSummary(row[0], row[1], float(row[2])) for row in rows]
    paused = await stores.runs.list(status="paused", limit=_EVERYTHING)
    later = sorted((r for r in paused if (r.updated_at, r.run_id) > (updated, last)), key=_order)
    return later[: max(0, limit)]


def _order(summary: RunSummary) -> tuple[float, str]:
    return summary.updated_at, summary.run_id


_by_stores: dict[int, ClaimStore] = {}
_by_stores_lock = threading.Lock()


def claim_store(stores: Any) -> ClaimStore:
    """The claim store beside `stores`: in its database when it has one (`stores.db`), else in memory.

    The same object for the same `stores` (kept until `stores` is garbage-collected): workers of one
    process that share in-memory stores share their claims too.
    """
    key = id(stores)
    with _by_stores_lock:
        found = _by_stores.get(key)
        if found is None:
            engine = getattr(stores, "db", None)
            found = SQLClaimStore(engine) if isinstance(engine, Engine) else MemoryClaimStore()
            _by_stores[key] = found
            weakref.finalize(stores, _by_stores.pop, key, None)
    return found
