"""The store contract: one suite, run against every backend (memory, SQLite, Postgres; Redis for rate limits).

Each test states a guarantee the gate's governance stages rely on. Concurrency inside one process is
tested here with many tasks; across processes in `test_multiprocess.py`.
"""

from __future__ import annotations

import sqlite3

import anyio
import pytest

from maitre.audit import GENESIS_HASH, AuditEntry, entry_hash, verify, verify_store
from maitre.stores import (
    AlreadyExistsError,
    ApprovalRequest,
    ApprovalStateError,
    ApprovalStore,
    AuditStore,
    HandleStore,
    IdempotencyStateError,
    IdempotencyStore,
    RateLimiter,
    RunStore,
    StoreError,
    Stores,
)

pytestmark = pytest.mark.anyio

H1 = "a" * 64
H2 = "b" * 64
T0 = 1_000_000.0


def request_(
    id_: str = "apr-1", *, tenant: str = "acme", created: float = T0, ttl: float = 600.0, **overrides: object
) -> ApprovalRequest:
    fields: dict[str, object] = dict(
        id=id_,
        tool="issue_refund",
        arguments={"order_id": "ORD-00000042", "amount": "12.50", "note": "café ☕", "tags": [1, 2.5, None]},
        call_hash=H1,
        user="ann",
        tenant=tenant,
        run_id="run-1",
        reason="refunds over 10 need a human",
        created_at=created,
        expires_at=created + ttl,
    )
    fields.update(overrides)
    return ApprovalRequest(**fields)  # type: ignore[arg-type]


def entry(i: int = 0, **overrides: object) -> AuditEntry:
    fields: dict[str, object] = dict(
        at=T0 + i + 0.125,
        user="ann",
        tenant="acme",
        tool="issue_refund",
        decision="allow",
        run_id="run-1",
        call_id=f"call-{i}",
        call_hash=H1,
        arguments=H2,
        result_digest="c" * 64,
        duration_ms=1.5 + i,
    )
    fields.update(overrides)
    return AuditEntry(**fields)  # type: ignore[arg-type]


async def test_every_backend_implements_every_protocol(stores: Stores) -> None:
    """Each store of the bundle satisfies its Protocol."""
    assert isinstance(stores.approvals, ApprovalStore)
    assert isinstance(stores.idempotency, IdempotencyStore)
    assert isinstance(stores.audit, AuditStore)
    assert isinstance(stores.handles, HandleStore)
    assert isinstance(stores.runs, RunStore)
    assert isinstance(stores.rate_limits, RateLimiter)


# ------------------------------------------------------------------------------------------------ approvals


async def test_an_approval_request_round_trips_every_field(stores: Stores) -> None:
    """What is created is what is read back, arguments included, with status pending."""
    created = await stores.approvals.create(request_())
    got = await stores.approvals.get("apr-1", now=T0 + 1)
    assert got == created == request_()
    assert got is not None and got.status == "pending" and got.approved_arguments == request_().arguments


async def test_an_approval_id_cannot_be_created_twice(stores: Stores) -> None:
    """A taken id raises instead of overwriting a request (and any decision on it)."""
    await stores.approvals.create(request_())
    with pytest.raises(AlreadyExistsError):
        await stores.approvals.create(request_(reason="other"))


async def test_a_request_cannot_be_created_already_approved(stores: Stores) -> None:
    """create() only accepts pending requests: no approval is born approved."""
    with pytest.raises(ValueError, match="pending"):
        await stores.approvals.create(request_(status="approved", approved_hash=H1))
    assert await stores.approvals.get("apr-1") is None


async def test_approving_binds_the_approval_to_the_call_hash(stores: Stores) -> None:
    """An approval without edits is valid for the original call hash, and the decision persists."""
    await stores.approvals.create(request_())
    decided = await stores.approvals.decide("apr-1", approve=True, approver="bob", message="ok", now=T0 + 5)
    assert (decided.status, decided.approver, decided.decided_at, decided.approved_hash) == (
        "approved",
        "bob",
        T0 + 5,
        H1,
    )
    assert await stores.approvals.get("apr-1", now=T0 + 6) == decided


