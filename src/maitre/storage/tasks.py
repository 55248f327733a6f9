"""MCP task state (the Tasks extension, SEP-2663), written once over any engine: SQLite or Postgres.

`tools/call` may answer `CreateTaskResult` only after the task row is committed, so that a
`tasks/get` for the new id resolves at once in *any* process sharing the store: a stateless fleet
needs no sticky routing. On one host, `SQLiteTaskStore(path)` (one WAL file) is enough; across hosts,
`PostgresTaskStore(dsn, schema=...)`. `MemoryTaskStore` keeps tasks in one process (tests, stdio).
Both SQL stores are `SQLTaskStore` over an engine; `open_task_store(url)` picks one from a URL.

The table is `maitre_mcp_tasks`, component `mcp_tasks` in `maitre_schema`. Version 1 is the table
the SQLite-only store wrote (with a `user` column, a reserved word in Postgres); version 2 renames
it `user_id` and is where Postgres starts.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from maitre.storage.engine.base import Engine, Migration, Schema
from maitre.storage.engine.sqlite import SQLiteEngine
from maitre.storage.subject_keys import (
    GATE_SECRET_ENV,
    GATE_SECRET_FILE_ENV,
    SQLSubjectKeys,
    SubjectKeys,
    is_sealed,
    master_secret,
)

__all__ = [
    "FORGOTTEN_RESULT",
    "MemoryTaskStore",
    "PostgresTaskStore",
    "SQLTaskStore",
    "SQLiteTaskStore",
    "TASKS_EXTENSION",
    "TASKS_SCHEMA",
    "TERMINAL",
    "TaskRecord",
    "TaskStore",
    "new_task_id",
    "open_task_store",
    "task_to_wire",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""Task statuses that never change again."""


def new_task_id() -> str:
    """A fresh, unguessable task id (128 random bits)."""
    import secrets

    return "task_" + secrets.token_urlsafe(16)


@dataclass(kw_only=True)
class TaskRecord:
    """One task as stored."""

    task_id: str
    """The id the client polls with."""
    tenant: str
    """Owner's tenant: reads by anyone else answer "not found"."""
    user: str
    """Owner's user, checked like the tenant."""
    tool: str
    """The tool the task runs."""
    status: str = "working"
    """working | input_required | completed | failed | cancelled."""
    status_message: str | None = None
    """A human-readable note on the status."""
    created_at: float = field(default_factory=time.time)
    """Unix time the task was created."""
    updated_at: float = field(default_factory=time.time)
    """Unix time of the last change."""
    ttl_ms: int | None = 3_600_000
    """How long the result is kept after completion (None: unlimited)."""
    poll_ms: int = 500
    """The poll interval suggested to the client."""
    result: dict[str, Any] | None = None
    """The `CallToolResult` (wire shape) once completed."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error once failed."""
    input_requests: dict[str, Any] | None = None
    """What the task waits for when `input_required`."""
    cancel_requested: bool = False
    """Set by `tasks/cancel` in any process; the owner stops the work."""
    owner: str = ""
    """The process running the work."""
    heartbeat_at: float = field(default_factory=time.time)
    """The owner's last sign of life; a `working` task silent past the lease reads as failed."""


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_to_wire(task: TaskRecord, *, lease_s: float, result_type: str = "complete") -> dict[str, Any]:
    """The DetailedTask (or, with `result_type="task"`, the CreateTaskResult) for `task`."""
    status, error, message = task.status, task.error, task.status_message
    if status == "working" and time.time() - task.heartbeat_at > lease_s:
        status, message = "failed", "The server process running this task stopped; start it again."
        error = {"code": -32603, "message": "task worker lost"}
    wire: dict[str, Any] = {
        "resultType": result_type,
        "taskId": task.task_id,
        "status": status,
        "createdAt": _iso(task.created_at),
        "lastUpdatedAt": _iso(task.updated_at),
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_ms,
    }
    if message:
        wire["statusMessage"] = message
    if status == "completed" and task.result is not None:
        wire["result"] = task.result
    if status == "failed" and error is not None:
        wire["error"] = error
    if status == "input_required" and task.input_requests:
        wire["inputRequests"] = task.input_requests
    return wire


class TaskStore(Protocol):
    """**Protocol:** where task state lives, shared by every server process that answers for it."""

    async def create(self, task: TaskRecord) -> None:
        """Store a new task; committed (visible to every process) when this returns."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        ...

    async def update(self, task_id: str, **changes: Any) -> None:
        """Change fields of a task (`updated_at` is set to now unless given)."""
        ...


class MemoryTaskStore:
    """Tasks in this process only (tests, stdio)."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}

    async def create(self, task: TaskRecord) -> None:
        self._tasks[task.task_id] = TaskRecord(**asdict(task))

    async def get(self, task_id: str) -> TaskRecord | None:
        task = self._tasks.get(task_id)
        return TaskRecord(**asdict(task)) if task is not None else None

    async def update(self, task_id: str, **changes: Any) -> None:
        task = self._tasks.get(task_id)
        if task is not None:
            for key, value in changes.items():
                setattr(task, key, value)
            task.updated_at = changes.get("updated_at", time.time())


