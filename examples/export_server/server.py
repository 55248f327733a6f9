"""Seed 004's export server on maitre: "the handle is the state".

`start_export` records the job in a shared SQLite file and returns a signed, tenant-bound handle;
`check_export` opens the handle and reads the job. The two calls may reach two different server
processes - nothing lives in process memory - so run as many as you like behind a load balancer:

    MAITRE_MCP_SECRET=... EXPORT_DB=/tmp/exports.db \\
        maitre serve examples/export_server/server.py:server --transport http --port 8001
    (the same on port 8002)

A forged handle, an edited one or another tenant's answers NOT_FOUND. `export_now` is the
long-running variant: clients that declare the Tasks extension get a task that any process
sharing `EXPORT_DB` answers `tasks/get` for. Every call goes through the gate.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from typing import Literal

import anyio
from pydantic import BaseModel

from maitre import Principal, Toolbox
from maitre.mcp.app import MCPApp
from maitre.mcp.handles import Handles
from maitre.mcp.server import GovernedServer, ServerOptions
from maitre.mcp.signing import load_secret
from maitre.mcp.tasks import SQLiteTaskStore

DB = os.environ.get("EXPORT_DB", "exports.db")
EXPORT_SECONDS = float(os.environ.get("EXPORT_SECONDS", "1.0"))
SECRET = load_secret()
handles = Handles(SECRET)
Dataset = Literal["orders", "customers", "tickets"]


def _db() -> sqlite3.Connection:
    con = sqlite3.connect(DB, timeout=10, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(
        "CREATE TABLE IF NOT EXISTS exports (job_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, dataset TEXT NOT NULL,"
        " started_at REAL NOT NULL)"
    )
    return con


class ExportStarted(BaseModel):
    handle: str
    status: Literal["running"]


class ExportStatus(BaseModel):
    dataset: str
    status: Literal["running", "done"]
    download: str | None = None


box = Toolbox()


@box.tool(effect="write", risk="low", idempotent=False)
def start_export(dataset: Dataset, principal: Principal) -> ExportStarted:
    """Begin exporting a dataset. Returns a handle; pass it to check_export to follow the export.

    Args:
        dataset: which dataset to export.
    """
    job_id = f"job_{uuid.uuid4().hex[:12]}"
    with _db() as con:
        con.execute(
            "INSERT INTO exports VALUES (?, ?, ?, ?)", (job_id, principal.tenant, dataset, time.time())
        )
    return ExportStarted(handle=handles.mint("export", job_id, principal), status="running")


@box.tool
def check_export(handle: str, principal: Principal) -> ExportStatus:
    """Check an export by the handle start_export returned. Read-only.

    Args:
        handle: the handle exactly as start_export returned it.
    """
    job_id = handles.open(handle, principal, kind="export")
    with _db() as con:
        row = con.execute("SELECT dataset, started_at FROM exports WHERE job_id = ?", (job_id,)).fetchone()
    if row is None:  # a valid handle to a purged job
        return ExportStatus(dataset="unknown", status="done")
    dataset, started = row
    if time.time() - started < EXPORT_SECONDS:
        return ExportStatus(dataset=dataset, status="running")
    return ExportStatus(dataset=dataset, status="done", download=f"exports://{principal.tenant}/{job_id}.csv")


@box.tool(effect="write", risk="low", long_running=True, timeout=300)
async def export_now(dataset: Dataset, principal: Principal) -> ExportStatus:
    """Export a dataset and wait for it (served as a task to clients that support tasks).

    Args:
        dataset: which dataset to export.
    """
    await anyio.sleep(EXPORT_SECONDS)
    return ExportStatus(
        dataset=dataset, status="done", download=f"exports://{principal.tenant}/{dataset}.csv"
    )


app = MCPApp(box, name="reports", version="1.0")
server = GovernedServer(app, ServerOptions(secret=SECRET, task_store=SQLiteTaskStore(DB)))
