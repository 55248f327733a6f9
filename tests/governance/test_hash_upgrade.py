"""A retry across the hash-format upgrade (version 1 -> 2) never executes twice.

Before issue 11 the gate hashed sorted-key Python JSON: approval call hashes were bare hex and
idempotency keys `idk_...`. The records such a gate left behind in a real SQLite file are written
here with that algorithm, copied below as data, exactly as it was; then the file is reopened (the
new process after the upgrade) and the same calls are retried through today's gate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import AsyncIterator
from datetime import date, datetime
from datetime import time as dt_time
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from maitre import Gate, IdempotencyKey, Principal, Toolbox, ToolCall
from maitre.jsonutil import compact_json
from maitre.storage.approvals import SQLApprovalStore
from maitre.storage.audit import SQLAuditStore
from maitre.storage.engine.sqlite import SQLiteEngine
from maitre.storage.handles import SQLHandleStore
from maitre.storage.idempotency import SQLIdempotencyStore
from maitre.storage.owners import current_owner
from maitre.storage.rate_limits import SQLRateLimiter
from maitre.storage.runs import SQLRunStore
from maitre.storage.schema import GATE_SCHEMA
from maitre.stores import ApprovalRequest, Stores, open_stores

pytestmark = pytest.mark.anyio

ALICE = Principal(user="alice", tenant="acme")
MANAGER = Principal(user="manager", tenant="acme")
REFUND = {"order_id": "ORD-00000001", "amount": "12.50"}
LARGE = {"order_id": "ORD-00000001", "amount": "4500.00"}
RUN = "run_before_upgrade"


# -- the version-1 algorithm, as it was (maitre.jsonutil.canonical_json + gate/approval + gate/idempotency)


def _v1_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | dt_time):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, tuple):
        return list(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_V1_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_v1_default
)


def v1_call_hash(tool: str, arguments: dict[str, Any], principal: Principal, run_id: str | None) -> str:
    text = _V1_CANONICAL.encode(
        {
            "tool": tool,
            "arguments": arguments,
            "user": principal.user,
            "tenant": principal.tenant,
            "run": run_id,
        }
    )
    return hashlib.sha256(text.encode()).hexdigest()


def v1_key(tool: str, principal: Principal, basis: dict[str, Any]) -> str:
    identity = {"tenant": principal.tenant, "user": principal.user, "tool": tool, **basis}
    digest = hashlib.sha256(_V1_CANONICAL.encode(identity).encode("utf-8", "surrogatepass")).hexdigest()
    return "idk_" + digest[:40]


def v1_fingerprint(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(_V1_CANONICAL.encode(arguments).encode()).hexdigest()[:32]


# -- the shop ---------------------------------------------------------------------------------------


class Shop:
    def __init__(self) -> None:
        self.refunds: list[dict[str, Any]] = []
        self.box = Toolbox("shop")
        shop = self

        @self.box.tool(effect="write", risk="medium", business_key=("order_id", "amount"))
        def refund(order_id: str, amount: Decimal, key: IdempotencyKey) -> dict[str, str]:
            """Refund an order (its business key: order id and amount)."""
            shop.refunds.append({"order_id": order_id, "amount": str(amount), "key": key})
            return {"request_id": f"RF-{len(shop.refunds)}"}

        @self.box.tool(effect="write", risk="medium")
        def note(order_id: str, amount: Decimal, key: IdempotencyKey) -> str:
            """Write a note on an order (no business key: keyed by run or by arguments)."""
            shop.refunds.append({"order_id": order_id, "amount": str(amount), "key": key})
            return "noted"

        @self.box.tool(effect="write", risk="high")
        def large_refund(order_id: str, amount: Decimal, key: IdempotencyKey) -> str:
            """Refund a large amount (needs a human approval)."""
            shop.refunds.append({"order_id": order_id, "amount": str(amount), "key": key})
            return f"refunded {amount}"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "maitre.db")


def _schema_v2_stores(path: str) -> Stores:
    """The stores on a file at gate schema version 2, the last one that wrote version-1 hashes.

    Today's approval store writes the approval-context columns of version 4, so the file gets them
    too (empty, as an upgraded row has them; `tests/stores/test_approval_context.py` upgrades a
    table without them)."""
    engine = SQLiteEngine(path)
    context_columns = GATE_SCHEMA.migrations[3].add_columns
    engine.migrate_now(
        dataclasses.replace(
            GATE_SCHEMA,
            migrations=GATE_SCHEMA.migrations[:2],
            repair_columns=(*GATE_SCHEMA.repair_columns, *context_columns),
        )
    )
    return Stores(
        approvals=SQLApprovalStore(engine),
        idempotency=SQLIdempotencyStore(engine),
        audit=SQLAuditStore(engine),
        handles=SQLHandleStore(engine),
        runs=SQLRunStore(engine),
        rate_limits=SQLRateLimiter(engine),
        backend="sqlite",
        closers=[engine.close],
    )


@pytest.fixture
async def old(db: str) -> AsyncIterator[Stores]:
    """The file as the version-1 gate used it: schema version 2 (closed before the upgrade)."""
    stores = _schema_v2_stores(db)
    try:
        yield stores
    finally:
        await stores.close()


async def upgraded(db: str) -> Stores:
    """The same file opened by the new code."""
    return await open_stores(db)


def _result(content: str, structured: Any) -> str:
    return compact_json({"content": content, "structured": structured, "handle": None})


async def _complete_v1(stores: Stores, key: str, tool: str, arguments: dict[str, Any], result: str) -> None:
    idem = stores.idempotency
    assert await idem.begin(key, tenant="acme", tool=tool, fingerprint=v1_fingerprint(arguments)) is None
    await idem.complete(key, result, tenant="acme", now=time.time())


# -- idempotency keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("basis", ["business_key", "run", "arguments", "host"])
async def test_a_write_completed_before_the_upgrade_replays_after_it(db, old, basis):
    """Each way a key is minted: the old key's stored result replays; the tool does not run."""
    tool = "shop.refund" if basis == "business_key" else "shop.note"
    options = None
    run_id = RUN if basis == "run" else None
    if basis == "business_key":
        v1 = {"business_key": {"order_id": REFUND["order_id"], "amount": REFUND["amount"]}}
    elif basis == "run":
        v1 = {"run": RUN, "arguments": REFUND}
    elif basis == "arguments":
        v1 = {"arguments": REFUND}
    else:
        from maitre import CallOptions

        options = CallOptions(idempotency_key="click-42")
        v1 = {"host_key": "click-42"}
    key = v1_key(tool, ALICE, v1)
    await _complete_v1(old, key, tool, REFUND, _result('{"request_id":"RF-1"}', {"request_id": "RF-1"}))
    await old.close()

    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        call = ToolCall(id="retry", name=tool, arguments=dict(REFUND), run_id=run_id)
        result = await gate.call(call, ALICE, options=options)
        assert not result.is_error, result.content
        assert result.replayed and result.structured == {"request_id": "RF-1"}
        assert shop.refunds == []  # nothing executed twice
        (entry,) = await stores.audit.entries()
        assert entry.decision == "replayed" and entry.replayed
        assert (await stores.idempotency.get(key, tenant="acme")).state == "completed"
    finally:
        await stores.close()


