"""Opening a database written by the previous maitre migrates it forward; a newer or foreign one is refused.

The previous code's CREATE statements are copied here as data (they are what real files in the field
contain): the gate's tables before the version table existed (SQLite `user_version = 1`, Postgres
`meta.schema_version = 1`), the idempotency table from before owners were stored, and the SQLite-only
MCP task table with its `user` column. Each is filled with a row, opened with this code, and read back.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import pytest

from maitre.audit import AuditEntry
from maitre.exceptions import StoreError
from maitre.mcp.tasks import SQLiteTaskStore, TaskRecord
from maitre.storage.schema import HASH_V1_MARK, SCHEMA_VERSION
from maitre.stores import SQLiteStores

pytestmark = pytest.mark.anyio

# -- the previous code's DDL (maitre.stores.sqlite / maitre.stores.postgres / maitre.mcp.tasks) ---------

OLD_SQLITE_DDL = (
    """CREATE TABLE IF NOT EXISTS approvals (
        id TEXT PRIMARY KEY, tool TEXT NOT NULL, arguments TEXT NOT NULL, call_hash TEXT NOT NULL,
        user_id TEXT NOT NULL, tenant TEXT NOT NULL, run_id TEXT, reason TEXT NOT NULL,
        created_at REAL NOT NULL, expires_at REAL NOT NULL, status TEXT NOT NULL, approver TEXT,
        decided_at REAL, message TEXT, edited_arguments TEXT, approved_hash TEXT, used_at REAL)""",
    "CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals (status, created_at)",
    """CREATE TABLE IF NOT EXISTS idempotency (
        idem_key TEXT NOT NULL, tenant TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
        state TEXT NOT NULL, result TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        lease_until REAL NOT NULL, owner TEXT, PRIMARY KEY (tenant, idem_key)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS audit (
        seq INTEGER PRIMARY KEY, at_ts REAL NOT NULL, user_id TEXT NOT NULL, tenant TEXT NOT NULL,
        tool TEXT NOT NULL, decision TEXT NOT NULL, run_id TEXT, call_id TEXT, call_hash TEXT,
        approval_id TEXT, arguments TEXT, result_digest TEXT, error_code TEXT, detail TEXT,
        duration_ms REAL NOT NULL, replayed INTEGER NOT NULL, prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL)""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TABLE IF NOT EXISTS handles (
        handle TEXT PRIMARY KEY, tenant TEXT NOT NULL, user_id TEXT NOT NULL, pages TEXT NOT NULL,
        meta TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS handles_by_expiry ON handles (expires_at)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, status TEXT NOT NULL, state_json TEXT NOT NULL,
        created_at REAL NOT NULL, updated_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_by_update ON runs (updated_at)",
    """CREATE TABLE IF NOT EXISTS rate_limits (
        bucket_key TEXT PRIMARY KEY, tokens REAL NOT NULL, updated_at REAL NOT NULL,
        allowed INTEGER NOT NULL) WITHOUT ROWID""",
)

OLD_POSTGRES_DDL = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    """CREATE TABLE IF NOT EXISTS {s}.approvals (
        id text PRIMARY KEY, tool text NOT NULL, arguments text NOT NULL, call_hash text NOT NULL,
        user_id text NOT NULL, tenant text NOT NULL, run_id text, reason text NOT NULL,
        created_at double precision NOT NULL, expires_at double precision NOT NULL, status text NOT NULL,
        approver text, decided_at double precision, message text, edited_arguments text,
        approved_hash text, used_at double precision)""",
    "CREATE INDEX IF NOT EXISTS approvals_by_status ON {s}.approvals (status, created_at)",
    """CREATE TABLE IF NOT EXISTS {s}.idempotency (
        idem_key text NOT NULL, tenant text NOT NULL, tool text NOT NULL, fingerprint text NOT NULL,
        state text NOT NULL, result text, created_at double precision NOT NULL,
        updated_at double precision NOT NULL, lease_until double precision NOT NULL, owner text,
        PRIMARY KEY (tenant, idem_key))""",
    """CREATE TABLE IF NOT EXISTS {s}.audit (
        seq bigint PRIMARY KEY, at_ts double precision NOT NULL, user_id text NOT NULL,
        tenant text NOT NULL, tool text NOT NULL, decision text NOT NULL, run_id text, call_id text,
        call_hash text, approval_id text, arguments text, result_digest text, error_code text,
        detail text, duration_ms double precision NOT NULL, replayed boolean NOT NULL,
        prev_hash text NOT NULL, hash text NOT NULL)""",
    """CREATE OR REPLACE FUNCTION {s}.audit_append_only() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$""",
    """CREATE OR REPLACE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON {s}.audit
        FOR EACH ROW EXECUTE FUNCTION {s}.audit_append_only()""",
    """CREATE OR REPLACE TRIGGER audit_no_truncate BEFORE TRUNCATE ON {s}.audit
        FOR EACH STATEMENT EXECUTE FUNCTION {s}.audit_append_only()""",
    """CREATE TABLE IF NOT EXISTS {s}.handles (
        handle text PRIMARY KEY, tenant text NOT NULL, user_id text NOT NULL, pages text NOT NULL,
        meta text NOT NULL, created_at double precision NOT NULL, expires_at double precision NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS handles_by_expiry ON {s}.handles (expires_at)",
    """CREATE TABLE IF NOT EXISTS {s}.runs (
        run_id text PRIMARY KEY, tenant text NOT NULL, status text NOT NULL, state_json text NOT NULL,
        created_at double precision NOT NULL, updated_at double precision NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS runs_by_update ON {s}.runs (updated_at)",
    """CREATE TABLE IF NOT EXISTS {s}.rate_limits (
        bucket_key text PRIMARY KEY, tokens double precision NOT NULL,
        updated_at double precision NOT NULL, allowed boolean NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value text NOT NULL)",
)

OLD_TASKS_DDL = """
CREATE TABLE IF NOT EXISTS maitre_mcp_tasks (
    task_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, user TEXT NOT NULL, tool TEXT NOT NULL,
    status TEXT NOT NULL, status_message TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    ttl_ms INTEGER, poll_ms INTEGER NOT NULL, result TEXT, error TEXT, input_requests TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL, heartbeat_at REAL NOT NULL
)
"""

_OLD_ROWS = (
    "INSERT INTO runs VALUES ('r1', 'acme', 'paused', '{\"step\": 3}', 1.0, 2.0)",
    "INSERT INTO idempotency (idem_key, tenant, tool, fingerprint, state, result, created_at, updated_at,"
    " lease_until) VALUES ('k1', 'acme', 'refund', 'f', 'completed', '{\"ok\":true}', 1.0, 2.0, 3.0)",
)


def _old_sqlite_file(path: str, *, owner_column: bool) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in OLD_SQLITE_DDL:
        if not owner_column:
            statement = statement.replace(
                "lease_until REAL NOT NULL, owner TEXT,", "lease_until REAL NOT NULL,"
            )
        conn.execute(statement)
    for statement in _OLD_ROWS:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.close()


def _version_rows(path: str) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT component, version FROM maitre_schema").fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("owner_column", [False, True], ids=["before-owners", "previous-release"])
async def test_a_sqlite_file_of_the_previous_version_opens_migrated_with_its_data(
    tmp_path: Any, owner_column: bool
) -> None:
    path = os.path.join(tmp_path, "old.db")
    _old_sqlite_file(path, owner_column=owner_column)
    stores = SQLiteStores(path)
    try:
        assert await stores.runs.load("r1") == ("paused", '{"step": 3}')
        record = await stores.idempotency.get("k1", tenant="acme")
        assert record is not None and (record.state, record.result, record.owner) == (
            "completed",
            '{"ok":true}',
            None,
        )
        assert (
            await stores.idempotency.begin("k2", tenant="acme", tool="t", fingerprint="f", owner="me") is None
        )
        new = await stores.idempotency.get("k2", tenant="acme")
        assert new is not None and new.owner == "me"
        await stores.audit.append(AuditEntry(at=1.0, user="ann", tenant="acme", tool="t", decision="allow"))
    finally:
        await stores.close()
    assert _version_rows(path) == {"gate": SCHEMA_VERSION, HASH_V1_MARK: 1}
    conn = sqlite3.connect(path)
    # The legacy marker follows, so a maitre from before the version table refuses this file.
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION > 1
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM audit")
    conn.close()
    again = SQLiteStores(path)  # opening again changes nothing, and still looks version-1 keys up
    assert again.idempotency.legacy_hashes is True
    again.db.close_now()
    assert _version_rows(path) == {"gate": SCHEMA_VERSION, HASH_V1_MARK: 1}


async def test_the_sqlite_task_table_of_the_previous_version_opens_migrated(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "tasks.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(OLD_TASKS_DDL)
    conn.execute(
        "INSERT INTO maitre_mcp_tasks (task_id, tenant, user, tool, status, created_at, updated_at, ttl_ms,"
        " poll_ms, result, cancel_requested, owner, heartbeat_at) VALUES ('task_1', 'acme', 'ann', 'crunch',"
        " 'completed', 1.0, 2.0, 60000, 500, '{\"content\": []}', 0, 'p1', 2.0)"
    )
    conn.close()
    store = SQLiteTaskStore(path)
    try:
        task = await store.get("task_1")
        assert task is not None and (task.user, task.result, task.cancel_requested) == (
            "ann",
            {"content": []},
            False,
        )
        await store.update("task_1", cancel_requested=True)
        again = await store.get("task_1")
        assert again is not None and again.cancel_requested
    finally:
        await store.close()
    assert _version_rows(path) == {"mcp_tasks": 2}


async def test_the_gate_and_the_tasks_share_one_file(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "maitre.db")
    stores = SQLiteStores(path)
    tasks = SQLiteTaskStore(path)
    await tasks.create(TaskRecord(task_id="task_2", tenant="acme", user="ann", tool="crunch"))
    await stores.runs.save("r1", tenant="acme", status="ok", state_json="{}")
    await tasks.close()
    await stores.close()
    assert _version_rows(path) == {"gate": SCHEMA_VERSION, "mcp_tasks": 2}
    reopened = SQLiteTaskStore(path)
    task = await reopened.get("task_2")
    assert task is not None and task.user == "ann"
    await reopened.close()


def _assert_one_line(error: pytest.ExceptionInfo[StoreError], *needles: str) -> None:
    message = str(error.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


async def test_a_sqlite_file_from_a_newer_maitre_is_refused_in_one_line(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "newer.db")
    SQLiteStores(path).db.close_now()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE maitre_schema SET version = 7 WHERE component = 'gate'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as error:
        SQLiteStores(path)
    _assert_one_line(error, path, "schema version 7", "upgrade maitre")
    with pytest.raises(StoreError) as error:  # a newer task table too
        tasks = SQLiteTaskStore(path)
        await tasks.close()
        conn = sqlite3.connect(path)
        conn.execute("UPDATE maitre_schema SET version = 9 WHERE component = 'mcp_tasks'")
        conn.commit()
        conn.close()
        SQLiteTaskStore(path)
    _assert_one_line(error, path, "schema version 9", "mcp_tasks")


async def test_a_file_that_is_not_a_maitre_database_is_refused_and_left_alone(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "crm.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    for opener in (SQLiteStores, SQLiteTaskStore):
        with pytest.raises(StoreError) as error:
            opener(path)
        _assert_one_line(error, path, "not a maitre database", "customers")
    conn = sqlite3.connect(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert tables == {"customers"}  # nothing was written into it
    junk = os.path.join(tmp_path, "notes.txt")
    with open(junk, "w") as handle:  # noqa: ASYNC230 - a test fixture file
        handle.write("these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as error:
        SQLiteStores(junk)
    _assert_one_line(error, junk, "not a SQLite database")


# -- Postgres --------------------------------------------------------------------------------------------


def _pg_exec(dsn: str, statements: list[str]) -> list[Any]:
    import psycopg

    out: list[Any] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            cursor = conn.execute(statement)
            out.append(cursor.fetchall() if cursor.description else None)
    return out


@pytest.mark.postgres
@pytest.mark.parametrize("owner_column", [False, True], ids=["before-owners", "previous-release"])
async def test_a_postgres_schema_of_the_previous_version_opens_migrated(
    pg_dsn: str, pg_schema: str, owner_column: bool
) -> None:
    from maitre.stores.postgres import PostgresStores

    q = f'"{pg_schema}"'
    ddl = [s.replace("{s}", q) for s in OLD_POSTGRES_DDL]
    if not owner_column:
        ddl = [
            s.replace(
                "lease_until double precision NOT NULL, owner text,", "lease_until double precision NOT NULL,"
            )
            for s in ddl
        ]
    rows = [s.replace("INTO ", f"INTO {q}.") for s in _OLD_ROWS]
    _pg_exec(pg_dsn, [*ddl, *rows, f"INSERT INTO {q}.meta VALUES ('schema_version', '1')"])
    stores = await PostgresStores.open(pg_dsn, schema=pg_schema)
    try:
        assert await stores.runs.load("r1") == ("paused", '{"step": 3}')
        record = await stores.idempotency.get("k1", tenant="acme")
        assert record is not None and (record.state, record.owner) == ("completed", None)
        assert (
            await stores.idempotency.begin("k2", tenant="acme", tool="t", fingerprint="f", owner="me") is None
        )
    finally:
        await stores.close()
    versions, marker = _pg_exec(
        pg_dsn,
        [
            f"SELECT component, version FROM {q}.maitre_schema",
            f"SELECT value FROM {q}.meta WHERE name = 'schema_version'",
        ],
    )
    assert dict(versions) == {"gate": SCHEMA_VERSION, HASH_V1_MARK: 1}
    assert marker == [(str(SCHEMA_VERSION),)]
    reopened = await PostgresStores.open(pg_dsn, schema=pg_schema)
    try:  # an upgraded schema may hold version-1 keys: the gate keeps looking them up
        assert reopened.idempotency.legacy_hashes is True
    finally:
        await reopened.close()


@pytest.mark.postgres
async def test_a_new_postgres_schema_holds_no_version_1_hashes(pg_dsn: str, pg_schema: str) -> None:
    from maitre.stores.postgres import PostgresStores

    stores = await PostgresStores.open(pg_dsn, schema=pg_schema)
    try:
        assert stores.idempotency.legacy_hashes is False
    finally:
        await stores.close()


@pytest.mark.postgres
async def test_a_newer_or_foreign_postgres_schema_is_refused_in_one_line(pg_dsn: str, pg_schema: str) -> None:
    from maitre.stores.postgres import PostgresStores

    q = f'"{pg_schema}"'
    _pg_exec(pg_dsn, [f"CREATE SCHEMA {q}", f"CREATE TABLE {q}.invoices (id int)"])
    with pytest.raises(StoreError) as error:
        await PostgresStores.open(pg_dsn, schema=pg_schema)
    _assert_one_line(error, pg_schema, "not a maitre database", "invoices")
    _pg_exec(pg_dsn, [f"DROP TABLE {q}.invoices"])
    await (await PostgresStores.open(pg_dsn, schema=pg_schema)).close()
    newer = SCHEMA_VERSION + 1  # a version this maitre does not know yet
    _pg_exec(pg_dsn, [f"UPDATE {q}.maitre_schema SET version = {newer} WHERE component = 'gate'"])
    with pytest.raises(StoreError) as error:
        await PostgresStores.open(pg_dsn, schema=pg_schema)
    _assert_one_line(error, pg_schema, f"schema version {newer}", "upgrade maitre")


async def test_a_table_first_used_after_open_waits_for_another_writer_instead_of_failing(
    tmp_path: Any,
) -> None:
    """A component migrated on first use (console accounts, run claims) can meet another process's
    write transaction: the migration waits for the lock with backoff, it does not fail at once."""
    import anyio

    from maitre.storage.engine.base import Migration, Schema

    path = str(tmp_path / "busy.db")
    stores = SQLiteStores(path)
    try:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        schema = Schema(
            component="late_table",
            migrations=(Migration(version=1, statements=("CREATE TABLE late_table (x INTEGER)",)),),
            tables=frozenset({"late_table"}),
        )
        done: list[bool] = []

        async def migrate() -> None:
            await stores.db.migrate(schema)
            done.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(migrate)
            await anyio.sleep(0.2)
            assert not done  # still waiting for the lock, not failed
            other.execute("COMMIT")
        assert done
        other.close()
        check = sqlite3.connect(path)
        assert check.execute(
            "SELECT version FROM maitre_schema WHERE component = 'late_table'"
        ).fetchone() == (1,)
        check.close()
    finally:
        await stores.close()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_one_runs_approvals_and_audit_entries_are_read_by_index(
    backend: str, tmp_path: Any, request: Any
) -> None:
    """Gate schema 5: the resume worker's query (approvals by run) and the run page's (audit entries
    by run, in seq order) use an index instead of reading every tenant's rows."""
    if backend == "sqlite":
        stores = SQLiteStores(str(tmp_path / "indexed.db"))
        plan = "EXPLAIN QUERY PLAN "
    else:
        from maitre.stores.postgres import PostgresStores

        pg_dsn, pg_schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        stores = await PostgresStores.open(pg_dsn, schema=pg_schema)
        plan = "EXPLAIN "
    try:
        engine = stores.db
        if backend == "postgres":  # a planner would rather scan a tiny table; tell it not to
            await engine.execute("SET enable_seqscan = off")
        for sql, index in [
            ("SELECT id FROM {s}.approvals WHERE run_id = ?", "approvals_by_run"),
            ("SELECT seq FROM {s}.audit WHERE run_id = ? AND seq > ? ORDER BY seq", "audit_by_run"),
        ]:
            params = ("r1",) if "seq >" not in sql else ("r1", 0)
            rows = await engine.fetchall(plan + sql, params)
            assert index in " ".join(str(cell) for row in rows for cell in row), rows
    finally:
        await stores.close()