async def test_a_denial_keeps_its_message_and_can_never_be_used(stores: Stores) -> None:
    """A denied request carries the approver's message back and consume() refuses it."""
    await stores.approvals.create(request_())
    denied = await stores.approvals.decide(
        "apr-1", approve=False, approver="bob", message="refund policy: max 10", now=T0 + 5
    )
    assert (denied.status, denied.message, denied.approved_hash) == ("denied", "refund policy: max 10", None)
    assert not await stores.approvals.consume("apr-1", call_hash=H1, now=T0 + 6)


async def test_a_request_is_decided_at_most_once(stores: Stores) -> None:
    """A second decision (either way) raises and changes nothing."""
    await stores.approvals.create(request_())
    await stores.approvals.decide("apr-1", approve=True, approver="bob", now=T0 + 1)
    with pytest.raises(ApprovalStateError) as info:
        await stores.approvals.decide("apr-1", approve=False, approver="eve", now=T0 + 2)
    assert info.value.status == "approved"
    got = await stores.approvals.get("apr-1", now=T0 + 3)
    assert got is not None and (got.status, got.approver) == ("approved", "bob")


async def test_an_expired_request_cannot_be_decided_and_reads_as_expired(stores: Stores) -> None:
    """Past expires_at a pending request is `expired`: deciding it raises."""
    await stores.approvals.create(request_(ttl=60))
    with pytest.raises(ApprovalStateError) as info:
        await stores.approvals.decide("apr-1", approve=True, approver="bob", now=T0 + 60)
    assert info.value.status == "expired"
    got = await stores.approvals.get("apr-1", now=T0 + 61)
    assert got is not None and got.status == "expired"


async def test_deciding_an_unknown_request_raises(stores: Stores) -> None:
    """There is nothing to approve for an id nobody created."""
    with pytest.raises(ApprovalStateError) as info:
        await stores.approvals.decide("nope", approve=True, approver="bob", now=T0)
    assert info.value.status is None and info.value.approval_id == "nope"


async def test_edited_arguments_get_their_own_hash_and_the_old_call_no_longer_runs(stores: Stores) -> None:
    """Approving edited arguments binds the approval to the new hash only."""
    await stores.approvals.create(request_())
    with pytest.raises(ValueError, match="approved_hash"):
        await stores.approvals.decide(
            "apr-1", approve=True, approver="bob", edited_arguments={"amount": "5.00"}, now=T0 + 1
        )
    decided = await stores.approvals.decide(
        "apr-1",
        approve=True,
        approver="bob",
        edited_arguments={"amount": "5.00"},
        approved_hash=H2,
        now=T0 + 1,
    )
    assert decided.approved_hash == H2 and decided.approved_arguments == {"amount": "5.00"}
    assert not await stores.approvals.consume("apr-1", call_hash=H1, now=T0 + 2)
    assert await stores.approvals.consume("apr-1", call_hash=H2, now=T0 + 2)


async def test_an_approval_is_consumed_exactly_once(stores: Stores) -> None:
    """consume() is True once, then False forever; the request reads as used."""
    await stores.approvals.create(request_())
    await stores.approvals.decide("apr-1", approve=True, approver="bob", now=T0 + 1)
    assert await stores.approvals.consume("apr-1", call_hash=H1, now=T0 + 2)
    assert not await stores.approvals.consume("apr-1", call_hash=H1, now=T0 + 3)
    got = await stores.approvals.get("apr-1", now=T0 + 4)
    assert got is not None and (got.status, got.used_at) == ("used", T0 + 2)


async def test_different_arguments_never_consume_an_approval(stores: Stores) -> None:
    """A wrong hash is refused and leaves the approval usable by the right one."""
    await stores.approvals.create(request_())
    await stores.approvals.decide("apr-1", approve=True, approver="bob", now=T0 + 1)
    assert not await stores.approvals.consume("apr-1", call_hash=H2, now=T0 + 2)
    got = await stores.approvals.get("apr-1", now=T0 + 2)
    assert got is not None and got.status == "approved"
    assert await stores.approvals.consume("apr-1", call_hash=H1, now=T0 + 3)


