"""In-process stores: for tests, demos and single-process tools that need no durability.

These are plain Python, not an engine: an in-memory SQL engine (SQLite `:memory:` under the SQL
concerns) would run every concern's SQL, but the gate's default (no stores given) would then pay
SQLite's statement costs on every call for nothing it needs, and the contract suite already holds
both implementations to the same behaviour (see `benchmarks/store_bench.py` for the numbers).

Every method does its whole read-modify-write without awaiting, so on one event loop each call is
atomic; a `threading.Lock` makes the same true for callers in worker threads. Records are copied in
and out, so a caller mutating a returned record cannot change what is stored. Nothing survives the
process, and two processes do not share anything: use SQLite or Postgres for that.
"""

from __future__ import annotations

import builtins
import copy
import threading
from dataclasses import replace
from typing import Any

from maitre.audit.chain import AuditEntry
from maitre.storage.base import (
    AlreadyExistsError,
    ApprovalRequest,
    ApprovalStatus,
    HandleData,
    IdempotencyRecord,
    RunState,
    RunSummary,
    StoreError,
    Stores,
    check_bucket_args,
    check_new_request,
    completion_refused,
    decision_fields,
    effective_status,
    not_decidable,
    now_or,
    seal_next,
    token_bucket,
)

__all__ = [
    "MemoryApprovalStore",
    "MemoryAuditStore",
    "MemoryHandleStore",
    "MemoryIdempotencyStore",
    "MemoryRateLimiter",
    "MemoryRunStore",
    "MemoryStores",
]


class MemoryApprovalStore:
    """Approval requests in a dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, ApprovalRequest] = {}

    @staticmethod
    def _view(request: ApprovalRequest, now: float) -> ApprovalRequest:
        view = copy.deepcopy(request)
        view.status = effective_status(request.status, request.expires_at, now)
        return view

    async def create(self, request: ApprovalRequest) -> ApprovalRequest:
        check_new_request(request)
        with self._lock:
            if request.id in self._items:
                raise AlreadyExistsError(f"approval {request.id!r} already exists")
            self._items[request.id] = copy.deepcopy(request)
        return copy.deepcopy(request)

    async def get(self, approval_id: str, *, now: float | None = None) -> ApprovalRequest | None:
        with self._lock:
            request = self._items.get(approval_id)
            return None if request is None else self._view(request, now_or(now))

    async def list(
        self,
        *,
        status: ApprovalStatus | None = None,
        tenant: str | None = None,
        now: float | None = None,
        limit: int | None = None,
    ) -> builtins.list[ApprovalRequest]:
        at = now_or(now)
        with self._lock:
            views = [self._view(r, at) for r in self._items.values()]
        views = [
            v
            for v in views
            if (status is None or v.status == status) and (tenant is None or v.tenant == tenant)
        ]
        views.sort(key=lambda v: (v.created_at, v.id))
        return views if limit is None else views[:limit]

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        approver: str,
        message: str | None = None,
        edited_arguments: dict[str, Any] | None = None,
        approved_hash: str | None = None,
        now: float | None = None,
    ) -> ApprovalRequest:
        at = now_or(now)
        with self._lock:
            request = self._items.get(approval_id)
            if request is None:
                raise not_decidable(approval_id, None)
            current = effective_status(request.status, request.expires_at, at)
            if current != "pending":
                raise not_decidable(approval_id, current)
            fields = decision_fields(
                request.call_hash, approve, approver, message, edited_arguments, approved_hash, at
            )
            updated = replace(request, **fields)
            self._items[approval_id] = updated
            return self._view(updated, at)

    async def consume(self, approval_id: str, *, call_hash: str, now: float | None = None) -> bool:
        at = now_or(now)
        with self._lock:
            request = self._items.get(approval_id)
            if (
                request is None
                or request.status != "approved"
                or request.approved_hash != call_hash
                or at >= request.expires_at
            ):
                return False
            self._items[approval_id] = replace(request, status="used", used_at=at)
            return True


class MemoryIdempotencyStore:
    """Idempotency records keyed by (tenant, key)."""

    legacy_hashes = False
    """An in-process store holds nothing minted before hash format 2, so a new key's miss needs no
    look-up of its version-1 form (`maitre.gate.hashing.may_hold_legacy`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], IdempotencyRecord] = {}

    async def begin(
        self,
        key: str,
        *,
        tenant: str,
        tool: str,
        fingerprint: str,
        now: float | None = None,
        lease_s: float = 300.0,
        owner: str | None = None,
        reuse_completed_after_s: float | None = None,
    ) -> IdempotencyRecord | None:
        at = now_or(now)
        with self._lock:
            existing = self._items.get((tenant, key))
            stale = (
                existing is not None
                and reuse_completed_after_s is not None
                and existing.state == "completed"
                and existing.updated_at < at - reuse_completed_after_s
            )
            if existing is None or stale:
                self._items[(tenant, key)] = IdempotencyRecord(
                    key=key,
                    tenant=tenant,
                    tool=tool,
                    fingerprint=fingerprint,
                    state="in_flight",
                    created_at=at,
                    updated_at=at,
                    lease_until=at + lease_s,
                    owner=owner,
                )
                return None
            assert existing is not None
            if existing.state == "in_flight" and existing.lease_until <= at:
                existing.state = "uncertain"
                existing.updated_at = at
            return copy.copy(existing)

    async def take_over(
        self,
        key: str,
        *,
        tenant: str,
        seen: IdempotencyRecord,
        owner: str | None,
        now: float | None = None,
        lease_s: float = 300.0,
    ) -> bool:
        at = now_or(now)
        with self._lock:
            record = self._items.get((tenant, key))
            if (
                record is None
                or record.state not in ("in_flight", "uncertain")
                or (record.state, record.updated_at, record.owner)
                != (seen.state, seen.updated_at, seen.owner)
            ):
                return False
            record.state, record.result, record.owner = "in_flight", None, owner
            record.updated_at, record.lease_until = at, at + lease_s
            return True

    async def complete(self, key: str, result_json: str, *, tenant: str, now: float | None = None) -> None:
        at = now_or(now)
        with self._lock:
            record = self._items.get((tenant, key))
            if record is None:
                raise completion_refused(key, exists=False)
            if record.state == "completed":
                raise completion_refused(key, exists=True)
            record.state = "completed"
            record.result = result_json
            record.updated_at = at

    async def mark_uncertain(
        self, key: str, *, tenant: str, now: float | None = None, owner: str | None = None
    ) -> bool:
        at = now_or(now)
        with self._lock:
            record = self._items.get((tenant, key))
            if record is None or record.state != "in_flight" or (owner is not None and record.owner != owner):
                return False
            record.state = "uncertain"
            record.updated_at = at
            return True

    async def release(self, key: str, *, tenant: str) -> bool:
        with self._lock:
            return self._items.pop((tenant, key), None) is not None

    async def get(self, key: str, *, tenant: str) -> IdempotencyRecord | None:
        with self._lock:
            record = self._items.get((tenant, key))
            return None if record is None else copy.copy(record)


