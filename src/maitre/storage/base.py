"""What the gate keeps between calls: one small record and one Protocol per concern.

Every backend (memory, SQLite, Postgres, and Redis for rate limits) implements these Protocols and is
run through the same contract suite (`tests/stores/test_contract.py`). The guarantees the governance
stages rely on are stated here, once, and every backend must keep them across processes:

- `ApprovalStore.decide` moves a request out of `pending` at most once, and never after expiry.
- `ApprovalStore.consume` turns `approved` into `used` at most once, and only for the exact hash the
  approval was granted for: different arguments never run under an old approval.
- `IdempotencyStore.begin` gives a key to exactly one caller; everyone else sees the existing record.
  `take_over` (of a crashed or uncertain key) and a `begin` after the dedupe window do the same.
- `AuditStore.append` produces one chain: consecutive seqs, each entry linked to the one before.
- `RateLimiter.acquire` spends tokens atomically.

Time is passed in (`now=`, unix seconds) so tests and replays are deterministic; `None` means
`time.time()`. Errors (developer misuse or a store in a bad state, never something a model sent),
under `maitre.exceptions.StoreError` (re-exported here):

    StoreError
     ├── AlreadyExistsError      create()/put() with an id that is taken
     ├── ApprovalStateError      decide() on a request that is not pending, is expired or is unknown
     ├── IdempotencyStateError   complete() on a key that is unknown or already completed
     └── StoreBusyError          the store stayed locked past its timeout
"""

from __future__ import annotations

import copy
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from maitre.audit.chain import GENESIS_HASH, AuditEntry, seal
from maitre.exceptions import StoreError
from maitre.types import TaintSource

if TYPE_CHECKING:
    from maitre.storage.subject_keys import SubjectKeys

__all__ = [
    "AlreadyExistsError",
    "ApprovalRequest",
    "ApprovalStateError",
    "ApprovalStatus",
    "ApprovalStore",
    "AuditEntry",
    "AuditStore",
    "HandleData",
    "HandleStore",
    "IdempotencyRecord",
    "IdempotencyState",
    "IdempotencyStateError",
    "IdempotencyStore",
    "RateLimiter",
    "RunState",
    "RunStore",
    "RunSummary",
    "StoreBusyError",
    "StoreError",
    "Stores",
    "check_bucket_args",
    "check_new_request",
    "completion_refused",
    "decision_fields",
    "effective_status",
    "not_decidable",
    "now_or",
    "seal_next",
    "token_bucket",
]

ApprovalStatus = Literal["pending", "approved", "denied", "used", "expired"]
"""`expired` is never stored: a pending or approved request past `expires_at` reads as expired."""

IdempotencyState = Literal["in_flight", "completed", "uncertain"]


class AlreadyExistsError(StoreError):
    """An id or handle that must be new is already taken."""


class ApprovalStateError(StoreError):
    """A decision was attempted on an approval that cannot take it."""

    def __init__(self, message: str, *, approval_id: str, status: ApprovalStatus | None) -> None:
        super().__init__(message)
        self.approval_id = approval_id
        """The request concerned."""
        self.status = status
        """Its effective status (None when the request does not exist)."""


class IdempotencyStateError(StoreError):
    """An idempotency key is not in a state that allows the operation."""


class StoreBusyError(StoreError):
    """The store stayed locked by other writers for longer than its busy timeout."""


def now_or(now: float | None) -> float:
    """`now` if given, else the current unix time."""
    return time.time() if now is None else float(now)


# ---------------------------------------------------------------------------------------------- approvals


