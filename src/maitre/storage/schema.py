"""The gate's tables (approvals, idempotency, audit, handles, runs, rate limits) as forward migrations.

Version 1 is the schema maitre wrote before the version table existed (SQLite `user_version = 1`,
Postgres `meta.schema_version = 1`); version 2 adds `idempotency.owner` (who holds an in-flight key,
issue 10); version 3 is the hash-format change (issue 11: RFC 8785, `h2:` call hashes, `idk2_` keys).
A database upgraded from 1 or 2 may still hold version-1 keys and hashes, so the upgrade writes the
row `(gate.hash_v1, 1)` into `maitre_schema` and the gate keeps looking old keys up there; a database
created at version 3 has no such row and never pays for that look-up (`HASH_V1_MARK`). Version 3
also makes a maitre that predates the change refuse the database, so it can never add old keys.
Version 4 keeps what an approver needs beside each approval request (issue 13): the policy rule that
asked, the taint source, and the tool's effect and risk; rows written before it read with the
defaults (no rule, no taint, effect and risk unknown).

A new step is appended here and never edited once released. The DDL per dialect stays as it was
written, so a new database has exactly the shape an upgraded one has.

The audit table refuses UPDATE and DELETE (and, on Postgres, TRUNCATE) with triggers. Someone with
the file or a superuser can drop them; `maitre.audit.verify` is what detects that.
"""

from __future__ import annotations

from maitre.storage.engine.base import Migration, Schema

__all__ = ["GATE_SCHEMA", "GATE_TABLES", "HASH_V1_MARK", "SCHEMA_VERSION"]

GATE_TABLES = frozenset({"approvals", "idempotency", "audit", "handles", "runs", "rate_limits"})

_SQLITE_V1 = (
    """CREATE TABLE IF NOT EXISTS approvals (
        id TEXT PRIMARY KEY, tool TEXT NOT NULL, arguments TEXT NOT NULL, call_hash TEXT NOT NULL,
        user_id TEXT NOT NULL, tenant TEXT NOT NULL, run_id TEXT, reason TEXT NOT NULL,
        created_at REAL NOT NULL, expires_at REAL NOT NULL, status TEXT NOT NULL, approver TEXT,
        decided_at REAL, message TEXT, edited_arguments TEXT, approved_hash TEXT, used_at REAL)""",
    "CREATE INDEX IF NOT EXISTS approvals_by_status ON approvals (status, created_at)",
    """CREATE TABLE IF NOT EXISTS idempotency (
        idem_key TEXT NOT NULL, tenant TEXT NOT NULL, tool TEXT NOT NULL, fingerprint TEXT NOT NULL,
        state TEXT NOT NULL, result TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        lease_until REAL NOT NULL, PRIMARY KEY (tenant, idem_key)) WITHOUT ROWID""",
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

_POSTGRES_V1 = (
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
        updated_at double precision NOT NULL, lease_until double precision NOT NULL,
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

_OWNER = ("idempotency", "owner", "TEXT")

_APPROVAL_CONTEXT = (
    ("approvals", "policy_rule", "TEXT"),
    ("approvals", "taint", "TEXT"),
    ("approvals", "effect", "TEXT"),
    ("approvals", "risk", "TEXT"),
)
"""The approval request's context for its approver (version 4); `taint` is `TaintSource` as JSON."""

HASH_V1_MARK = "gate.hash_v1"
"""The `maitre_schema` component row that says a database may hold version-1 hashes."""

_MARK_HASH_V1 = (
    "INSERT INTO {s}.maitre_schema (component, version) VALUES ('gate.hash_v1', 1) "
    "ON CONFLICT (component) DO NOTHING",
)


def _legacy_version(tables: frozenset[str], marker: int) -> int | None:
    """A database from before `maitre_schema`: version 1 if it has the gate's tables."""
    return 1 if {"approvals", "idempotency", "audit"} <= tables else None


_BY_RUN = (
    "CREATE INDEX IF NOT EXISTS approvals_by_run ON {s}.approvals (run_id)",
    "CREATE INDEX IF NOT EXISTS audit_by_run ON {s}.audit (run_id, seq)",
)

GATE_SCHEMA = Schema(
    component="gate",
    migrations=(
        Migration(version=1, sqlite=_SQLITE_V1, postgres=_POSTGRES_V1),
        Migration(version=2, add_columns=(_OWNER,)),
        Migration(version=3, upgrade=_MARK_HASH_V1),
        Migration(version=4, add_columns=_APPROVAL_CONTEXT),
        # one run's approvals (the resume worker's query) and audit entries (the run page)
        Migration(version=5, statements=_BY_RUN),
    ),
    tables=GATE_TABLES,
    legacy_version=_legacy_version,
    repair_columns=(_OWNER,),
)

SCHEMA_VERSION = GATE_SCHEMA.version
"""The gate schema's newest version (also written to SQLite `user_version` / Postgres `meta`, so a
maitre from before the version table refuses a database this one wrote)."""
