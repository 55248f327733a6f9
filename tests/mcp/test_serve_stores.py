"""`maitre serve --stores FILE` as a real process: a person decides a pending call with `maitre
approvals approve` from another process, the client's retry runs it exactly once, and a restarted
server keeps every approval, replay record, audit entry and task.

Everything runs as a user would run it: the server is `python -m maitre.cli serve` on 127.0.0.1
(a free port, streamable HTTP), the client is the `mcp` SDK's, without elicitation, and the
decisions are `python -m maitre.cli approvals ...` subprocesses. The second test takes the stores
and JWT auth (a JWKS served on 127.0.0.1) from maitre.toml instead of flags.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from maitre.cli.identity import os_user
from maitre.mcp.server import APPROVAL_META_KEY
from maitre.mcp.testing import bearer_client, free_port, raw_request
from mcp import Client

pytestmark = pytest.mark.slow

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}

APP = '''
import os
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import Field

from maitre import Toolbox

LEDGER = Path(os.environ["LEDGER"])
box = Toolbox()


@box.tool(effect="write", risk="high")
def refund(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")], amount: int) -> str:
    """Refund an order. Use it only when the customer is owed money."""
    with LEDGER.open("a") as ledger:
        ledger.write(f"refund {order_id} {amount}\\n")
    return f"refunded {amount} on {order_id}"


@box.tool(long_running=True, timeout=60)
async def report(month: str) -> str:
    """Build the monthly report (takes a moment)."""
    await anyio.sleep(0.2)
    with LEDGER.open("a") as ledger:
        ledger.write(f"report {month}\\n")
    return f"report for {month}"
'''


def maitre(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "maitre.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@contextmanager
def serving(folder: Path, db: Path | None, env: dict[str, str], *extra: str) -> Iterator[str]:
    """`maitre serve app.py:box --stores DB` until the block ends; yields the endpoint URL once the
    server says it is serving (it says so only after the bind). With `db` None, the stores come
    from the configuration file."""
    port = free_port()
    command = [sys.executable, "-m", "maitre.cli", "serve", "app.py:box", "--transport", "http"]
    stores = ["--stores", str(db)] if db is not None else []
    proc = subprocess.Popen(
        [*command, "--port", str(port), *stores, *extra],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while not any(line.startswith("serving ") for line in seen):
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError("the server exited: " + "".join(seen))
            seen.append(line)
            assert time.monotonic() < deadline, "".join(seen)
        assert f"127.0.0.1:{port}/mcp" in seen[-1]
        assert not any("no --stores" in line for line in seen)  # the state is durable: no warning
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


async def call(url: str, arguments: dict, approval_id: str | None = None):
    meta = {APPROVAL_META_KEY: approval_id} if approval_id else None
    async with Client(url, mode="2026-07-28") as client:  # no elicitation callback
        return await client.call_tool("refund", arguments, meta=meta)


def pending_ids(folder: Path, db: Path, env: dict[str, str], status: str = "pending") -> list[str]:
    listed = maitre(
        "approvals", "list", "--stores", str(db), "--status", status, "--json", cwd=folder, env=env
    )
    assert listed.returncode == 0, listed.stderr
    return [r["id"] for r in json.loads(listed.stdout)]


def test_a_cli_decision_runs_the_retry_once_and_a_restart_keeps_everything(tmp_path: Path):
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    ledger = tmp_path / "ledger.txt"
    db = tmp_path / "state" / "maitre.db"  # the folder does not exist: serve creates both
    env = {
        **os.environ,
        "LEDGER": str(ledger),
        "MAITRE_MCP_SECRET": "s" * 48,
        "MAITRE_CONFIG": "",  # no configuration file from the environment
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    first = {"order_id": "A1042", "amount": 30}
    second = {"order_id": "A2001", "amount": 12}

    with serving(tmp_path, db, env) as url:
        waiting = anyio.run(call, url, first)
        assert waiting.is_error and not ledger.exists()
        approval_id = waiting.meta["io.maitre/error"]["details"]["approval_id"]
        assert approval_id in waiting.content[0].text  # the client is told which id to decide

        assert pending_ids(tmp_path, db, env) == [approval_id]
        decided = maitre("approvals", "approve", approval_id, "--stores", str(db), cwd=tmp_path, env=env)
        assert decided.returncode == 0, decided.stderr
        assert f"by {os_user()} (via=cli)" in decided.stdout

        done = anyio.run(call, url, first, approval_id)
        assert not done.is_error and done.content[0].text == "refunded 30 on A1042"
        again = anyio.run(call, url, first, approval_id)
        assert again.meta["io.maitre/replayed"] is True
        assert ledger.read_text().splitlines() == ["refund A1042 30"]

        # A second call waits for a person across the restart.
        other = anyio.run(call, url, second)
        other_id = other.meta["io.maitre/error"]["details"]["approval_id"]

        # A long-running call becomes a task; its state is in the same store.
        _, created = anyio.run(
            lambda: raw_request(
                url, "tools/call", {"name": "report", "arguments": {"month": "2026-05"}},
                name="report", capabilities=TASKS,
            )
        )  # fmt: skip
        task_id = created["result"]["taskId"]
        for _ in range(100):
            _, seen = anyio.run(
                lambda: raw_request(url, "tasks/get", {"taskId": task_id}, name=task_id, capabilities=TASKS)
            )
            if seen["result"]["status"] == "completed":
                break
            time.sleep(0.05)
        assert seen["result"]["status"] == "completed"

    # Restarted: the pending approval, the replay record, the task and the audit are all still there.
    with serving(tmp_path, db, env) as url:
        assert pending_ids(tmp_path, db, env) == [other_id]
        replayed = anyio.run(call, url, first, approval_id)
        assert replayed.meta["io.maitre/replayed"] is True
        assert not replayed.is_error

        decided = maitre(
            "approvals", "approve", other_id, "--stores", str(db), "--approver", "ops-bob",
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert decided.returncode == 0, decided.stderr
        assert f"ops-bob (claimed; os={os_user()} via=cli)" in decided.stdout
        done = anyio.run(call, url, second, other_id)
        assert not done.is_error and done.content[0].text == "refunded 12 on A2001"

        _, kept = anyio.run(
            lambda: raw_request(url, "tasks/get", {"taskId": task_id}, name=task_id, capabilities=TASKS)
        )
        assert kept["result"]["status"] == "completed"
        assert kept["result"]["result"]["content"][0]["text"] == "report for 2026-05"

    assert ledger.read_text().splitlines() == ["refund A1042 30", "report 2026-05", "refund A2001 12"]
    assert sorted(pending_ids(tmp_path, db, env, "used")) == sorted([approval_id, other_id])
    verified = maitre("audit", "verify", "--stores", str(db), cwd=tmp_path, env=env)
    assert verified.returncode == 0 and "audit chain intact" in verified.stdout, verified.stderr
    shown = maitre("audit", "show", "--stores", str(db), "--json", cwd=tmp_path, env=env)
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    executed = [e["approval_id"] for e in entries if e["tool"] == "refund" and e["decision"] == "approved"]
    assert sorted(executed) == sorted([approval_id, other_id])  # each ran once, under its approval
    decisions = {e["approval_id"]: e["detail"] for e in entries if e["decision"] == "approval_decided"}
    assert decisions == {
        approval_id: f"approved by {os_user()} (via=cli)",
        other_id: f"approved by ops-bob (claimed; os={os_user()} via=cli)",
    }


@contextmanager
def jwks_issuer() -> Iterator[tuple[str, Any]]:
    """An issuer's JWKS on 127.0.0.1 (one RSA key, kid k1); yields its URL and the private key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())), "kid": "k1", "use": "sig"}
    body = json.dumps({"keys": [jwk]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json", key
    finally:
        server.shutdown()
        server.server_close()


def test_served_with_the_config_file_tokens_from_a_jwks_name_who_waits_for_approval(tmp_path: Path):
    """Stores and auth from maitre.toml: the caller is the token's subject and tenant (never a flag),
    a request without a token is refused, and the tenant's pending call is decided from the CLI."""
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    ledger = tmp_path / "ledger.txt"
    env = {
        **os.environ,
        "LEDGER": str(ledger),
        "MAITRE_CONFIG": "",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    with jwks_issuer() as (jwks_url, key):
        (tmp_path / "maitre.toml").write_text(
            textwrap.dedent(
                f"""
                stores = "state/maitre.db"

                [auth]
                issuer = "https://id.example.test/"
                audience = "https://tools.example.test/mcp"
                jwks_url = "{jwks_url}"
                algorithms = ["RS256"]
                """
            )
        )
        now = int(time.time())
        claims = {
            "iss": "https://id.example.test/", "aud": "https://tools.example.test/mcp", "sub": "carol",
            "tenant": "acme", "exp": now + 600, "iat": now,
        }  # fmt: skip
        token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})

        async def as_carol(url: str, approval_id: str | None = None) -> Any:
            meta = {APPROVAL_META_KEY: approval_id} if approval_id else None
            async with bearer_client(url, token, mode="2026-07-28") as client:
                return await client.call_tool("refund", {"order_id": "A7777", "amount": 9}, meta=meta)

        with serving(tmp_path, None, env) as url:
            status, _ = anyio.run(lambda: raw_request(url, "tools/list", {}))
            assert status == 401  # no token, no call
            waiting = anyio.run(as_carol, url)
            approval_id = waiting.meta["io.maitre/error"]["details"]["approval_id"]
            listed = maitre("approvals", "list", "--tenant", "acme", "--json", cwd=tmp_path, env=env)
            (request,) = json.loads(listed.stdout)
            assert (request["id"], request["user"], request["tenant"]) == (approval_id, "carol", "acme")
            decided = maitre("approvals", "approve", approval_id, cwd=tmp_path, env=env)
            assert decided.returncode == 0, decided.stderr
            done = anyio.run(as_carol, url, approval_id)
            assert not done.is_error and done.content[0].text == "refunded 9 on A7777"
    assert ledger.read_text().splitlines() == ["refund A7777 9"]
    assert (tmp_path / "state" / "maitre.db").is_file()  # the file's relative path, from its folder


def test_otlp_sends_the_served_calls_spans_to_the_collector(tmp_path: Path):
    """`maitre serve --otlp URL`: the gate's spans reach an OTLP/HTTP endpoint (flushed at shutdown)."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "LEDGER": str(tmp_path / "ledger.txt"),
        "MAITRE_CONFIG": "",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    try:
        otlp = f"http://127.0.0.1:{collector.server_address[1]}"
        with serving(tmp_path, tmp_path / "m.db", env, "--otlp", otlp) as url:
            waiting = anyio.run(call, url, {"order_id": "A1042", "amount": 30})
            assert waiting.is_error
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        collector.shutdown()
        collector.server_close()
    assert received and all(path == "/v1/traces" for path, _ in received)
    assert any(b"execute_tool" in body and b"refund" in body for _, body in received)
