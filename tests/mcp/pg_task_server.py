"""A governed MCP server whose task state lives in Postgres (`MAITRE_TASKS_DSN`, `MAITRE_TASKS_SCHEMA`).

Served by `test_mcp_tasks_postgres.py` in two processes: what one process starts, the other answers.
"""

from __future__ import annotations

import os

import anyio

from maitre import Toolbox
from maitre.mcp.app import MCPApp
from maitre.mcp.server import GovernedServer, ServerOptions
from maitre.mcp.tasks import PostgresTaskStore

__all__ = ["server"]

box = Toolbox()


@box.tool(long_running=True, timeout=60)
async def crunch(seconds: float) -> str:
    """Crunch numbers for a while."""
    await anyio.sleep(seconds)
    return f"crunched for {seconds}s in {os.getpid()}"


store = PostgresTaskStore(os.environ["MAITRE_TASKS_DSN"], schema=os.environ["MAITRE_TASKS_SCHEMA"])
server = GovernedServer(MCPApp(box, name="pg-tasks"), ServerOptions(task_store=store, task_poll_ms=50))