async def test_a_write_in_flight_before_the_upgrade_still_blocks_its_retry(db, old):
    """The old process is still executing it: the retry waits (CONFLICT); once the old process
    completes it, the retry replays. It never runs a second time."""
    key = v1_key("shop.refund", ALICE, {"business_key": REFUND})
    idem = old.idempotency
    begun = await idem.begin(
        key, tenant="acme", tool="shop.refund", fingerprint=v1_fingerprint(REFUND), owner=current_owner()
    )
    assert begun is None
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        call = ToolCall(id="retry", name="shop.refund", arguments=dict(REFUND))
        busy = await gate.call(call, ALICE)
        assert busy.error is not None and busy.error.code == "CONFLICT", busy.content
        await idem.complete(key, _result("done", "done"), tenant="acme", now=time.time())
        again = await gate.call(ToolCall(id="retry2", name="shop.refund", arguments=dict(REFUND)), ALICE)
        assert again.replayed and again.content == "done"
        assert shop.refunds == []
        # The new key the first retry claimed for a moment was given back: nothing waits on it.
        assert await stores.idempotency.get(_v2_key(gate, call), tenant="acme") is None
    finally:
        await stores.close()


async def test_a_write_in_doubt_before_the_upgrade_is_not_run_again(db, old):
    """The old process crashed mid-call (uncertain): after the upgrade it still needs a check."""
    key = v1_key("shop.refund", ALICE, {"business_key": REFUND})
    idem = old.idempotency
    assert (
        await idem.begin(key, tenant="acme", tool="shop.refund", fingerprint=v1_fingerprint(REFUND)) is None
    )
    assert await idem.mark_uncertain(key, tenant="acme")
    await old.close()
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        result = await gate.call(ToolCall(id="retry", name="shop.refund", arguments=dict(REFUND)), ALICE)
        assert result.error is not None and result.error.code == "INVALID_STATE", result.content
        assert shop.refunds == []
    finally:
        await stores.close()