@dataclass(kw_only=True)
class ApprovalRequest:
    """A call that waits for a human decision, bound to the hash of its exact arguments."""

    id: str
    """Unguessable id (minted by the gate)."""
    tool: str
    """Canonical tool name."""
    arguments: dict[str, Any]
    """The validated arguments, JSON-ready, as the approver will see them."""
    call_hash: str
    """sha256 hex over tool + canonical arguments + principal + run."""
    user: str
    """Who asked (the principal's user)."""
    tenant: str
    """The principal's tenant; listing and deciding can be scoped by it."""
    run_id: str | None = None
    """The paused run, if any."""
    reason: str = ""
    """Why approval is needed, in words (the policy decision's reason), shown to the approver."""
    created_at: float
    """Unix time the request was made."""
    expires_at: float
    """After this the request can be neither decided nor used."""
    status: ApprovalStatus = "pending"
    """Stored state; reads report `expired` for a pending or approved request past `expires_at`."""
    approver: str | None = None
    """Who decided."""
    decided_at: float | None = None
    """When the decision was taken."""
    message: str | None = None
    """The denial message (goes back to the model) or the approver's note."""
    edited_arguments: dict[str, Any] | None = None
    """Arguments the approver changed; the gate validates them again and they get a new hash."""
    approved_hash: str | None = None
    """The only call hash this approval may be used for (`call_hash` unless arguments were edited)."""
    used_at: float | None = None
    """When the approval was consumed by an execution."""
    rule: str = ""
    """The policy rule that asked (`risk-matrix`, `taint`, `tool`, ...; `ApprovalTicket.rule`).
    Empty for a request stored before the rule was kept."""
    taint: TaintSource | None = None
    """The untrusted result that tainted the run, whenever the run was tainted when the request was
    made, whatever rule asked (an approver judges any request better knowing what untrusted content
    the model had read). None for an untainted run, or a request stored before taint was kept."""
    effect: str | None = None
    """The tool's declared effect when the request was made (`read`, `write`, `destructive`)."""
    risk: str | None = None
    """The tool's declared risk level when the request was made (`low` ... `critical`)."""
    personal: bool = False
    """The tool is personal (`Tool.personal`): the SQL stores keep `arguments` and
    `edited_arguments` sealed under the user's key, opened here while that key lives; once it is
    erased (a forget) they read as `{"$forgotten": true}`."""

    @property
    def approved_arguments(self) -> dict[str, Any]:
        """The arguments the approval covers: the edited ones if any, else the original ones."""
        return self.edited_arguments if self.edited_arguments is not None else self.arguments


def effective_status(status: str, expires_at: float, now: float) -> ApprovalStatus:
    """The status a reader sees: pending/approved turn into `expired` once `now >= expires_at`."""
    if status in ("pending", "approved") and now >= expires_at:
        return "expired"
    return status  # type: ignore[return-value]


def check_new_request(request: ApprovalRequest) -> None:
    """`create()` takes only a `pending` request; every backend refuses anything else the same way."""
    if request.status != "pending":
        raise ValueError(f"a new approval request must be pending, not {request.status!r}")


def not_decidable(approval_id: str, status: ApprovalStatus | None) -> ApprovalStateError:
    """The error `decide()` raises for a request that is unknown (`status` None) or not `pending`."""
    if status is None:
        return ApprovalStateError(
            f"approval {approval_id!r} does not exist", approval_id=approval_id, status=None
        )
    return ApprovalStateError(
        f"approval {approval_id!r} is {status}, not pending", approval_id=approval_id, status=status
    )


def decision_fields(
    call_hash: str,
    approve: bool,
    approver: str,
    message: str | None,
    edited_arguments: dict[str, Any] | None,
    approved_hash: str | None,
    at: float,
) -> dict[str, Any]:
    """The fields a decision sets, checked the same way by every backend."""
    if approve:
        if edited_arguments is not None and approved_hash is None:
            raise ValueError("approving edited arguments needs approved_hash: the hash of the edited call")
        return {
            "status": "approved",
            "approver": approver,
            "decided_at": at,
            "message": message,
            "edited_arguments": copy.deepcopy(edited_arguments),
            "approved_hash": approved_hash or call_hash,
        }
    return {
        "status": "denied",
        "approver": approver,
        "decided_at": at,
        "message": message,
        "edited_arguments": None,
        "approved_hash": None,
    }


@runtime_checkable
class ApprovalStore(Protocol):
    """**Protocol:** persisted approval requests with atomic, once-only transitions."""

    async def create(self, request: ApprovalRequest) -> ApprovalRequest:
        """Persist a new request. It must be `pending`. Raises `AlreadyExistsError` on a taken id."""
        ...

    async def get(self, approval_id: str, *, now: float | None = None) -> ApprovalRequest | None:
        """The request with its effective status, or None."""
        ...

    async def list(
        self,
        *,
        status: ApprovalStatus | None = None,
        tenant: str | None = None,
        now: float | None = None,
        limit: int | None = None,
    ) -> list[ApprovalRequest]:
        """Requests, oldest first, filtered by effective status and tenant."""
        ...

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
        """Approve or deny, atomically, only from `pending` and before expiry.

        When approving with `edited_arguments`, `approved_hash` (the hash of the edited call) is
        required; without edits it defaults to `call_hash`. Raises `ApprovalStateError` when the
        request is unknown, already decided or expired.
        """
        ...

    async def consume(self, approval_id: str, *, call_hash: str, now: float | None = None) -> bool:
        """Atomically turn `approved` into `used` when `call_hash` equals the approved hash and the
        request has not expired. True for exactly one caller; False otherwise, including for every
        later or concurrent attempt."""
        ...


# ------------------------------------------------------------------------------------------- idempotency


