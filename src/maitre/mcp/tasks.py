"""The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) with state in a shared store.

A tool declared `long_running=True` is served as a task when the client declares the extension
on the request: `tools/call` answers a `CreateTaskResult` (`resultType: "task"`) only after the
task row is committed, the work runs in the background of the process that took the call, and
*any* process sharing the store answers `tasks/get` / `tasks/cancel` - a stateless fleet needs no
sticky routing. The work itself is an ordinary `Gate.call`, so a task is governed like any call.

Store: `SQLiteTaskStore` (one file, WAL; many processes on one host) or `MemoryTaskStore` (one
process). Task ids are 128-bit random and every read is checked against the caller's tenant and
user, answering "not found" for someone else's task (no existence oracle).

A worker heartbeats while it runs; a `working` task whose heartbeat is older than the lease is
reported `failed` (the process that owned it died), so a client never polls a ghost forever.
Cancellation is cooperative: the owner process cancels the work's scope (directly, or within a
poll interval when the cancel arrived at another process).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

__all__ = [
    "MemoryTaskStore",
    "SQLiteTaskStore",
    "TASKS_EXTENSION",
    "TERMINAL",
    "TaskRecord",
    "TaskStore",
    "new_task_id",
    "task_to_wire",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def new_task_id() -> str:
    return "task_" + secrets.token_urlsafe(16)


@dataclass(kw_only=True)
class TaskRecord:
    """One task as stored."""

    task_id: str
    tenant: str
    """Owner's tenant: reads by anyone else answer "not found"."""
    user: str
    tool: str
    status: str = "working"
    """working | input_required | completed | failed | cancelled."""
    status_message: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    ttl_ms: int | None = 3_600_000
    poll_ms: int = 500
    result: dict[str, Any] | None = None
    """The `CallToolResult` (wire shape) once completed."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error once failed."""
    input_requests: dict[str, Any] | None = None
    cancel_requested: bool = False
    owner: str = ""
    """The process running the work."""
    heartbeat_at: float = field(default_factory=time.time)


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

    async def create(self, task: TaskRecord) -> None: ...

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def update(self, task_id: str, **changes: Any) -> None: ...


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


_JSON_FIELDS = ("result", "error", "input_requests")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS maitre_mcp_tasks (
    task_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, user TEXT NOT NULL, tool TEXT NOT NULL,
    status TEXT NOT NULL, status_message TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    ttl_ms INTEGER, poll_ms INTEGER NOT NULL, result TEXT, error TEXT, input_requests TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0, owner TEXT NOT NULL, heartbeat_at REAL NOT NULL
)
"""


class SQLiteTaskStore:
    """Tasks in one SQLite file (WAL), shared by every server process on the host.

    Writes commit before `create` returns, which is what lets `tools/call` promise that a
    `tasks/get` for the new id resolves at once, in any process.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._local = threading.local()
        with self._connect() as con:
            con.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=True)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.row_factory = sqlite3.Row
            self._local.con = con
        return con

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    def _create(self, task: TaskRecord) -> None:
        row = asdict(task)
        for key in _JSON_FIELDS:
            row[key] = json.dumps(row[key]) if row[key] is not None else None
        row["cancel_requested"] = int(row["cancel_requested"])
        columns = ", ".join(row)
        marks = ", ".join(f":{k}" for k in row)
        self._connect().execute(f"INSERT INTO maitre_mcp_tasks ({columns}) VALUES ({marks})", row)

    def _get(self, task_id: str) -> TaskRecord | None:
        row = (
            self._connect().execute("SELECT * FROM maitre_mcp_tasks WHERE task_id = ?", (task_id,)).fetchone()
        )
        if row is None:
            return None
        data = dict(row)
        for key in _JSON_FIELDS:
            data[key] = json.loads(data[key]) if data[key] is not None else None
        data["cancel_requested"] = bool(data["cancel_requested"])
        return TaskRecord(**data)

    def _update(self, task_id: str, changes: dict[str, Any]) -> None:
        changes = {"updated_at": time.time(), **changes}
        for key in _JSON_FIELDS:
            if key in changes and changes[key] is not None:
                changes[key] = json.dumps(changes[key])
        if "cancel_requested" in changes:
            changes["cancel_requested"] = int(changes["cancel_requested"])
        allowed = set(TaskRecord.__dataclass_fields__) - {"task_id"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"unknown task fields {sorted(unknown)}")
        assignments = ", ".join(f"{k} = :{k}" for k in changes)
        self._connect().execute(
            f"UPDATE maitre_mcp_tasks SET {assignments} WHERE task_id = :task_id",
            {**changes, "task_id": task_id},
        )

    async def create(self, task: TaskRecord) -> None:
        await self._run(self._create, task)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._run(self._get, task_id)

    async def update(self, task_id: str, **changes: Any) -> None:
        await self._run(self._update, task_id, changes)