async def test_a_new_write_is_keyed_in_version_2(db, old):
    await old.close()
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        call = ToolCall(id="c1", name="shop.refund", arguments=dict(REFUND))
        first = await gate.call(call, ALICE)
        second = await gate.call(ToolCall(id="c2", name="shop.refund", arguments=dict(REFUND)), ALICE)
        assert not first.is_error and not first.replayed and second.replayed
        assert len(shop.refunds) == 1 and shop.refunds[0]["key"].startswith("idk2_")
        assert shop.refunds[0]["key"] != v1_key("shop.refund", ALICE, {"business_key": REFUND})
    finally:
        await stores.close()


def _v2_key(gate: Gate, call: ToolCall) -> str:
    from maitre.gate.base import CallContext
    from maitre.gate.idempotency import mint_key

    ctx = CallContext(gate=gate, call=call, principal=ALICE, run=gate.new_run(ALICE))
    ctx.tool = gate.find_tool(call.name)
    ctx.validated_json = dict(REFUND)
    return mint_key(ctx)


# -- approvals --------------------------------------------------------------------------------------


async def _v1_approval(
    stores: Stores, arguments: dict[str, Any], *, edited: dict[str, Any] | None = None
) -> str:
    """A request the version-1 gate created for `large_refund` in RUN, approved by a manager."""
    now = time.time()
    request = ApprovalRequest(
        id="apr_before_upgrade",
        tool="shop.large_refund",
        arguments=arguments,
        call_hash=v1_call_hash("shop.large_refund", arguments, ALICE, RUN),
        user="alice",
        tenant="acme",
        run_id=RUN,
        reason="write tool with high risk needs a human approval",
        created_at=now,
        expires_at=now + 3600,
    )
    await stores.approvals.create(request)
    approved_hash = v1_call_hash("shop.large_refund", edited, ALICE, RUN) if edited is not None else None
    await stores.approvals.decide(
        request.id, approve=True, approver="manager", edited_arguments=edited, approved_hash=approved_hash
    )
    return request.id


def _large(call_id: str, arguments: dict[str, Any] = LARGE) -> ToolCall:
    return ToolCall(id=call_id, name="shop.large_refund", arguments=dict(arguments), run_id=RUN)


async def test_an_approval_granted_before_the_upgrade_runs_its_call_once_after_it(db, old):
    approval_id = await _v1_approval(old, LARGE)
    await old.close()
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        done = await gate.call(_large("after"), ALICE, approval_id=approval_id)
        assert not done.is_error, done.content
        again = await gate.call(_large("again"), ALICE, approval_id=approval_id)
        assert again.replayed and again.content == done.content
        assert shop.refunds == [
            {"order_id": "ORD-00000001", "amount": "4500.00", "key": shop.refunds[0]["key"]}
        ]
        entries = await stores.audit.entries()
        assert [e.decision for e in entries] == ["approved", "replayed"]
        assert entries[0].call_hash == v1_call_hash("shop.large_refund", LARGE, ALICE, RUN)
        assert (await stores.approvals.get(approval_id)).status == "used"
    finally:
        await stores.close()