async def test_pending_unknown_and_expired_approvals_are_never_consumed(stores: Stores) -> None:
    """No approval, no execution: pending, unknown and expired requests all refuse."""
    await stores.approvals.create(request_("pending"))
    await stores.approvals.create(request_("late", ttl=60))
    await stores.approvals.decide("late", approve=True, approver="bob", now=T0 + 1)
    assert not await stores.approvals.consume("pending", call_hash=H1, now=T0 + 2)
    assert not await stores.approvals.consume("missing", call_hash=H1, now=T0 + 2)
    assert not await stores.approvals.consume("late", call_hash=H1, now=T0 + 60)
    late = await stores.approvals.get("late", now=T0 + 60)
    assert late is not None and late.status == "expired"


async def test_listing_filters_by_effective_status_and_tenant(stores: Stores) -> None:
    """list() sees expiry, filters by tenant, keeps creation order and honours limit."""
    for i, (id_, tenant, ttl) in enumerate(
        [
            ("p1", "acme", 600),
            ("p2", "acme", 600),
            ("x1", "other", 600),
            ("e1", "acme", 10),
            ("a1", "acme", 600),
            ("d1", "acme", 600),
            ("u1", "acme", 600),
        ]
    ):
        await stores.approvals.create(request_(id_, tenant=tenant, created=T0 + i, ttl=ttl))
    for id_ in ("a1", "u1"):
        await stores.approvals.decide(id_, approve=True, approver="bob", now=T0 + 8)
    await stores.approvals.decide("d1", approve=False, approver="bob", now=T0 + 8)
    assert await stores.approvals.consume("u1", call_hash=H1, now=T0 + 9)
    now = T0 + 20

    async def ids(**filters: object) -> list[str]:
        return [r.id for r in await stores.approvals.list(now=now, **filters)]  # type: ignore[arg-type]

    assert await ids(status="pending", tenant="acme") == ["p1", "p2"]
    assert await ids(status="pending") == ["p1", "p2", "x1"]
    assert await ids(status="expired") == ["e1"]
    assert await ids(status="approved") == ["a1"]
    assert await ids(status="denied") == ["d1"]
    assert await ids(status="used") == ["u1"]
    assert await ids(tenant="other") == ["x1"]
    assert await ids(tenant="acme", limit=3) == ["p1", "p2", "e1"]
    assert len(await ids()) == 7


async def test_concurrent_consumers_in_one_process_get_one_true(stores: Stores) -> None:
    """Twenty tasks racing consume() on one approval: exactly one wins."""
    await stores.approvals.create(request_())
    await stores.approvals.decide("apr-1", approve=True, approver="bob", now=T0 + 1)
    results: list[bool] = []

    async def attempt() -> None:
        results.append(await stores.approvals.consume("apr-1", call_hash=H1, now=T0 + 2))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(attempt)
    assert results.count(True) == 1 and len(results) == 20


# --------------------------------------------------------------------------------------------- idempotency


async def test_the_first_begin_owns_the_key_and_records_intent(stores: Stores) -> None:
    """begin() returns None to the owner and leaves an in_flight record with a lease."""
    owned = await stores.idempotency.begin(
        "k1", tenant="acme", tool="issue_refund", fingerprint="f1", now=T0, lease_s=30
    )
    assert owned is None
    record = await stores.idempotency.get("k1", tenant="acme")
    assert record is not None
    assert (record.state, record.fingerprint, record.tool, record.result) == (
        "in_flight",
        "f1",
        "issue_refund",
        None,
    )
    assert (record.created_at, record.updated_at, record.lease_until) == (T0, T0, T0 + 30)


