"""Seed 004 on maitre: two server processes on one store answer start_export and check_export."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import jwt
import pytest

from maitre.mcp.testing import bearer_client, raw_request, serve_process

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
KEY = "export-example-jwt-secret-0123456789abcdef"


def _token(user: str, tenant: str) -> str:
    claims = {
        "sub": user,
        "tenant": tenant,
        "iss": "https://idp.example",
        "aud": "reports",
        "exp": int(time.time()) + 300,
    }
    return jwt.encode(claims, KEY, algorithm="HS256")


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("export")
    key_file = tmp_path / "jwt.key"
    key_file.write_text(KEY)
    env = {"MAITRE_MCP_SECRET": "s" * 40, "EXPORT_DB": str(tmp_path / "exports.db"), "EXPORT_SECONDS": "0.5"}
    args = [
        "--jwt-issuer",
        "https://idp.example",
        "--jwt-audience",
        "reports",
        "--jwt-key-file",
        str(key_file),
    ]
    target = "examples/export_server/server.py:server"
    with (
        serve_process(target, args=args, env=env, cwd=str(ROOT)) as a,
        serve_process(target, args=args, env=env, cwd=str(ROOT)) as b,
    ):
        yield a, b


async def test_the_handle_is_the_state_across_two_processes(two_servers):
    """start_export on one process, check_export on the other; other tenants and forgeries get NOT_FOUND."""
    a, b = two_servers
    alice = _token("alice", "acme")
    async with bearer_client(a, alice) as client:
        started = await client.call_tool("start_export", {"dataset": "orders"})
    handle = started.structured_content["handle"]
    async with bearer_client(b, alice) as client:
        first = await client.call_tool("check_export", {"handle": handle})
        assert not first.is_error and first.structured_content["status"] in ("running", "done")
        await anyio.sleep(0.6)
        done = await client.call_tool("check_export", {"handle": handle})
        assert done.structured_content["status"] == "done"
        assert done.structured_content["download"].startswith("exports://acme/")
        forged = await client.call_tool("check_export", {"handle": handle[:-3] + "abc"})
    async with bearer_client(b, _token("mallory", "evil")) as client:
        stolen = await client.call_tool("check_export", {"handle": handle})
    for attempt in (forged, stolen):
        assert attempt.is_error and attempt.meta["io.maitre/error"]["code"] == "NOT_FOUND"
    assert forged.content[0].text == stolen.content[0].text  # no oracle: one answer for both


async def test_a_task_started_on_one_process_is_answered_by_the_other(two_servers):
    """export_now runs as a task; tasks/get works on the other process, and not for another tenant."""
    a, b = two_servers
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    alice = {"Authorization": f"Bearer {_token('alice', 'acme')}"}
    status, created = await raw_request(
        a,
        "tools/call",
        {"name": "export_now", "arguments": {"dataset": "tickets"}},
        name="export_now",
        headers=alice,
        capabilities=caps,
    )
    assert status == 200 and created["result"]["resultType"] == "task"
    task_id = created["result"]["taskId"]
    final = None
    for _ in range(50):
        _, got = await raw_request(
            b, "tasks/get", {"taskId": task_id}, name=task_id, headers=alice, capabilities=caps
        )
        final = got["result"]
        if final["status"] == "completed":
            break
        await anyio.sleep(0.1)
    assert final is not None and final["status"] == "completed"
    assert final["result"]["structuredContent"]["download"] == "exports://acme/tickets.csv"
    mallory = {"Authorization": f"Bearer {_token('mallory', 'evil')}"}
    _, other = await raw_request(
        b, "tasks/get", {"taskId": task_id}, name=task_id, headers=mallory, capabilities=caps
    )
    assert other["error"]["code"] == -32602
