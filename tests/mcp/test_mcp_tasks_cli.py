"""Tasks across processes (shared SQLite store) with cancellation, and the `maitre mcp` commands."""

from __future__ import annotations

import anyio
import pytest
from typer.testing import CliRunner

from maitre import Toolbox
from maitre.cli.mcp_cmds import mcp_app
from maitre.mcp.app import MCPApp
from maitre.mcp.server import GovernedServer, ServerOptions
from maitre.mcp.tasks import SQLiteTaskStore
from maitre.mcp.testing import raw_request, serve_process
from maitre.mcp.transports import running_http

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _task_box(started: list[str]) -> Toolbox:
    box = Toolbox()

    @box.tool(long_running=True, timeout=60)
    async def crunch(seconds: float) -> str:
        """Crunch numbers for a while."""
        started.append("crunch")
        await anyio.sleep(seconds)
        return "crunched"

    return box


@pytest.mark.anyio
async def test_a_task_is_answered_and_cancelled_from_another_process(tmp_path):
    """Process A runs the task; B answers tasks/get and takes the cancel; A stops the work."""
    db = tmp_path / "tasks.db"
    started: list[str] = []
    a = GovernedServer(
        MCPApp(_task_box(started), name="t"), ServerOptions(task_store=SQLiteTaskStore(db), task_poll_ms=50)
    )
    b = GovernedServer(MCPApp(_task_box([]), name="t"), ServerOptions(task_store=SQLiteTaskStore(db)))
    async with running_http(a) as url_a, running_http(b) as url_b:
        _, created = await raw_request(
            url_a,
            "tools/call",
            {"name": "crunch", "arguments": {"seconds": 30}},
            name="crunch",
            capabilities=TASKS,
        )
        task_id = created["result"]["taskId"]
        _, seen = await raw_request(url_b, "tasks/get", {"taskId": task_id}, name=task_id, capabilities=TASKS)
        assert seen["result"]["status"] == "working"
        _, ack = await raw_request(
            url_b, "tasks/cancel", {"taskId": task_id}, name=task_id, capabilities=TASKS
        )
        assert ack["result"] == {"resultType": "complete", "_meta": ack["result"]["_meta"]}
        status = None
        for _ in range(60):
            _, got = await raw_request(
                url_b, "tasks/get", {"taskId": task_id}, name=task_id, capabilities=TASKS
            )
            status = got["result"]["status"]
            if status == "cancelled":
                break
            await anyio.sleep(0.05)
        assert status == "cancelled"
        _, sync = await raw_request(
            url_a, "tools/call", {"name": "crunch", "arguments": {"seconds": 0}}, name="crunch"
        )
        assert sync["result"]["content"][0]["text"] == "crunched"  # no tasks extension: runs synchronously
        _, refused = await raw_request(url_b, "tasks/get", {"taskId": task_id}, name=task_id)
        assert refused["error"]["code"] == -32021
    assert started == ["crunch", "crunch"]


def test_pin_then_check_then_drift_through_the_cli(tmp_path):
    """`maitre mcp pin` writes the lockfile, `check` is clean, and a changed server is drift (exit 1)."""
    lock = tmp_path / "mcp.lock.json"
    runner = CliRunner()
    with serve_process("tests/mcp/mcp_testkit.py:shop_box") as url:
        pinned = runner.invoke(
            mcp_app, ["pin", url, "--namespace", "shop", "--lockfile", str(lock), "--allow-loopback"]
        )
        assert pinned.exit_code == 0, pinned.output
        assert "pinned 3 tool(s)" in pinned.output
        clean = runner.invoke(
            mcp_app, ["check", url, "--namespace", "shop", "--lockfile", str(lock), "--allow-loopback"]
        )
        assert clean.exit_code == 0 and "match the lockfile" in clean.output
    with serve_process("tests/mcp/conformance/fixture.py:server") as other:
        drift = runner.invoke(
            mcp_app, ["check", other, "--namespace", "shop", "--lockfile", str(lock), "--allow-loopback"]
        )
    assert drift.exit_code == 1 and "kept out" in drift.output
    assert "get_order: pinned, but the server no longer offers it" in drift.output
