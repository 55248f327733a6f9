"""The deletion hunt (issue 16, item 1): a forgotten value leaves no readable copy anywhere.

Marker words go in through every door - `Gate.call` directly (both audit modes, an approval, a
cut result behind a handle, a write's idempotency record), the agent loop with a scripted model,
and the MCP door in process - for one user, next to another user of the same tenant. Before the
forget the test proves each door really stored something (replays, approvals and handles open
to the marker). Then, with a reader connection holding a snapshot open on each database, the
user forgets through the memory tool: the forget must return at once, and afterwards

- no table of the gate's stores or of memory holds the marker, nor the plain sha256 digests a
  copy of the database could test guesses with (the audit digest, the call hash, the key);
- the SQLite files and their WALs do not hold the marker bytes once the reader has ended
  (PostgreSQL: every table after VACUUM; the WAL and backups rely on the erased keys);
- a replay of the same calls answers "forgotten", the approval reads as forgotten, the handle
  page as forgotten - never the old value, never an error;
- the audit chain still verifies, and the other user's records are untouched.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from maitre import Gate, Principal, ToolCall
from maitre.agent import Agent
from maitre.audit import verify_store
from maitre.embeddings import HashingEmbedder
from maitre.gate.hashing import call_hash_of, key_of
from maitre.gate.personal import FORGOTTEN_TEXT
from maitre.memory import MemoryStore, memory_toolbox
from maitre.models import Rule, ScriptedModel, always, call
from maitre.storage import PostgresStores, SQLiteStores, Stores
from maitre.tools import Toolbox

PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SECRET = "hex:" + "7a" * 32
ASHA = Principal(user="asha", tenant="acme")
RAVI = Principal(user="ravi", tenant="acme")


def _pg_error() -> str | None:
    try:
        with psycopg.connect(PG_DSN, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable: {exc}"


@dataclass
class World:
    kind: str
    stores: Stores
    memory: MemoryStore
    box: Toolbox
    gate: Gate
    redacted: Gate
    files: list[Path] = field(default_factory=list)
    schemas: list[str] = field(default_factory=list)


def _personal_tools() -> Toolbox:
    """Personal tools beside memory's: a write with a stored result, and a long personal result."""
    box = Toolbox("notes")

    @box.tool(effect="write", personal=True)
    def keep_note(text: str) -> dict[str, str]:
        """Keep a personal note for the user."""
        return {"kept": text}

    @box.tool(effect="read", personal=True, max_result_tokens=16)
    def diary(text: str) -> str:
        """The user's diary, long."""
        return " ".join([text] * 60)

    return box


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    kind = request.param
    if kind == "postgres":
        error = _pg_error()
        if error:
            pytest.skip(error)
        gate_schema, memory_schema = f"hunt_g_{uuid.uuid4().hex[:10]}", f"hunt_m_{uuid.uuid4().hex[:10]}"
        stores: Stores = await PostgresStores.open(PG_DSN, schema=gate_schema, secret=SECRET)
        memory = MemoryStore.postgres(
            PG_DSN, schema=memory_schema, pgvector=False, embedder=HashingEmbedder(), secret=SECRET
        )
    else:
        stores = SQLiteStores(tmp_path / "gate.db")  # its key file is generated beside it
        memory = MemoryStore.sqlite(tmp_path / "memory.db", embedder=HashingEmbedder())
    box = Toolbox()
    box.include(memory_toolbox(memory))
    box.include(_personal_tools())
    gate = Gate(box, stores=stores)
    redacted = Gate(box, stores=stores, audit_arguments="redacted")
    w = World(kind, stores, memory, box, gate, redacted)
    if kind == "postgres":
        w.schemas = [gate_schema, memory_schema]
    else:
        w.files = [tmp_path / "gate.db", tmp_path / "memory.db"]
    try:
        yield w
    finally:
        memory.close()
        await stores.close()
        if kind == "postgres":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                for schema in w.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


async def _call(gate: Gate, who: Principal, name: str, run_id: str | None = None, **arguments: Any):  # type: ignore[no-untyped-def]
    return await gate.call(
        ToolCall(id=f"c-{uuid.uuid4().hex[:6]}", name=name, arguments=arguments, run_id=run_id), who
    )


def _marker(tag: str) -> str:
    return f"zq{tag}{uuid.uuid4().hex[:8]}"


def _table_dump(w: World) -> dict[str, str]:
    """Every row of every table of both databases, as text (lowercased), by table."""
    dump: dict[str, str] = {}
    if w.kind == "sqlite":
        for path in w.files:
            with sqlite3.connect(path) as conn:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
                    dump[f"{path.name}:{table}"] = repr(rows).lower()
        return dump
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for schema in w.schemas:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
                ).fetchall()
            ]
            for table in tables:
                conn.execute(f'VACUUM "{schema}"."{table}"')  # type: ignore[arg-type]
                rows = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t').fetchall()  # type: ignore[arg-type]
                dump[f"{schema}.{table}"] = repr(rows).lower()
    return dump