async def test_an_approved_call_executed_before_the_upgrade_replays_when_retried_after_it(db, old):
    """The old process ran the approved call and stored its result; the answer was lost and the
    client retries with the same approval after the upgrade: replayed, not run again."""
    approval_id = await _v1_approval(old, LARGE)
    assert await old.approvals.consume(
        approval_id, call_hash=v1_call_hash("shop.large_refund", LARGE, ALICE, RUN)
    )
    key = v1_key("shop.large_refund", ALICE, {"run": RUN, "arguments": LARGE})
    await _complete_v1(old, key, "shop.large_refund", LARGE, _result("refunded 4500.00", "refunded 4500.00"))
    await old.close()
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        retried = await gate.call(_large("retry"), ALICE, approval_id=approval_id)
        assert not retried.is_error, retried.content
        assert retried.replayed and retried.content == "refunded 4500.00"
        plain = await gate.call(_large("plain"), ALICE)  # nor without the approval id
        assert plain.replayed and shop.refunds == []
        assert await stores.approvals.list(status="pending") == []  # no human was asked again
    finally:
        await stores.close()


async def test_an_approval_with_edits_from_before_the_upgrade_runs_the_edited_call(db, old):
    edited = {"order_id": "ORD-00000001", "amount": "4000.00"}
    approval_id = await _v1_approval(old, LARGE, edited=edited)
    await old.close()
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        done = await gate.call(_large("after"), ALICE, approval_id=approval_id)
        assert not done.is_error, done.content
        assert [r["amount"] for r in shop.refunds] == ["4000.00"]
        again = await gate.call(_large("again"), ALICE, approval_id=approval_id)
        assert again.error is not None and again.error.code == "INVALID_STATE"  # used
        assert len(shop.refunds) == 1
    finally:
        await stores.close()


async def test_an_approval_from_before_the_upgrade_does_not_cover_other_arguments(db, old):
    approval_id = await _v1_approval(old, LARGE)
    await old.close()
    shop = Shop()
    stores = await upgraded(db)
    try:
        gate = Gate(shop.box, stores=stores)
        other = await gate.call(
            _large("other", {"order_id": "ORD-00000001", "amount": "4999.00"}), ALICE, approval_id=approval_id
        )
        assert other.error is not None and other.error.code == "APPROVAL_REQUIRED"
        assert other.approval is not None and other.approval.approval_id != approval_id
        assert other.approval.call_hash.startswith("h2:")  # the new request is written in version 2
        assert shop.refunds == []
        assert (await stores.approvals.get(approval_id)).status == "approved"  # still unused
    finally:
        await stores.close()


# -- which databases are asked for version-1 keys ---------------------------------------------------


async def test_an_upgraded_file_keeps_looking_version_1_keys_up_after_every_reopen(db, old):
    await old.close()
    for _ in range(2):
        stores = await upgraded(db)
        try:
            assert stores.idempotency.legacy_hashes is True
        finally:
            await stores.close()


async def test_a_file_created_at_version_3_is_never_asked_for_version_1_keys(tmp_path):
    stores = await open_stores(str(tmp_path / "new.db"))
    try:
        assert stores.idempotency.legacy_hashes is False
        box = Shop()
        gate = Gate(box.box, stores=stores)
        statements: list[str] = []
        stores.db.conn.set_trace_callback(statements.append)  # statements with their values bound
        call = ToolCall(id="c1", name="shop.refund", arguments=REFUND, run_id="r1")
        assert not (await gate.call(call, ALICE)).is_error
        assert any("idk2_" in sql for sql in statements)
        assert not any("'idk_" in sql for sql in statements)  # no version-1 key was looked up
        keys = [row[0] for row in stores.db.conn.execute("SELECT idem_key FROM idempotency")]
        assert len(keys) == 1 and keys[0].startswith("idk2_")
    finally:
        await stores.close()