@dataclass(kw_only=True)
class IdempotencyRecord:
    """The intent of a side effect, recorded before it happens."""

    key: str
    """Minted by the runtime (never by the model); unique within a tenant."""
    tenant: str
    """Keys of different tenants never meet."""
    tool: str
    """Canonical tool name."""
    fingerprint: str
    """Hash of the logical call; the same key with another fingerprint is a conflict."""
    state: IdempotencyState
    """`in_flight` (owner executing), `completed` (result stored) or `uncertain` (outcome unknown)."""
    result: str | None = None
    """The stored result as JSON text, once completed."""
    created_at: float
    """When the intent was recorded."""
    updated_at: float
    """Last state change."""
    lease_until: float
    """An `in_flight` record past its lease is read as `uncertain`: its owner is presumed dead."""
    owner: str | None = None
    """Who holds an `in_flight` record: an opaque text the gate writes (host, pid, process start,
    a per-process id) so a retry can tell a live owner from a crashed one. None on records written
    before owners were stored."""


@runtime_checkable
class IdempotencyStore(Protocol):
    """**Protocol:** intent records that give each key to exactly one executor."""

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
        """Claim `key`: None when this caller now owns it (an `in_flight` record was inserted),
        otherwise the existing record, unchanged, except that an `in_flight` record whose lease has
        passed is first turned into `uncertain` (its owner crashed; the outcome is unknown).

        With `reuse_completed_after_s`, a `completed` record whose completion is older than that
        no longer blocks: the caller takes the key over as a fresh begin (in one atomic step, so of
        several callers after the window exactly one owns it). That is the dedupe window of a call
        made without a run: inside it a retry replays, after it the same arguments run again."""
        ...

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
        """Become the owner of an `uncertain` record, or of an `in_flight` one whose owner is dead,
        if it is still exactly as `seen` (same state, `updated_at` and owner): it turns `in_flight`
        for `owner` with a new lease. True when this caller now owns it; of several callers holding
        the same `seen`, one at most. Used to run a tool's `reconcile` hook, then execute or not."""
        ...

    async def complete(self, key: str, result_json: str, *, tenant: str, now: float | None = None) -> None:
        """Store the result. Allowed from `in_flight` or `uncertain`; raises `IdempotencyStateError`
        when the key is unknown or already completed (a stored result is never overwritten)."""
        ...

    async def mark_uncertain(
        self, key: str, *, tenant: str, now: float | None = None, owner: str | None = None
    ) -> bool:
        """`in_flight` -> `uncertain` (timeout or crash: the side effect may have happened).
        With `owner`, only while that owner holds the record. True if the record changed."""
        ...

    async def release(self, key: str, *, tenant: str) -> bool:
        """Delete the key (the tool failed cleanly with no side effect). True if it existed."""
        ...

    async def get(self, key: str, *, tenant: str) -> IdempotencyRecord | None:
        """The record as stored, or None."""
        ...


def completion_refused(key: str, *, exists: bool) -> IdempotencyStateError:
    """The error `complete()` raises: the key is unknown, or (`exists`) it is already completed."""
    if not exists:
        return IdempotencyStateError(f"idempotency key {key!r} is unknown (released or never begun)")
    return IdempotencyStateError(f"idempotency key {key!r} is already completed")


# ------------------------------------------------------------------------------------------------- audit


@runtime_checkable
class AuditStore(Protocol):
    """**Protocol:** an append-only, hash-chained log (see `maitre.audit.chain`)."""

    async def append(self, entry: AuditEntry) -> AuditEntry:
        """Seal `entry` after the current last one (seq = last + 1, prev_hash = last hash) and store
        it, atomically across processes. Its own `seq`, `prev_hash` and `hash` are ignored."""
        ...

    async def entries(self, *, since_seq: int = 0, limit: int | None = None) -> list[AuditEntry]:
        """Entries with seq > `since_seq`, in seq order."""
        ...

    async def last(self) -> AuditEntry | None:
        """The newest entry."""
        ...


def seal_next(entry: AuditEntry, head: tuple[int, str] | None) -> AuditEntry:
    """`entry` sealed after the chain's head `(seq, hash)`, or as the first entry when there is none.

    Callers hold whatever lock makes reading the head and storing the result one step.
    """
    seq, prev = (head[0] + 1, head[1]) if head else (1, GENESIS_HASH)
    return seal(entry, seq=seq, prev_hash=prev)


# ----------------------------------------------------------------------------------------------- handles


class HandleData(NamedTuple):
    """A cut result: the pages and what the shape stage noted about them."""

    pages: list[str]
    meta: dict[str, Any]


@runtime_checkable
class HandleStore(Protocol):
    """**Protocol:** results cut by a token cap, kept for paging, visible only to their tenant."""

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
        """Store the pages under an unguessable `handle`. Raises `AlreadyExistsError` if taken."""
        ...

    async def get(
        self, handle: str, *, tenant: str, user: str | None = None, now: float | None = None
    ) -> HandleData | None:
        """The pages, or None if unknown, expired, or owned by another tenant (or, when `user` is
        given, another user: a cut result is as private as the call that produced it)."""
        ...

    async def purge(self, *, now: float | None = None) -> int:
        """Delete expired handles; returns how many."""
        ...