async def test_a_second_begin_sees_the_existing_record_unchanged(stores: Stores) -> None:
    """Nobody else owns a key that is taken, and their begin() overwrites nothing."""
    await stores.idempotency.begin("k1", tenant="acme", tool="issue_refund", fingerprint="f1", now=T0)
    again = await stores.idempotency.begin("k1", tenant="acme", tool="other", fingerprint="f2", now=T0 + 1)
    assert again is not None and (again.state, again.fingerprint, again.tool) == (
        "in_flight",
        "f1",
        "issue_refund",
    )


async def test_a_completed_key_returns_its_stored_result_byte_for_byte(stores: Stores) -> None:
    """complete() stores the JSON text; later begin() calls get it back for replay."""
    result = '{"b":1, "a":"café","n":1.10}'
    await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0)
    await stores.idempotency.complete("k1", result, tenant="acme", now=T0 + 1)
    replay = await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0 + 2)
    assert replay is not None and (replay.state, replay.result, replay.updated_at) == (
        "completed",
        result,
        T0 + 1,
    )


async def test_a_stored_result_is_never_overwritten(stores: Stores) -> None:
    """Completing twice, or completing an unknown key, raises."""
    await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0)
    await stores.idempotency.complete("k1", '"first"', tenant="acme", now=T0 + 1)
    with pytest.raises(IdempotencyStateError, match="already completed"):
        await stores.idempotency.complete("k1", '"second"', tenant="acme", now=T0 + 2)
    with pytest.raises(IdempotencyStateError, match="unknown"):
        await stores.idempotency.complete("nope", '"x"', tenant="acme", now=T0 + 2)
    record = await stores.idempotency.get("k1", tenant="acme")
    assert record is not None and record.result == '"first"'


async def test_an_uncertain_key_blocks_new_owners_until_resolved(stores: Stores) -> None:
    """mark_uncertain() turns in_flight into uncertain once; the owner may still complete it."""
    await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0)
    assert await stores.idempotency.mark_uncertain("k1", tenant="acme", now=T0 + 1)
    assert not await stores.idempotency.mark_uncertain("k1", tenant="acme", now=T0 + 2)
    seen = await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0 + 3)
    assert seen is not None and seen.state == "uncertain"
    await stores.idempotency.complete("k1", "{}", tenant="acme", now=T0 + 4)
    done = await stores.idempotency.get("k1", tenant="acme")
    assert done is not None and done.state == "completed"
    assert not await stores.idempotency.mark_uncertain("k1", tenant="acme", now=T0 + 5)


async def test_a_released_key_can_be_owned_again(stores: Stores) -> None:
    """release() deletes the intent (clean failure, no side effect) so a retry may run."""
    await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0)
    assert await stores.idempotency.release("k1", tenant="acme")
    assert not await stores.idempotency.release("k1", tenant="acme")
    assert await stores.idempotency.get("k1", tenant="acme") is None
    assert await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0 + 1) is None


async def test_an_in_flight_key_past_its_lease_reads_as_uncertain(stores: Stores) -> None:
    """A crashed owner's key is reported (and persisted) as uncertain, never handed to a new owner."""
    await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0, lease_s=10)
    live = await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0 + 9)
    assert live is not None and live.state == "in_flight"
    dead = await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0 + 10)
    assert dead is not None and (dead.state, dead.updated_at) == ("uncertain", T0 + 10)
    stored = await stores.idempotency.get("k1", tenant="acme")
    assert stored is not None and stored.state == "uncertain"


async def test_idempotency_keys_never_cross_tenants(stores: Stores) -> None:
    """The same key in two tenants is two keys: no replay of another tenant's result."""
    await stores.idempotency.begin("refund:ORD-1", tenant="acme", tool="t", fingerprint="f", now=T0)
    await stores.idempotency.complete("refund:ORD-1", '"acme secret"', tenant="acme", now=T0)
    assert (
        await stores.idempotency.begin("refund:ORD-1", tenant="globex", tool="t", fingerprint="f", now=T0)
        is None
    )
    assert await stores.idempotency.get("refund:ORD-1", tenant="globex") is not None
    assert not await stores.idempotency.release("refund:ORD-1", tenant="other")