# ------------------------------------------------------------------------------------------------- SQL

_V1_SQLITE = """CREATE TABLE IF NOT EXISTS maitre_mcp_tasks (
    task_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, user TEXT NOT NULL, tool TEXT NOT NULL,
    status TEXT NOT NULL, status_message TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    ttl_ms INTEGER, poll_ms INTEGER NOT NULL, result TEXT, error TEXT, input_requests TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL, heartbeat_at REAL NOT NULL
)"""

_V2_POSTGRES = """CREATE TABLE IF NOT EXISTS {s}.maitre_mcp_tasks (
    task_id text PRIMARY KEY, tenant text NOT NULL, user_id text NOT NULL, tool text NOT NULL,
    status text NOT NULL, status_message text, created_at double precision NOT NULL,
    updated_at double precision NOT NULL, ttl_ms bigint, poll_ms integer NOT NULL, result text,
    error text, input_requests text, cancel_requested boolean NOT NULL DEFAULT false,
    owner text NOT NULL, heartbeat_at double precision NOT NULL
)"""

TASKS_SCHEMA = Schema(
    component="mcp_tasks",
    migrations=(
        Migration(version=1, sqlite=(_V1_SQLITE,)),
        Migration(
            version=2,
            sqlite=("ALTER TABLE maitre_mcp_tasks RENAME COLUMN user TO user_id",),
            postgres=(_V2_POSTGRES,),
        ),
    ),
    tables=frozenset({"maitre_mcp_tasks"}),
    legacy_version=lambda tables, marker: 1 if "maitre_mcp_tasks" in tables else None,
)
"""The task table as forward migrations (see the module docstring)."""

_FIELDS = tuple(f.name for f in fields(TaskRecord))
_COLUMN = {name: ("user_id" if name == "user" else name) for name in _FIELDS}
_JSON_FIELDS = frozenset({"result", "error", "input_requests"})
_INSERT = (
    f"INSERT INTO {{s}}.maitre_mcp_tasks ({', '.join(_COLUMN[n] for n in _FIELDS)}) "
    f"VALUES ({', '.join('?' for _ in _FIELDS)})"
)
_SELECT = f"SELECT {', '.join(_COLUMN[n] for n in _FIELDS)} FROM {{s}}.maitre_mcp_tasks WHERE task_id = ?"


def _to_column(name: str, value: Any) -> Any:
    if name in _JSON_FIELDS:
        return None if value is None else json.dumps(value)
    if name == "cancel_requested":
        return bool(value)
    return value


def _from_row(row: tuple[Any, ...]) -> TaskRecord:
    data = dict(zip(_FIELDS, row, strict=True))
    for name in _JSON_FIELDS:
        if data[name] is not None:
            data[name] = json.loads(data[name])
    data["cancel_requested"] = bool(data["cancel_requested"])
    return TaskRecord(**data)


class SQLTaskStore:
    """`TaskStore` over an engine (the engine must have migrated `TASKS_SCHEMA`, or will on first use).

    With `subject_keys`, a task's `result`, `error` and `input_requests` - a tool's output, personal
    data as often as not - are stored sealed under the task owner's key (`maitre.storage.subject_keys`)
    and opened by `get` while it lives; once a forget erased it they read as a result that says
    so (`FORGOTTEN_RESULT`), never the old value.
    """

    def __init__(self, engine: Engine, subject_keys: SubjectKeys | None = None) -> None:
        self._engine = engine
        self.subject_keys = subject_keys

    @property
    def engine(self) -> Engine:
        """Where the tasks live."""
        return self._engine

    async def create(self, task: TaskRecord) -> None:
        row = asdict(task)
        if self.subject_keys is not None and any(row[name] is not None for name in _JSON_FIELDS):
            row.update(await self._seal(task.tenant, task.user, task.task_id, row))
        await self._engine.execute(_INSERT, tuple(_to_column(name, row[name]) for name in _FIELDS))

    async def get(self, task_id: str) -> TaskRecord | None:
        row = await self._engine.fetchone(_SELECT, (task_id,))
        if row is None:
            return None
        task = _from_row(row)
        if self.subject_keys is not None and any(is_sealed(getattr(task, n)) for n in _JSON_FIELDS):
            key = await self.subject_keys.key(task.tenant, task.user, create=False)
            for name in _JSON_FIELDS:
                value = getattr(task, name)
                if is_sealed(value):
                    opened = None if key is None else key.open(value, f"task.{name}:{task_id}")
                    setattr(task, name, _forgotten(name) if opened is None else json.loads(opened))
        return task

    async def _seal(self, tenant: str, user: str, task_id: str, values: dict[str, Any]) -> dict[str, Any]:
        assert self.subject_keys is not None
        key = await self.subject_keys.key(tenant, user)
        assert key is not None  # created when missing
        return {
            name: key.seal(json.dumps(values[name]), f"task.{name}:{task_id}")
            for name in _JSON_FIELDS
            if values.get(name) is not None
        }

    async def update(self, task_id: str, **changes: Any) -> None:
        changes = {"updated_at": time.time(), **changes}
        unknown = set(changes) - set(_FIELDS) | ({"task_id"} & set(changes))
        if unknown:
            raise ValueError(f"unknown task fields {sorted(unknown)}")
        if self.subject_keys is not None and any(changes.get(name) is not None for name in _JSON_FIELDS):
            owner = await self._engine.fetchone(
                "SELECT tenant, user_id FROM {s}.maitre_mcp_tasks WHERE task_id = ?", (task_id,)
            )
            if owner is None:
                return  # no such task: the UPDATE would change nothing either
            changes.update(await self._seal(str(owner[0]), str(owner[1]), task_id, changes))
        assignments = ", ".join(f"{_COLUMN[name]} = ?" for name in changes)
        params = (*(_to_column(name, value) for name, value in changes.items()), task_id)
        await self._engine.execute(
            f"UPDATE {{s}}.maitre_mcp_tasks SET {assignments} WHERE task_id = ?", params
        )

    async def close(self) -> None:
        """Release the engine's connections."""
        await self._engine.close()