# -------------------------------------------------------------------------------------------------- runs


class RunState(NamedTuple):
    """A saved run: its status and serialised state."""

    status: str
    state_json: str


class RunSummary(NamedTuple):
    """One line of a run listing."""

    run_id: str
    status: str
    updated_at: float


@runtime_checkable
class RunStore(Protocol):
    """**Protocol:** serialised agent runs, so a paused run resumes in any process."""

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
        """Insert or replace. Raises `StoreError` if the run belongs to another tenant.

        With `user` (the run's principal), a durable store keeps `state_json` - the transcript,
        personal data - sealed under that user's key (`maitre.storage.subject_keys`), so
        `Stores.erase_subject` makes it unreadable."""
        ...

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        """The saved run (None if unknown, if `tenant` is given and differs, or if it was sealed
        for a user whose key a forget erased)."""
        ...

    async def list(
        self, *, status: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[RunSummary]:
        """Runs, most recently updated first."""
        ...


# ------------------------------------------------------------------------------------------- rate limits


@runtime_checkable
class RateLimiter(Protocol):
    """**Protocol:** token buckets keyed by principal and tool."""

    async def acquire(
        self, key: str, *, rate_per_s: float, burst: int, cost: float = 1, now: float | None = None
    ) -> float:
        """Spend `cost` tokens from the bucket `key` (capacity `burst`, refilled at `rate_per_s`; a new
        bucket starts full). Returns 0.0 when spent, else the seconds until `cost` tokens will be
        there (nothing is spent then). Raises ValueError if `cost` can never fit."""
        ...


def token_bucket(
    tokens: float | None,
    updated_at: float | None,
    *,
    rate_per_s: float,
    burst: int,
    cost: float,
    now: float,
) -> tuple[float, float, float]:
    """The pure token-bucket step shared by the backends that compute it in Python.

    Returns (tokens_after, updated_at_after, wait_s). A clock that goes backwards refills nothing.
    """
    if tokens is None or updated_at is None:
        tokens, updated_at = float(burst), now
    elapsed = max(0.0, now - updated_at)
    available = min(float(burst), tokens + elapsed * rate_per_s)
    stamp = max(updated_at, now)
    if available >= cost:
        return available - cost, stamp, 0.0
    return available, stamp, (cost - available) / rate_per_s


def check_bucket_args(rate_per_s: float, burst: int, cost: float) -> None:
    """Reject bucket parameters that could never allow a call."""
    if rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
    if cost <= 0:
        raise ValueError(f"cost must be > 0, got {cost}")
    if cost > burst:
        raise ValueError(f"cost {cost} exceeds burst {burst}: the call could never be allowed")


# ------------------------------------------------------------------------------------------------ bundle


@dataclass(kw_only=True)
class Stores:
    """Every store the gate needs, usually sharing one backend (one SQLite file, one Postgres schema).

    Use as `async with await open_stores(url) as stores:` or call `await stores.close()`.
    """

    approvals: ApprovalStore
    """Approval requests."""
    idempotency: IdempotencyStore
    """Idempotency intent records."""
    audit: AuditStore
    """The hash-chained audit log."""
    handles: HandleStore
    """Result handles for paged output."""
    runs: RunStore
    """Serialised agent runs."""
    rate_limits: RateLimiter
    """Token buckets (may live elsewhere, e.g. Redis)."""
    backend: str = "custom"
    """Short backend name: `memory`, `sqlite`, `postgres`."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, repr=False)
    """Called, last first, by `close()`."""
    subject_keys: SubjectKeys = field(default_factory=lambda: _memory_subject_keys(), repr=False)
    """Per-subject keys that seal personal tools' data (`maitre.storage.subject_keys`); the SQL
    stores keep them in their database, anything else in process memory."""

    async def erase_subject(self, tenant: str, user: str) -> bool:
        """Crypto-shred everything the gate's stores hold for one user of one tenant from personal
        tools (`Tool.personal`): their sealed results, arguments and digests become unreadable and
        unconfirmable, in this database, its WAL and every backup, while the audit chain still
        verifies. Returns True when the subject had a key. `forget` calls it (see `maitre.memory`)."""
        return await self.subject_keys.erase(tenant, user)

    async def close(self) -> None:
        """Release connections. Idempotent."""
        closers, self.closers = self.closers, []
        for close in reversed(closers):
            await close()

    async def __aenter__(self) -> Stores:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _memory_subject_keys() -> SubjectKeys:
    from maitre.storage.subject_keys import MemorySubjectKeys

    return MemorySubjectKeys()