async def test_concurrent_begins_in_one_process_have_one_owner(stores: Stores) -> None:
    """Twenty tasks racing begin() on one key: exactly one owns it."""
    owners: list[bool] = []

    async def attempt() -> None:
        record = await stores.idempotency.begin("k1", tenant="acme", tool="t", fingerprint="f", now=T0)
        owners.append(record is None)

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(attempt)
    assert owners.count(True) == 1 and len(owners) == 20


# --------------------------------------------------------------------------------------------------- audit


async def test_appends_form_a_chain_from_genesis(stores: Stores) -> None:
    """seq counts from 1, each prev_hash is the previous hash, hashes match content."""
    first = await stores.audit.append(entry(0, seq=99, prev_hash="x", hash="forged"))
    second = await stores.audit.append(entry(1))
    assert (first.seq, first.prev_hash) == (1, GENESIS_HASH)
    assert (second.seq, second.prev_hash) == (2, first.hash)
    assert first.hash == entry_hash(first) and second.hash == entry_hash(second)
    assert await stores.audit.last() == second


async def test_audit_entries_round_trip_exactly_and_verify(stores: Stores) -> None:
    """Every field survives storage (floats, None, bools, unicode), so stored hashes still verify."""
    appended = [
        await stores.audit.append(entry(0)),
        await stores.audit.append(
            entry(
                1,
                decision="deny",
                error_code="PERMISSION_DENIED",
                detail="cross-tenant",
                result_digest=None,
                duration_ms=0.1 + 0.2,
            )
        ),
        await stores.audit.append(
            entry(
                2,
                decision="replayed",
                replayed=True,
                user="zoë",
                at=T0 + 1e-6,
                approval_id="apr-1",
                run_id=None,
                call_id=None,
                duration_ms=1000,
            )
        ),
    ]
    stored = await stores.audit.entries()
    assert stored == appended
    assert verify(stored).ok and (await verify_store(stores.audit, batch=2)).last_seq == 3


async def test_audit_entries_page_by_seq(stores: Stores) -> None:
    """entries(since_seq, limit) pages through the log in order."""
    for i in range(5):
        await stores.audit.append(entry(i))
    assert [e.seq for e in await stores.audit.entries(since_seq=2)] == [3, 4, 5]
    assert [e.seq for e in await stores.audit.entries(since_seq=1, limit=2)] == [2, 3]
    assert await stores.audit.entries(since_seq=5) == []


async def test_an_empty_log_has_no_last_entry_and_verifies(stores: Stores) -> None:
    assert await stores.audit.last() is None
    report = await verify_store(stores.audit)
    assert report.ok and report.checked == 0


async def test_concurrent_appends_in_one_process_stay_one_chain(stores: Stores) -> None:
    """Fifty tasks appending at once: seqs 1..50, no gaps, chain verifies."""
    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(stores.audit.append, entry(i))
    entries = await stores.audit.entries()
    assert [e.seq for e in entries] == list(range(1, 51))
    assert verify(entries).ok


async def test_the_sql_audit_table_refuses_edits_and_verify_catches_a_forced_one(stores: Stores) -> None:
    """UPDATE/DELETE on the audit table are refused; an attacker who drops the guard is still caught."""
    if stores.backend == "memory":
        pytest.skip("the memory backend has no table to tamper with")
    for i in range(4):
        await stores.audit.append(entry(i))
    if stores.backend == "sqlite":
        conn = sqlite3.connect(stores.db.path)  # type: ignore[attr-defined]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE audit SET decision = 'deny' WHERE seq = 2")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM audit WHERE seq = 4")
        conn.execute("DROP TRIGGER audit_no_update")
        conn.execute("UPDATE audit SET decision = 'deny' WHERE seq = 2")
        conn.commit()
        conn.close()
    else:
        import psycopg

        db = stores.db  # type: ignore[attr-defined]
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            for statement in (
                "UPDATE {s}.audit SET decision = 'deny' WHERE seq = 2",
                "DELETE FROM {s}.audit WHERE seq = 4",
                "TRUNCATE {s}.audit",
            ):
                with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                    conn.execute(db.q(statement))
            conn.execute(db.q("ALTER TABLE {s}.audit DISABLE TRIGGER audit_no_change"))
            conn.execute(db.q("UPDATE {s}.audit SET decision = 'deny' WHERE seq = 2"))
    report = await verify_store(stores.audit)
    assert (report.ok, report.first_bad_seq, report.last_seq) == (False, 2, 1)
    assert "altered" in (report.reason or "")


