"""`maitre gateway`: two real upstreams (a stdio server it starts, an HTTP server of ours on
127.0.0.1) behind one governed endpoint, run as a user runs it (`python -m maitre.cli gateway`),
reached by the official SDK client with a JWT.

The ledger (stdio) is untrusted: its tools are destructive and high risk whatever they claim, so
each call waits for a person. The web server's annotations are trusted (`[gateway]
trust_annotations`), so its read runs at once. The web server is down when the gateway starts.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import mcp_types as types
import uvicorn
from mcp.client.subscriptions import ToolsListChanged
from typer.testing import CliRunner

from maitre import Gate, Principal, Toolbox
from maitre.cli import app as cli_app
from maitre.mcp.client import McpUpstream
from maitre.mcp.pinning import Lockfile
from maitre.mcp.server import APPROVAL_META_KEY
from maitre.mcp.testing import bearer_client, free_port
from maitre.stores import open_stores

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "gateway_upstream.py"
sys.path.insert(0, str(HERE))

from gateway_upstream import gateway_process, web_app  # noqa: E402

SECRET = "g" * 40
ISSUER = "https://idp.test"
AUDIENCE = "https://gateway.test"


def token(user: str = "alice", tenant: str = "acme") -> str:
    claims = {"sub": user, "tenant": tenant, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 300}
    return jwt.encode(claims, SECRET, algorithm="HS256")


@contextmanager
def web_server(port: int, seen: list[dict[str, str]], *, unpinned: bool = False) -> Iterator[str]:
    """The web upstream on 127.0.0.1:`port` in a thread of its own, until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(
        web_app(seen, unpinned=unpinned), log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the web upstream did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


async def pin(lockfile: Path, namespace: str, target: str) -> None:
    upstream = McpUpstream(target, namespace=namespace, allow_loopback=True)
    try:
        offered = await upstream.definitions()
    finally:
        await upstream.aclose()
    lock = Lockfile.load(lockfile)
    lock.pin(namespace, offered, source=target)
    lock.save()


def gateway(config: Path) -> AbstractContextManager[tuple[str, list[str]]]:
    """`maitre gateway --config FILE` until the block ends; yields its URL and its stderr lines."""
    return gateway_process(config)


async def tools(url: str, mode: str = "2026-07-28") -> list[str]:
    async with bearer_client(url, token(), mode=mode) as client:
        return sorted(t.name for t in (await client.list_tools()).tools)


async def call(url: str, name: str, arguments: dict[str, Any], approval_id: str | None = None) -> Any:
    meta = {APPROVAL_META_KEY: approval_id} if approval_id else None
    async with bearer_client(url, token(), mode="2026-07-28") as client:
        return await client.call_tool(name, arguments, meta=meta)


async def comes_up(url: str, start: Callable[[], object]) -> list[str]:
    """Listen for tool-list changes in both eras, `start()` the upstream, and list the tools once
    both are told: a 2026-07-28 `subscriptions/listen` stream and a 2025-11-25 session."""
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async with (
        bearer_client(url, token(), mode="2026-07-28") as client,
        bearer_client(url, token(), mode="legacy", message_handler=on_message) as legacy,
        client.listen(tools_list_changed=True) as changes,
    ):
        await legacy.list_tools()
        await anyio.sleep(0.3)  # the legacy session's standalone stream is open
        start()
        with anyio.fail_after(15):
            async for event in changes:
                if isinstance(event, ToolsListChanged):
                    break
            await told.wait()
        return sorted(t.name for t in (await client.list_tools()).tools)


async def content(url: str, mode: str) -> tuple[list[str], str, list[str], str]:
    """The gateway's resources, the text of web's `about`, its prompts and web's `define`."""
    async with bearer_client(url, token(), mode=mode) as client:
        uris = sorted(r.uri for r in (await client.list_resources()).resources)
        about = (await client.read_resource("maitre-upstream://web/web://about")).contents[0]
        prompts = sorted(p.name for p in (await client.list_prompts()).prompts)
        define = (await client.get_prompt("web.define", {"word": "gate"})).messages[0].content
        assert isinstance(about, types.TextResourceContents) and isinstance(define, types.TextContent)
        return uris, about.text, prompts, define.text


def health(url: str) -> dict[str, Any]:
    answer = httpx.get(url.rsplit("/", 1)[0] + "/healthz")
    assert answer.status_code == 200, answer.text
    assert "127.0.0.1" not in answer.text and "web" not in answer.text
    return dict(answer.json())


def error(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    return dict(result.meta["io.maitre/error"])


async def approve(stores_url: str, approval_id: str) -> None:
    stores = await open_stores(stores_url)
    try:
        await Gate(Toolbox(), stores=stores).approvals.approve(
            approval_id, Principal(user="ops", tenant="acme")
        )
    finally:
        await stores.close()


def test_two_upstreams_behind_one_governed_endpoint(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    lockfile = tmp_path / "maitre.mcp.lock.json"
    db = tmp_path / "maitre.db"
    (tmp_path / "jwt.key").write_text(SECRET)
    web_port = free_port()
    seen: list[dict[str, str]] = []
    ledger_command = [sys.executable, str(SCRIPT), "ledger", str(ledger)]

    with web_server(web_port, seen) as web_url:
        anyio.run(pin, lockfile, "web", web_url)
    anyio.run(pin, lockfile, "ledger", " ".join(ledger_command))
    seen.clear()

    config = tmp_path / "maitre.toml"
    config.write_text(
        f"""
[stores]
url = "{db}"

[auth]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
key_file = "jwt.key"

[mcp]
lockfile = "{lockfile.name}"

[mcp.upstreams.ledger]
command = {json.dumps(ledger_command)}

[mcp.upstreams.web]
url = "{web_url}"
allow_loopback = true
headers = {{ X-Upstream-Key = "web-own-key" }}

[gateway]
port = {free_port()}
trust_annotations = ["web"]
retry_max_s = 1.0
"""
    )
    with gateway(config) as (url, log):
        # The web server is down: the gateway serves the ledger anyway and says why web is missing.
        assert anyio.run(tools, url) == ["ledger.balance", "ledger.refund"]
        assert any("upstream web is unavailable" in line for line in log), log

        # An unauthenticated caller is refused before any tool; the health check needs no token
        # and says one of two upstreams is down, naming none.
        assert httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401
        assert health(url) == {"status": "degraded", "upstreams": {"up": 1, "down": 1, "connecting": 0}}

        with ExitStack() as web:
            # It comes up: a client listening (2026-07-28) is told the tool list changed. It now
            # also offers a tool nobody pinned: that one stays out.
            up = lambda: web.enter_context(web_server(web_port, seen, unpinned=True))  # noqa: E731
            listed = anyio.run(comes_up, url, up)
            assert listed == ["ledger.balance", "ledger.refund", "web.lookup"]
            assert error(anyio.run(call, url, "web.purge", {}))["code"] == "UNKNOWN_TOOL"
            assert anyio.run(tools, url, "legacy") == listed  # a 2025-11-25 client sees the same
            assert health(url)["status"] == "ok"

            # Its resources and prompts are served too, namespaced and fenced, in both eras; each
            # read is logged with who read it.
            for mode in ("2026-07-28", "legacy"):
                uris, about, prompts, define = anyio.run(content, url, mode)
                assert uris == ["maitre-upstream://web/web://about"] and prompts == ["web.define"]
                assert (
                    about.startswith('<untrusted-data source="mcp:web:web://about"')
                    and "a dictionary" in about
                )
                assert (
                    define.startswith('<untrusted-data source="mcp:web:define"') and "Define gate" in define
                )
            assert any(
                "read resource web://about from upstream web for acme/alice" in line for line in log
            ), log

            # A trusted read runs at once, upstream.
            looked = anyio.run(call, url, "web.lookup", {"query": "gate"})
            assert not looked.is_error and looked.structured_content == {"result": "definition of gate"}
            assert looked.content[0].text.startswith('<untrusted-data source="mcp:web:web.lookup"')

            # The ledger is untrusted: a high-risk write waits for a person, and so does a read it
            # merely claims (readOnlyHint) - nothing reached the upstream yet.
            refund = {"order_id": "A1042", "amount": 30}
            waiting = error(anyio.run(call, url, "ledger.refund", refund))
            assert waiting["code"] == "APPROVAL_REQUIRED"
            assert error(anyio.run(call, url, "ledger.balance", {}))["code"] == "APPROVAL_REQUIRED"
            assert not ledger.exists()

            # An argument the pinned schema does not declare never reaches the upstream.
            extra = anyio.run(call, url, "ledger.refund", {**refund, "note": "x"})
            assert error(extra)["code"] == "INVALID_ARGUMENTS"

            approval_id = waiting["details"]["approval_id"]
            anyio.run(approve, str(db), approval_id)
            done = anyio.run(call, url, "ledger.refund", refund, approval_id)
            assert not done.is_error and done.structured_content == {"result": "refunded 30 on A1042"}
            again = anyio.run(call, url, "ledger.refund", refund, approval_id)
            assert again.meta["io.maitre/replayed"] is True
            assert ledger.read_text().splitlines() == ["refund A1042 30"]  # executed upstream once

        # The web server went away mid-run: only its own tool fails, the ledger keeps working.
        gone = error(anyio.run(call, url, "web.lookup", {"query": "gate"}))
        assert gone["code"] == "TEMPORARY_UNAVAILABLE"
        second = {"order_id": "A2001", "amount": 12}
        pending = error(anyio.run(call, url, "ledger.refund", second))["details"]["approval_id"]
        anyio.run(approve, str(db), pending)
        assert not anyio.run(call, url, "ledger.refund", second, pending).is_error
        assert ledger.read_text().splitlines() == ["refund A1042 30", "refund A2001 12"]

    # The web upstream saw its own configured header on every request, and never a caller's token.
    assert seen
    assert all(h.get("x-upstream-key") == "web-own-key" for h in seen if h)
    assert not any("authorization" in h for h in seen), [h.get("authorization") for h in seen]


runner = CliRunner()


def test_the_gateway_refuses_to_start_without_upstreams_or_pins(tmp_path: Path) -> None:
    config = tmp_path / "maitre.toml"
    config.write_text("[gateway]\nport = 8123\n")
    empty = runner.invoke(cli_app, ["gateway", "--config", str(config)])
    assert empty.exit_code == 2 and "no upstreams" in empty.output

    config.write_text('[mcp.upstreams.web]\nurl = "https://mcp.example.com/mcp"\n')
    unpinned = runner.invoke(cli_app, ["gateway", "--config", str(config)])
    assert unpinned.exit_code == 2 and "maitre mcp pin --namespace" in unpinned.output

    config.write_text('[mcp.upstreams.web]\nurl = "https://mcp.example.com/mcp"\n[gateway]\npath = "mcp"\n')
    bad = runner.invoke(cli_app, ["gateway", "--config", str(config)])
    assert bad.exit_code == 2 and "path must start with '/'" in bad.output

    Lockfile(tmp_path / "maitre.mcp.lock.json").save()
    config.write_text(
        '[mcp.upstreams.web]\nurl = "https://mcp.example.com/mcp"\n[gateway]\ntrust_annotations = ["wbe"]\n'
    )
    typo = runner.invoke(cli_app, ["gateway", "--config", str(config)])
    assert typo.exit_code == 2 and "trust_annotations names wbe" in typo.output

    missing = runner.invoke(cli_app, ["gateway", "--config", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2 and "no such file" in missing.output