def _leaks_in_tables(w: World, needles: list[str]) -> list[str]:
    return [f"{table}: {n}" for table, text in _table_dump(w).items() for n in needles if n.lower() in text]


def _leaks_in_files(w: World, needles: list[str]) -> list[str]:
    found: list[str] = []
    for base in w.files:
        for path in (base, Path(f"{base}-wal")):
            if path.exists():
                data = path.read_bytes().lower()
                found += [f"{path.name}: {n}" for n in needles if n.lower().encode() in data]
    return found


def _poll(check: Callable[[], bool], timeout: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


class _Readers:
    """A reader holding a snapshot open on every database while the forget runs."""

    def __init__(self, w: World) -> None:
        self.closers: list[Callable[[], None]] = []
        if w.kind == "sqlite":
            for path in w.files:
                conn = sqlite3.connect(path, isolation_level=None)
                conn.execute("BEGIN")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
                table = "memory_facts" if path.name == "memory.db" else "idempotency"
                conn.execute(f"SELECT * FROM {table}").fetchall()
                self.closers.append(lambda c=conn: (c.execute("COMMIT"), c.close()))  # type: ignore[misc]
        else:
            conn = psycopg.connect(PG_DSN)
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            for schema in w.schemas:
                conn.execute(f'SELECT count(*) FROM "{schema}".maitre_schema')  # type: ignore[arg-type]
            self.closers.append(lambda c=conn: (c.rollback(), c.close()))  # type: ignore[misc]

    def end(self) -> None:
        for close in self.closers:
            close()
        self.closers = []


@pytest.mark.anyio
async def test_a_forgotten_value_leaves_no_readable_copy(world: World) -> None:
    w = world
    city, note, page, mcp_city = (_marker(t) for t in ("city", "note", "page", "mcp"))
    ravi_city = _marker("ravi")
    mine = [city, note, page, mcp_city]

    # -- door 1: Gate.call, both audit modes ---------------------------------------------------------
    r = await _call(w.gate, ASHA, "memory.save_memory", key="city", value=city, valid_from="2026-01-05")
    assert not r.is_error, r.content
    r = await _call(w.redacted, ASHA, "memory.search_memory", query=f"where is {city}")
    assert city in r.content
    kept = await _call(w.redacted, ASHA, "notes.keep_note", run_id="run-1", text=f"note {note}")
    assert not kept.is_error and note in kept.content
    replay = await _call(w.gate, ASHA, "notes.keep_note", run_id="run-1", text=f"note {note}")
    assert replay.replayed and note in replay.content  # the sealed record opens while the key lives
    cut = await _call(w.gate, ASHA, "notes.diary", text=page)
    assert cut.handle is not None
    paged = await _call(w.gate, ASHA, "read_result", handle=cut.handle, page=2)
    assert page in paged.content
    await _call(w.gate, RAVI, "memory.save_memory", key="city", value=ravi_city)
    ravi_note = await _call(w.gate, RAVI, "notes.keep_note", run_id="run-1", text=f"note {ravi_city}")
    assert not ravi_note.is_error
    # Another user of the same tenant cannot read Asha's handle.
    assert (await _call(w.gate, RAVI, "read_result", handle=cut.handle, page=2)).is_error

    # -- door 3: MCP, in process -------------------------------------------------------------------
    from maitre.mcp import MCPApp
    from maitre.testing import mcp_client

    async with mcp_client(MCPApp(w.box, gate=w.gate), principal=ASHA) as client:
        result = await client.call_tool("memory.save_memory", {"key": "city", "value": mcp_city})
        assert not result.is_error, result

    # The scan sees what memory holds; the gate's tables hold nothing personal in the clear even now.
    before = _leaks_in_tables(w, mine)
    assert any("memory" in leak.split(":")[0] or "hunt_m_" in leak for leak in before), before
    in_gate = [leak for leak in before if "gate.db" in leak or "hunt_g_" in leak]
    assert in_gate == []

    # -- the forget: approval first (destructive), then the approved call, a reader held open ----------
    asks = await _call(w.gate, ASHA, "memory.forget_memory", key="city")
    assert asks.error is not None and asks.error.code == "APPROVAL_REQUIRED"
    approval_id = asks.error.details["approval_id"]
    pending = await w.gate.approvals.get(approval_id)
    assert pending is not None and pending.arguments == {"key": "city", "value": None}
    await w.gate.approvals.approve(approval_id, "admin")
    readers = _Readers(w)
    try:
        started = time.monotonic()
        forgot = await w.gate.call(
            ToolCall(id="forget", name="memory.forget_memory", arguments={"key": "city"}),
            ASHA,
            approval_id=approval_id,
        )
        took = time.monotonic() - started
        assert not forgot.is_error, forgot.content
        assert took < 2.0, f"the forget waited {took:.1f} s for a reader"
    finally:
        readers.end()

    # -- afterwards: nothing readable ------------------------------------------------------------------
    assert w.memory.wait_erased(10.0)
    assert _poll(lambda: not _leaks_in_files(w, mine)), _leaks_in_files(w, mine)
    plain = _plain_digests(w, mine)
    assert _leaks_in_tables(w, mine + plain) == []

    again = await _call(w.gate, ASHA, "notes.keep_note", run_id="run-1", text=f"note {note}")
    assert again.replayed and not again.is_error
    assert note not in again.content and FORGOTTEN_TEXT in again.content
    forgot_again = await w.gate.call(
        ToolCall(id="forget-2", name="memory.forget_memory", arguments={"key": "city"}),
        ASHA,
        approval_id=approval_id,
    )
    assert city not in forgot_again.content
    after = await _call(w.gate, ASHA, "read_result", handle=cut.handle, page=2)
    assert page not in after.content and FORGOTTEN_TEXT in after.content
    decided = await w.gate.approvals.get(approval_id)
    assert decided is not None and decided.arguments == {"$forgotten": True}
    searched = await _call(w.gate, ASHA, "memory.search_memory", query="city")
    assert not any(m in searched.content for m in mine)

    report = await verify_store(w.stores.audit)
    assert report.ok, report.reason
    if w.kind == "sqlite":  # what an operator runs: `maitre audit verify`
        from typer.testing import CliRunner

        from maitre.cli import app

        db = str(w.files[0])
        verified = await anyio.to_thread.run_sync(
            lambda: CliRunner().invoke(app, ["audit", "verify", "--db", db])
        )
        assert verified.exit_code == 0 and "intact" in verified.output, verified.output
    # The other user of the tenant keeps everything.
    ravi_again = await _call(w.gate, RAVI, "notes.keep_note", run_id="run-1", text=f"note {ravi_city}")
    assert ravi_again.replayed and ravi_city in ravi_again.content


def _plain_digests(w: World, markers: list[str]) -> list[str]:
    """The unkeyed hashes a copy of the database could test a guess with, for the calls made above:
    none of them may be stored (the personal tools' are keyed)."""
    from maitre.audit.canonical import hash_text

    out = []
    for arguments, tool, run in (
        ({"key": "city", "value": markers[0], "valid_from": "2026-01-05"}, "memory.save_memory", None),
        ({"text": f"note {markers[1]}"}, "notes.keep_note", "run-1"),
        ({"key": "city"}, "memory.forget_memory", None),
    ):
        text = hash_text(arguments)
        out.append(hashlib.sha256(text.encode()).hexdigest())
        out.append(call_hash_of(tool, text, ASHA, run).removeprefix("h2:"))
        basis = key_of(tool, ASHA, "arguments", text, run_id=run)
        out.append(basis.removeprefix("idk2_"))
    return out


async def _agent_saves(w: World, value: str) -> None:
    model = ScriptedModel(
        [
            Rule(
                "save",
                when=lambda req: not any(getattr(m, "call_id", None) for m in req.messages),
                then=lambda req: [call("memory.save_memory", key="city", value=value)],
            ),
            Rule("done", when=always, then="Saved."),
        ],
        label=False,
    )
    run = await Agent(model, gate=w.gate).run("Please remember where I live now.", ASHA)
    assert str(run.status) == "finished", run.final_text


async def _forget(w: World) -> None:
    asks = await _call(w.gate, ASHA, "memory.forget_memory", key="city")
    assert asks.error is not None and asks.error.details is not None
    await w.gate.approvals.approve(asks.error.details["approval_id"], "admin")
    readers = _Readers(w)
    try:
        forgot = await w.gate.call(
            ToolCall(id="forget", name="memory.forget_memory", arguments={"key": "city"}),
            ASHA,
            approval_id=asks.error.details["approval_id"],
        )
        assert not forgot.is_error, forgot.content
    finally:
        readers.end()
    assert w.memory.wait_erased(10.0)


@pytest.mark.anyio
async def test_the_agent_door_tool_calls_reach_no_gate_table_in_the_clear(world: World) -> None:
    """Through the agent loop: the gate's own records of the calls hold nothing readable."""
    w = world
    value = _marker("agent")
    await _agent_saves(w, value)
    await _forget(w)
    assert [
        leak for leak in _leaks_in_tables(w, [value]) if ":runs" not in leak and ".runs" not in leak
    ] == []
    assert (await verify_store(w.stores.audit)).ok


@pytest.mark.anyio
async def test_the_agent_door_transcript_is_shredded_by_the_forget(world: World) -> None:
    w = world
    value = _marker("agent")
    await _agent_saves(w, value)
    await _forget(w)
    assert _leaks_in_tables(w, [value]) == []
    assert _poll(lambda: not _leaks_in_files(w, [value]), timeout=3.0), _leaks_in_files(w, [value])