class MemoryAuditStore:
    """The audit chain in a list."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[AuditEntry] = []

    async def append(self, entry: AuditEntry) -> AuditEntry:
        with self._lock:
            last = self._entries[-1] if self._entries else None
            sealed = seal_next(entry, (last.seq, last.hash) if last else None)
            self._entries.append(sealed)
            return sealed

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        with self._lock:
            # seq n sits at index n-1: the list is the chain.
            selected = self._entries[max(since_seq, 0) :]
        return selected if limit is None else selected[:limit]

    async def last(self) -> AuditEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None


class MemoryHandleStore:
    """Result pages in a dict, with expiry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[str, str, list[str], dict[str, Any], float]] = {}

    async def put(
        self,
        handle: str,
        *,
        tenant: str,
        user: str,
        pages: list[str],
        meta: dict[str, Any],
        now: float | None = None,
        ttl_s: float = 3600.0,
    ) -> None:
        at = now_or(now)
        with self._lock:
            current = self._items.get(handle)
            if current is not None and current[4] > at:
                raise AlreadyExistsError(f"handle {handle!r} already exists")
            self._items[handle] = (tenant, user, list(pages), copy.deepcopy(meta), at + ttl_s)

    async def get(
        self, handle: str, *, tenant: str, user: str | None = None, now: float | None = None
    ) -> HandleData | None:
        at = now_or(now)
        with self._lock:
            item = self._items.get(handle)
            if item is None or item[0] != tenant or item[4] <= at or (user is not None and item[1] != user):
                return None
            return HandleData(list(item[2]), copy.deepcopy(item[3]))

    async def purge(self, *, now: float | None = None) -> int:
        at = now_or(now)
        with self._lock:
            dead = [h for h, item in self._items.items() if item[4] <= at]
            for handle in dead:
                del self._items[handle]
            return len(dead)


class MemoryRunStore:
    """Run states in a dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[str, str, str, float]] = {}

    async def save(
        self,
        run_id: str,
        *,
        tenant: str,
        status: str,
        state_json: str,
        now: float | None = None,
        user: str | None = None,
    ) -> None:
        at = now_or(now)  # `user`: in process memory nothing outlives the process to be sealed
        with self._lock:
            current = self._items.get(run_id)
            if current is not None and current[0] != tenant:
                raise StoreError(f"run {run_id!r} belongs to another tenant")
            self._items[run_id] = (tenant, status, state_json, at)

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        with self._lock:
            item = self._items.get(run_id)
        if item is None or (tenant is not None and item[0] != tenant):
            return None
        return RunState(item[1], item[2])

    async def list(
        self, *, status: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> builtins.list[RunSummary]:
        with self._lock:
            rows = [
                RunSummary(run_id, item[1], item[3])
                for run_id, item in self._items.items()
                if (status is None or item[1] == status) and (tenant is None or item[0] == tenant)
            ]
        rows.sort(key=lambda r: (-r.updated_at, r.run_id))
        return rows[:limit]


class MemoryRateLimiter:
    """Token buckets in a dict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    async def acquire(
        self, key: str, *, rate_per_s: float, burst: int, cost: float = 1, now: float | None = None
    ) -> float:
        check_bucket_args(rate_per_s, burst, cost)
        at = now_or(now)
        with self._lock:
            tokens, stamp = self._buckets.get(key, (None, None))
            tokens, stamp, wait = token_bucket(
                tokens, stamp, rate_per_s=rate_per_s, burst=burst, cost=cost, now=at
            )
            self._buckets[key] = (tokens, stamp)
            return wait


class MemoryStores(Stores):
    """All stores in process memory."""

    def __init__(self, *, secret: bytes | str | None = None) -> None:
        from maitre.storage.subject_keys import MemorySubjectKeys, master_secret

        super().__init__(
            subject_keys=MemorySubjectKeys(master_secret(secret, database=":memory:")),
            approvals=MemoryApprovalStore(),
            idempotency=MemoryIdempotencyStore(),
            audit=MemoryAuditStore(),
            handles=MemoryHandleStore(),
            runs=MemoryRunStore(),
            rate_limits=MemoryRateLimiter(),
            backend="memory",
        )