class SQLiteTaskStore(SQLTaskStore):
    """Tasks in one SQLite file (WAL), shared by every server process on the host.

    The file may be the gate's own (`maitre.db`) or a separate one; it is created or migrated here.
    """

    def __init__(self, path: str | os.PathLike[str], *, secret: bytes | str | None = None) -> None:
        engine = SQLiteEngine(path)
        try:
            engine.migrate_now(TASKS_SCHEMA)
        except BaseException:
            engine.close_now()
            raise
        self.path = engine.path
        """The database file."""
        # Results are sealed under their owner's key (the master secret: `secret`, the environment,
        # or the key file beside the database, made on first use).
        super().__init__(engine, SQLSubjectKeys(engine, master_secret(secret, database=engine.path)))


class PostgresTaskStore(SQLTaskStore):
    """Tasks in a Postgres schema, shared by server processes on any number of hosts.

    The constructor does no I/O (servers build it at import, outside any event loop): the pool
    opens and the table is migrated on first use, in the serving loop.
    """

    def __init__(
        self, dsn: str, *, schema: str = "maitre", pool_size: int = 4, secret: bytes | str | None = None
    ) -> None:
        from maitre.storage.engine.postgres import PostgresEngine

        engine = PostgresEngine(dsn, schema=schema, pool_size=pool_size)
        engine.require(TASKS_SCHEMA)
        self.schema = schema
        """The Postgres schema holding `maitre_mcp_tasks`."""
        # Sealed when a master secret is configured (`secret`, `$MAITRE_GATE_SECRET`, memory's);
        # a server database never gets a generated one, and tasks kept working without it before.
        keys = SQLSubjectKeys(engine, master_secret(secret)) if _configured(secret) else None
        super().__init__(engine, keys)


def open_task_store(url: str) -> SQLTaskStore:
    """A task store from a URL: `postgresql://...[?schema=x]`, `sqlite:///path.db` or a file path."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        schema = next((value for key, value in query if key == "schema"), "maitre")
        dsn = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
        return PostgresTaskStore(dsn, schema=schema)
    if url.startswith("sqlite://"):
        parts = urlsplit(url)
        url = parts.netloc + parts.path
    elif "://" in url:
        raise ValueError(
            f"unknown task store URL {url!r}: use a file path, sqlite:///path.db or postgresql://..."
        )
    return SQLiteTaskStore(url)


FORGOTTEN_RESULT: dict[str, Any] = {
    "content": [
        {
            "type": "text",
            "text": "[forgotten: this task's result held personal data that the user has since asked "
            "to forget, so it is no longer kept.]",
        }
    ],
    "isError": False,
}
"""What a sealed task result reads as once its owner's key is erased."""


def _forgotten(name: str) -> dict[str, Any]:
    if name == "result":
        return json.loads(json.dumps(FORGOTTEN_RESULT))  # type: ignore[no-any-return]
    if name == "error":
        return {"code": -32603, "message": "This task's error detail was forgotten at the user's request."}
    return {}


def _configured(secret: bytes | str | None) -> bool:
    return secret is not None or any(
        os.environ.get(name)
        for name in (
            GATE_SECRET_ENV,
            GATE_SECRET_FILE_ENV,
            "MAITRE_MEMORY_SECRET",
            "MAITRE_MEMORY_SECRET_FILE",
        )
    )
