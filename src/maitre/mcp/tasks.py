"""The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) with state in a shared store.

A tool declared `long_running=True` is served as a task when the client declares the extension
on the request: `tools/call` answers a `CreateTaskResult` (`resultType: "task"`) only after the
task row is committed, the work runs in the background of the process that took the call, and
*any* process sharing the store answers `tasks/get` / `tasks/cancel` - a stateless fleet needs no
sticky routing. The work itself is an ordinary `Gate.call`, so a task is governed like any call.

Store: `SQLiteTaskStore` (one file, WAL; many processes on one host), `PostgresTaskStore` (many
hosts) or `MemoryTaskStore` (one process); `open_task_store(url)` picks one. The persistence is
written once in `maitre.storage.tasks` and re-exported here. Task ids are 128-bit random and every
read is checked against the caller's tenant and user, answering "not found" for someone else's
task (no existence oracle).

A worker heartbeats while it runs; a `working` task whose heartbeat is older than the lease is
reported `failed` (the process that owned it died), so a client never polls a ghost forever.
Cancellation is cooperative: the owner process cancels the work's scope (directly, or within a
poll interval when the cancel arrived at another process).
"""

from __future__ import annotations

from maitre.storage.tasks import (
    TASKS_EXTENSION,
    TERMINAL,
    MemoryTaskStore,
    PostgresTaskStore,
    SQLiteTaskStore,
    SQLTaskStore,
    TaskRecord,
    TaskStore,
    new_task_id,
    open_task_store,
    task_to_wire,
)

__all__ = [
    "MemoryTaskStore",
    "PostgresTaskStore",
    "SQLTaskStore",
    "SQLiteTaskStore",
    "TASKS_EXTENSION",
    "TERMINAL",
    "TaskRecord",
    "TaskStore",
    "new_task_id",
    "open_task_store",
    "task_to_wire",
]
