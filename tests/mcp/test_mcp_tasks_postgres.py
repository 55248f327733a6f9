"""MCP tasks on Postgres, across two server processes (no shared file, no sticky routing).

Process A takes `tools/call` and runs the task; process B, another `maitre.mcp serve` on the same
Postgres schema, answers `tasks/get` at once (the row is committed before A answers), takes a
`tasks/cancel` that A then honours, and reports a completed task's result.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre.mcp.testing import raw_request, serve_process

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture(scope="module")
def two_servers() -> Iterator[tuple[str, str, str]]:
    psycopg = pytest.importorskip("psycopg")
    try:
        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        pytest.skip(f"PostgreSQL at {PG_DSN} is not reachable: {exc}")
    schema = f"maitre_test_tasks_{uuid.uuid4().hex[:10]}"
    env = {"MAITRE_TASKS_DSN": PG_DSN, "MAITRE_TASKS_SCHEMA": schema}
    target = "tests/mcp/pg_task_server.py:server"
    try:
        with (
            serve_process(target, env=env, cwd=str(ROOT)) as a,
            serve_process(target, env=env, cwd=str(ROOT)) as b,
        ):
            yield a, b, schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _get(url: str, task_id: str) -> dict[str, Any]:
    _, got = await raw_request(url, "tasks/get", {"taskId": task_id}, name=task_id, capabilities=TASKS)
    return got


async def _start(url: str, seconds: float) -> str:
    status, created = await raw_request(
        url,
        "tools/call",
        {"name": "crunch", "arguments": {"seconds": seconds}},
        name="crunch",
        capabilities=TASKS,
    )
    assert status == 200 and created["result"]["resultType"] == "task", created
    return str(created["result"]["taskId"])


async def test_a_task_started_on_one_process_completes_and_is_read_on_the_other(two_servers):
    a, b, schema = two_servers
    task_id = await _start(a, 0.2)
    first = await _get(b, task_id)  # committed before A answered: B sees it at once
    assert first["result"]["status"] in ("working", "completed")
    final = first["result"]
    for _ in range(100):
        if final["status"] == "completed":
            break
        await anyio.sleep(0.05)
        final = (await _get(b, task_id))["result"]
    assert final["status"] == "completed"
    assert final["result"]["content"][0]["text"].startswith("crunched for 0.2s")
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_DSN) as conn:
        cursor = await conn.execute(
            f'SELECT status FROM "{schema}".maitre_mcp_tasks WHERE task_id = %s', (task_id,)
        )
        assert await cursor.fetchone() == ("completed",)


async def test_a_cancel_taken_by_one_process_stops_the_work_in_the_other(two_servers):
    a, b, _ = two_servers
    task_id = await _start(a, 30)
    assert (await _get(b, task_id))["result"]["status"] == "working"
    _, ack = await raw_request(b, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=TASKS)
    assert "error" not in ack, ack
    status = None
    for _ in range(100):
        status = (await _get(a, task_id))["result"]["status"]
        if status == "cancelled":
            break
        await anyio.sleep(0.05)
    assert status == "cancelled"


async def test_an_unknown_task_is_not_found_on_either_process(two_servers):
    a, b, _ = two_servers
    for url in (a, b):
        got = await _get(url, "task_" + "x" * 22)
        assert "error" in got and "result" not in got
