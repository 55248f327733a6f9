"""PostgreSQL text cannot hold NUL. Whatever a door passes - a call id, a tool name, a run id, an
approval id, a host key, a token's user or tenant, arguments, a tool's result - the gate stores and
audits it (escaped where it is an id or a name) instead of failing into INTERNAL."""

from __future__ import annotations

from typing import Any

import pytest

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.audit import verify_store
from maitre.gate.base import CallOptions
from maitre.stores import PostgresStores, SQLiteStores, Stores

pytestmark = pytest.mark.anyio


def _box(seen: list[str]) -> Toolbox:
    box = Toolbox()

    @box.tool
    def echo(s: str) -> str:
        """Echo."""
        return s

    @box.tool(effect="write", risk="low")
    def note(s: str) -> dict[str, Any]:
        """Note."""
        seen.append(s)
        return {"saved": s, "k\x00": 1}

    @box.tool(effect="write", risk="high")
    def refund(order_id: str) -> str:
        """Refund."""
        seen.append(order_id)
        return "ok"

    return box


async def _exercise(stores: Stores) -> None:
    seen: list[str] = []
    gate = Gate(_box(seen), stores=stores)
    normal = Principal(user="u", tenant="t")
    odd = Principal(user="u\x00", tenant="t\udc80")
    calls = [
        (ToolCall(id="c\x001", name="echo", arguments={"s": "a\x00b"}), normal, None),
        (ToolCall(id="c2", name="note", arguments={"s": "a\x00b"}, run_id="r\x00"), normal, None),
        (ToolCall(id="c3", name="echo\x00", arguments={"s": "x"}), normal, None),
        (
            ToolCall(id="c4", name="refund", arguments={"order_id": "A"}),
            normal,
            CallOptions(approval_id="apr_\x00"),
        ),
        (ToolCall(id="c5", name="note", arguments={"s": "k"}), normal, CallOptions(idempotency_key="k\x00")),
        (ToolCall(id="c6", name="note", arguments={"s": "p"}), odd, None),
    ]
    codes = []
    for call, principal, options in calls:
        result = await gate.call(call, principal, options=options)
        codes.append(result.error.code if result.error else "ok")
    assert codes == ["ok", "ok", "UNKNOWN_TOOL", "INVALID_STATE", "ok", "ok"]
    assert seen == ["a\x00b", "k", "p"]
    report = await verify_store(stores.audit)
    assert report.ok and report.checked == len(calls)
    users = {entry.user for entry in await stores.audit.entries()}
    assert users == {"u", "u\\x00"}  # escaped, never dropped or merged with "u"


async def test_sqlite_holds_what_the_doors_pass(tmp_path: Any) -> None:
    stores = SQLiteStores(str(tmp_path / "nul.db"))
    try:
        await _exercise(stores)
    finally:
        await stores.close()


@pytest.mark.postgres
async def test_postgres_holds_what_the_doors_pass(pg_dsn: str, pg_schema: str) -> None:
    stores = await PostgresStores.open(pg_dsn, schema=pg_schema)
    try:
        await _exercise(stores)
    finally:
        await stores.close()