# ------------------------------------------------------------------------------------------------- handles


async def test_a_handle_is_readable_by_its_tenant_only_until_it_expires(stores: Stores) -> None:
    """get() returns the pages to the owning tenant before expiry, None otherwise."""
    pages = ["page one", "page two ☕"]
    await stores.handles.put(
        "h1", tenant="acme", user="ann", pages=pages, meta={"tool": "search", "total": 2}, now=T0, ttl_s=60
    )
    got = await stores.handles.get("h1", tenant="acme", now=T0 + 59)
    assert got is not None and got.pages == pages and got.meta == {"tool": "search", "total": 2}
    pages_, meta = got  # it is a (pages, meta) tuple too
    assert pages_ == pages and meta["total"] == 2
    assert await stores.handles.get("h1", tenant="globex", now=T0 + 1) is None
    assert await stores.handles.get("h1", tenant="acme", now=T0 + 60) is None
    assert await stores.handles.get("nope", tenant="acme", now=T0) is None


async def test_a_handle_asked_for_by_another_user_of_the_tenant_is_not_found(stores: Stores) -> None:
    """With `user=`, only the user who produced the cut result can page through it."""
    await stores.handles.put("h2", tenant="acme", user="ann", pages=["secret"], meta={}, now=T0, ttl_s=60)
    assert (await stores.handles.get("h2", tenant="acme", user="ann", now=T0 + 1)).pages == ["secret"]
    assert await stores.handles.get("h2", tenant="acme", user="bob", now=T0 + 1) is None


async def test_a_live_handle_is_never_overwritten(stores: Stores) -> None:
    """put() on a live handle raises (even from another tenant); an expired one may be reused."""
    await stores.handles.put("h1", tenant="acme", user="ann", pages=["a"], meta={}, now=T0, ttl_s=60)
    with pytest.raises(AlreadyExistsError):
        await stores.handles.put("h1", tenant="globex", user="eve", pages=["evil"], meta={}, now=T0 + 1)
    got = await stores.handles.get("h1", tenant="acme", now=T0 + 2)
    assert got is not None and got.pages == ["a"]
    await stores.handles.put("h1", tenant="globex", user="gil", pages=["b"], meta={}, now=T0 + 61, ttl_s=60)
    again = await stores.handles.get("h1", tenant="globex", now=T0 + 62)
    assert again is not None and again.pages == ["b"]


async def test_purge_deletes_only_expired_handles(stores: Stores) -> None:
    await stores.handles.put("old", tenant="acme", user="ann", pages=["a"], meta={}, now=T0, ttl_s=10)
    await stores.handles.put("new", tenant="acme", user="ann", pages=["b"], meta={}, now=T0, ttl_s=100)
    assert await stores.handles.purge(now=T0 + 50) == 1
    assert await stores.handles.get("new", tenant="acme", now=T0 + 50) is not None
    assert await stores.handles.purge(now=T0 + 50) == 0


# ---------------------------------------------------------------------------------------------------- runs


async def test_a_saved_run_loads_back_and_updates_in_place(stores: Stores) -> None:
    await stores.runs.save("r1", tenant="acme", status="running", state_json='{"step":1}', now=T0)
    await stores.runs.save("r1", tenant="acme", status="paused", state_json='{"step":2}', now=T0 + 5)
    loaded = await stores.runs.load("r1")
    assert loaded == ("paused", '{"step":2}')
    assert loaded is not None and loaded.status == "paused"
    assert await stores.runs.load("r1", tenant="acme") == loaded
    assert await stores.runs.load("nope") is None


async def test_a_run_belongs_to_its_tenant(stores: Stores) -> None:
    """Another tenant can neither read nor overwrite a run."""
    await stores.runs.save("r1", tenant="acme", status="paused", state_json="{}", now=T0)
    assert await stores.runs.load("r1", tenant="globex") is None
    with pytest.raises(StoreError):
        await stores.runs.save("r1", tenant="globex", status="running", state_json='{"evil":1}', now=T0 + 1)
    assert await stores.runs.load("r1") == ("paused", "{}")


async def test_runs_list_newest_first_with_filters(stores: Stores) -> None:
    for i, (run_id, tenant, status) in enumerate(
        [
            ("r1", "acme", "done"),
            ("r2", "acme", "paused"),
            ("r3", "globex", "paused"),
            ("r4", "acme", "paused"),
        ]
    ):
        await stores.runs.save(run_id, tenant=tenant, status=status, state_json="{}", now=T0 + i)
    assert [r.run_id for r in await stores.runs.list()] == ["r4", "r3", "r2", "r1"]
    assert [r.run_id for r in await stores.runs.list(status="paused", tenant="acme")] == ["r4", "r2"]
    assert await stores.runs.list(limit=1) == [("r4", "paused", T0 + 3)]


# --------------------------------------------------------------------------------------------- rate limits


async def test_a_new_bucket_allows_its_burst_then_says_how_long_to_wait(limiter: RateLimiter) -> None:
    """A full bucket of 3 at 2 tokens/s: three calls pass, the fourth waits 0.5 s."""
    waits = [await limiter.acquire("ann:refund", rate_per_s=2, burst=3, now=T0) for _ in range(4)]
    assert waits == [0.0, 0.0, 0.0, pytest.approx(0.5)]


async def test_a_refused_call_spends_nothing_and_tokens_refill_up_to_burst(limiter: RateLimiter) -> None:
    for _ in range(2):
        assert await limiter.acquire("k", rate_per_s=1, burst=2, now=T0) == 0.0
    assert await limiter.acquire("k", rate_per_s=1, burst=2, now=T0 + 0.25) == pytest.approx(0.75)
    assert await limiter.acquire("k", rate_per_s=1, burst=2, now=T0 + 1) == 0.0
    # A long idle period refills to burst, not beyond.
    assert [await limiter.acquire("k", rate_per_s=1, burst=2, now=T0 + 100) for _ in range(3)] == [
        0.0,
        0.0,
        pytest.approx(1.0),
    ]


async def test_costs_and_keys_are_independent(limiter: RateLimiter) -> None:
    assert await limiter.acquire("a", rate_per_s=1, burst=5, cost=4, now=T0) == 0.0
    assert await limiter.acquire("a", rate_per_s=1, burst=5, cost=2, now=T0) == pytest.approx(1.0)
    assert await limiter.acquire("b", rate_per_s=1, burst=5, cost=5, now=T0) == 0.0


async def test_a_clock_going_backwards_refills_nothing(limiter: RateLimiter) -> None:
    assert await limiter.acquire("k", rate_per_s=1, burst=1, now=T0) == 0.0
    assert await limiter.acquire("k", rate_per_s=1, burst=1, now=T0 - 100) == pytest.approx(1.0)


async def test_impossible_bucket_parameters_are_rejected(limiter: RateLimiter) -> None:
    with pytest.raises(ValueError, match="exceeds burst"):
        await limiter.acquire("k", rate_per_s=1, burst=2, cost=3, now=T0)
    with pytest.raises(ValueError, match="rate_per_s"):
        await limiter.acquire("k", rate_per_s=0, burst=2, now=T0)


async def test_concurrent_acquires_spend_each_token_once(limiter: RateLimiter) -> None:
    """Twenty tasks at the same instant on a bucket of 5: exactly five pass."""
    waits: list[float] = []

    async def attempt() -> None:
        waits.append(await limiter.acquire("k", rate_per_s=0.001, burst=5, now=T0))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(attempt)
    assert waits.count(0.0) == 5 and len(waits) == 20
