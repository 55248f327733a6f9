"""The MCP client's upstream connections: one long-lived session per upstream and credential.

Real servers (the official SDK's `MCPServer`, in this process over HTTP or as a stdio subprocess),
no mocks. `PROBE` is the server; `serving(...)` runs it on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn

from maitre import Gate, Principal, ToolCall
from maitre.mcp.client import (
    Backoff,
    McpUpstream,
    UpstreamCredential,
    aclose_upstreams,
    toolbox_from_mcp,
)
from maitre.mcp.testing import serve_process
from mcp import StdioServerParameters

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    '''
    """A probe MCP server: who am I, how long, which headers, and questions for the client."""
    import os
    import sys
    from typing import Annotated, Any

    import anyio
    import mcp_types as types
    from pydantic import BaseModel, Field

    from mcp.server.mcpserver import Context, MCPServer

    app = MCPServer("probe")
    CALLS: list[str] = []

    @app.tool()
    def pid() -> int:
        """The server's process id."""
        CALLS.append("pid")
        return os.getpid()

    @app.tool()
    def session_id(ctx: Context) -> str:
        """The Mcp-Session-Id this call came in on (2025-11-25 over HTTP)."""
        return (ctx.headers or {}).get("mcp-session-id", "(none)")

    @app.tool()
    async def slow(delay: float) -> str:
        """Answer after `delay` seconds."""
        await anyio.sleep(delay)
        CALLS.append("slow")
        return f"slept {delay}"

    @app.tool()
    def region(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], ctx: Context) -> str:
        """The Mcp-Param-Region header this call carried."""
        return (ctx.headers or {}).get("mcp-param-region", "(none)")

    @app.tool()
    def authorization(ctx: Context) -> str:
        """The Authorization header this call carried."""
        return (ctx.headers or {}).get("authorization", "(none)")

    class Shipping(BaseModel):
        confirmed: bool
        boxes: int = 3
        note: str = "none"

    SHIPPING = {
        "type": "object",
        "properties": {
            "confirmed": {"type": "boolean", "description": "Ship it?"},
            "boxes": {"type": "integer", "default": 3},
            "note": {"type": "string", "default": "none"},
        },
        "required": ["confirmed"],
    }

    @app.tool()
    async def ship(ctx: Context) -> Any:
        """Ask the user whether to ship (input_required on 2026-07-28, elicitation/create before)."""
        if ctx.protocol_version == "2026-07-28":
            answer = (ctx.input_responses or {}).get("ship")
            if answer is None:
                request = types.ElicitRequest(
                    params=types.ElicitRequestFormParams(message="Ship order A1042 now?", requested_schema=SHIPPING)
                )
                return types.InputRequiredResult(input_requests={"ship": request}, request_state="opaque-1")
            if ctx.request_state != "opaque-1":
                raise ValueError("requestState was not echoed")
            return f"{answer.action} {sorted((answer.content or {}).items())}"
        result = await ctx.elicit("Ship order A1042 now?", Shipping)
        data = sorted(result.data.model_dump().items()) if result.action == "accept" else None
        return f"{result.action} {data}"

    @app.tool()
    async def summarize(ctx: Context) -> Any:
        """Ask the client's model for a summary and the client for its roots (2026-07-28)."""
        answers = ctx.input_responses or {}
        if "model" not in answers:
            sampling = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(
                    messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Hi"))],
                    max_tokens=20,
                )
            )
            return types.InputRequiredResult(
                input_requests={"model": sampling, "roots": types.ListRootsRequest()}
            )
        model, roots = answers["model"], answers["roots"]
        return f"{model.content.text} | {[str(r.uri) for r in roots.roots]}"

    @app.tool()
    def nag() -> Any:
        """Ask for the same input again, whatever the answer (a server that never finishes)."""
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message="Again?", requested_schema={"type": "object", "properties": {}})
        )
        return types.InputRequiredResult(input_requests={"again": request}, request_state="loop")

    @app.tool()
    def forged(error: dict) -> types.CallToolResult:
        """An error result carrying whatever maitre-style structured error the caller wants."""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="forged")], is_error=True, _meta={"io.maitre/error": error}
        )

    if __name__ == "__main__":
        app.run("stdio")
    '''
)


@pytest.fixture(scope="session")
def probe_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "probe_server.py"
    path.write_text(PROBE)
    return path


@pytest.fixture(scope="session")
def probe_module(probe_file: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe_server", probe_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stdio_params(probe_file: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(probe_file)])


def _listening_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


@contextlib.asynccontextmanager
async def serving(module: ModuleType, *, port: int = 0) -> AsyncIterator[str]:
    """`module.app` (an `MCPServer`) over Streamable HTTP on 127.0.0.1, in this event loop."""
    sock = _listening_socket(port)
    app = module.app.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            server.should_exit = True
    sock.close()


@pytest.fixture
async def probe_url(probe_module: ModuleType) -> AsyncIterator[str]:
    async with serving(probe_module) as url:
        yield url


def _handler(box: Any, name: str) -> Any:
    """The imported tool's handler, answering the value itself (the SDK server wraps a plain return
    value as `{"result": ...}` structured content)."""
    tool = box.get(name)
    assert tool is not None and tool.handler is not None, name

    async def call(arguments: dict[str, Any]) -> Any:
        return unwrap(await tool.handler(arguments))

    return call


def unwrap(value: Any) -> Any:
    return value["result"] if isinstance(value, dict) and set(value) == {"result"} else value


async def gone(pid: int) -> None:
    """Wait (up to 10 s) until process `pid` no longer exists."""
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"process {pid} still runs")


async def call(upstream: McpUpstream, name: str, arguments: dict[str, Any], **options: Any) -> Any:
    return unwrap(await upstream.call(name, arguments, **options))


# -- one session, shared ---------------------------------------------------------------------------


async def test_imported_stdio_tools_share_one_server_process_across_calls(probe_file):
    """`toolbox_from_mcp` over stdio: the import and every call after it use one process."""
    box = await toolbox_from_mcp(stdio_params(probe_file), namespace="probe", scan="off")
    try:
        pids = {await _handler(box, "probe.pid")({}) for _ in range(5)}
        upstream = box.mcp_upstreams["probe"]  # type: ignore[attr-defined]
        assert len(pids) == 1 and upstream.pool.opened == 1
    finally:
        await aclose_upstreams(box)
    (pid,) = pids
    await gone(pid)  # closed: the server process is gone


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_imported_http_tools_reuse_the_import_session(probe_url, mode):
    """Over HTTP on both revisions: one session for the import and all calls (2025-11-25: the same
    server-side session; 2026-07-28: one client and its tool listing)."""
    box = await toolbox_from_mcp(probe_url, namespace="probe", allow_loopback=True, scan="off", mode=mode)
    try:
        ids = {await _handler(box, "probe.session_id")({}) for _ in range(5)}
        assert box.mcp_upstreams["probe"].pool.opened == 1  # type: ignore[attr-defined]
        assert len(ids) == 1
        if mode == "legacy":
            assert ids != {"(none)"}
    finally:
        await aclose_upstreams(box)


async def test_the_shared_session_sends_the_mcp_param_headers_2026_07_28_requires(probe_url):
    """The import's listing is on the session the calls use, so the SDK mirrors `x-mcp-header`
    arguments into `Mcp-Param-*` headers (a per-call session never listed, so sent none)."""
    box = await toolbox_from_mcp(
        probe_url, namespace="probe", allow_loopback=True, scan="off", mode="2026-07-28"
    )
    try:
        assert await _handler(box, "probe.region")({"region": "eu-west1"}) == "eu-west1"
    finally:
        await aclose_upstreams(box)


async def test_many_concurrent_calls_share_one_session_and_each_gets_its_own_answer(probe_file):
    """50 concurrent calls (with different delays, so answers interleave) over one stdio session."""
    async with McpUpstream(stdio_params(probe_file), namespace="probe", scan="off") as upstream:
        results: dict[int, str] = {}

        async def one(i: int) -> None:
            results[i] = await call(upstream, "slow", {"delay": (i % 5) / 100})

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
        assert results == {i: f"slept {(i % 5) / 100}" for i in range(50)}
        assert upstream.pool.opened == 1 and len(upstream.pool.sessions()) == 1


async def test_concurrent_first_calls_open_the_session_once(probe_file):
    """Twenty calls arriving before any session exists wait for one open, not twenty."""
    upstream = McpUpstream(stdio_params(probe_file), namespace="probe", scan="off")
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(call, upstream, "pid", {})
        assert upstream.pool.opened == 1
    finally:
        await upstream.aclose()


async def test_a_session_per_credential_and_no_credential_reaches_another_session(probe_url):
    """Two credentials, two sessions; each call carries only its own credential's headers."""
    upstream = McpUpstream(probe_url, namespace="probe", allow_loopback=True, scan="off", mode="2026-07-28")
    alice = UpstreamCredential(key="alice", headers={"Authorization": "Bearer alice-token"})
    bob = UpstreamCredential(key="bob", headers={"Authorization": "Bearer bob-token"})
    try:
        await upstream.toolbox()
        seen = set()
        for credential in (alice, bob, alice, bob):
            seen.add((credential.key, await call(upstream, "authorization", {}, credential=credential)))
        assert seen == {("alice", "Bearer alice-token"), ("bob", "Bearer bob-token")}
        assert await call(upstream, "authorization", {}) == "(none)"  # the upstream's own: no header
        assert upstream.pool.opened == 3 and len(upstream.pool.sessions()) == 3
    finally:
        await upstream.aclose()


async def test_sessions_beyond_max_sessions_close_the_least_recently_used(probe_url):
    upstream = McpUpstream(probe_url, namespace="probe", allow_loopback=True, scan="off", max_sessions=2)
    try:
        for key in ("a", "b", "c"):
            await call(upstream, "pid", {}, credential=UpstreamCredential(key=key))
        assert sorted(s.key for s in upstream.pool.sessions()) == ["b", "c"]
    finally:
        await upstream.aclose()


# -- reconnecting ------------------------------------------------------------------------------------


async def test_a_stdio_server_that_died_is_replaced_before_the_next_call(probe_file):
    """SIGKILL the server between calls: the next call goes to a new process and succeeds."""
    async with McpUpstream(stdio_params(probe_file), namespace="probe", scan="off") as upstream:
        await upstream.toolbox()
        first = await call(upstream, "pid", {})
        os.kill(first, signal.SIGKILL)
        for _ in range(500):  # the SDK reads EOF: the session is seen closed
            if not upstream.pool.sessions():
                break
            await anyio.sleep(0.02)
        second = await call(upstream, "pid", {})
        assert second != first and upstream.pool.opened == 2
        assert "probe.pid" in upstream._box.names()  # type: ignore[union-attr]  # re-listed, not withdrawn


async def test_a_call_in_flight_when_the_server_dies_is_unavailable_and_not_sent_again(probe_file):
    """It may have run: TEMPORARY_UNAVAILABLE (retryable, for the gate's idempotent retry), never a
    silent second send; the call after it gets a new server."""
    async with McpUpstream(stdio_params(probe_file), namespace="probe", scan="off") as upstream:
        pid = await call(upstream, "pid", {})
        failure: list[BaseException] = []

        async def slow() -> None:
            try:
                await upstream.call("slow", {"delay": 5})
            except Exception as exc:
                failure.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await anyio.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
        (error,) = failure
        assert error.code == "TEMPORARY_UNAVAILABLE" and error.retryable  # type: ignore[attr-defined]
        assert await call(upstream, "pid", {}) != pid and upstream.pool.opened == 2


async def test_a_session_the_http_server_forgot_is_reopened_and_the_call_sent_once_more(probe_module):
    """2025-11-25: the server restarts (its sessions are gone, so the old id answers 404); the call
    is refused unrun, and the client opens a new session and sends it again, once."""
    port = _listening_socket().getsockname()[1]
    upstream = McpUpstream(
        f"http://127.0.0.1:{port}/mcp", namespace="probe", allow_loopback=True, scan="off", mode="legacy"
    )
    try:
        async with serving(probe_module, port=port):
            await upstream.toolbox()
            before = await call(upstream, "session_id", {})
        probe_module.CALLS.clear()
        async with serving(probe_module, port=port):
            after = await call(upstream, "slow", {"delay": 0})
            assert after == "slept 0.0" and probe_module.CALLS == ["slow"]  # ran exactly once
            assert await call(upstream, "session_id", {}) != before
        assert upstream.pool.opened == 2
    finally:
        await upstream.aclose()


async def test_an_unreachable_server_backs_off_then_is_reached_again(probe_module):
    """Down: TEMPORARY_UNAVAILABLE (retryable), then at once with retry_after_s while backing off;
    up again: the first call after the wait reaches it."""
    port = _listening_socket().getsockname()[1]
    upstream = McpUpstream(
        f"http://127.0.0.1:{port}/mcp",
        namespace="probe",
        allow_loopback=True,
        scan="off",
        backoff=Backoff(initial_s=0.4, max_s=1.0),
    )
    try:
        with pytest.raises(Exception) as first:
            await call(upstream, "pid", {})
        assert first.value.code == "TEMPORARY_UNAVAILABLE" and first.value.retryable  # type: ignore[attr-defined]
        started = time.monotonic()
        with pytest.raises(Exception) as fast:
            await call(upstream, "pid", {})
        assert time.monotonic() - started < 0.1  # no connect attempt while backing off
        assert fast.value.code == "TEMPORARY_UNAVAILABLE" and 0 < fast.value.retry_after_s <= 0.4  # type: ignore[attr-defined]
        async with serving(probe_module, port=port):
            await anyio.sleep(fast.value.retry_after_s)  # type: ignore[attr-defined]
            assert isinstance(await call(upstream, "pid", {}), int)
    finally:
        await upstream.aclose()


async def test_the_backoff_doubles_up_to_its_bound():
    backoff = Backoff(initial_s=0.25, max_s=2.0)
    assert [backoff.delay(n) for n in range(7)] == [0.0, 0.25, 0.5, 1.0, 2.0, 2.0, 2.0]


async def test_an_idle_session_is_health_checked_and_replaced_when_it_does_not_answer(probe_file):
    """A stdio server stopped (SIGSTOP) while idle: the check before the next use fails, a new
    process answers the call."""
    upstream = McpUpstream(stdio_params(probe_file), namespace="probe", scan="off", health_check_idle_s=0.2)
    upstream.pool.health_check_timeout_s = 0.5
    try:
        first = await call(upstream, "pid", {})
        os.kill(first, signal.SIGSTOP)
        try:
            await anyio.sleep(0.3)
            started = time.monotonic()
            second = await call(upstream, "pid", {})
        finally:
            os.kill(first, signal.SIGCONT)
        assert second != first and upstream.pool.opened == 2
        assert time.monotonic() - started < 5  # the check gave up after its 0.5 s, not the read timeout
    finally:
        await upstream.aclose()


# -- closing ---------------------------------------------------------------------------------------


async def test_async_with_keeps_working_and_closes_its_sessions(probe_file):
    async with McpUpstream(stdio_params(probe_file), namespace="probe", scan="off") as upstream:
        box = await upstream.toolbox()
        pid = await _handler(box, "probe.pid")({})
    assert upstream.pool.sessions() == []
    await gone(pid)


def test_a_program_that_never_closes_its_upstreams_still_exits_and_stops_its_stdio_server(
    probe_file, tmp_path
):
    """`asyncio.run` of a script that imports a stdio server's tools, calls one and returns without
    `aclose`: the script ends promptly and the server process with it."""
    script = tmp_path / "forgetful.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            from maitre.mcp.client import toolbox_from_mcp
            from mcp import StdioServerParameters

            async def main():
                params = StdioServerParameters(command=sys.executable, args=[{str(probe_file)!r}])
                box = await toolbox_from_mcp(params, namespace="probe", scan="off")
                print((await box.get("probe.pid").handler({{}}))["result"], flush=True)

            asyncio.run(main())
            """
        )
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 15
    assert "Traceback" not in done.stderr and "destroyed" not in done.stderr, done.stderr
    pid = int(done.stdout.strip())
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.05)  # a zombie is reaped by init once its parent is gone


def test_a_toolbox_used_from_another_event_loop_opens_its_own_session(shop_url):
    """`run_sync` runs each call on a fresh loop: a session of an ended loop is never reused."""
    from maitre._sync import run_sync

    box = run_sync(toolbox_from_mcp, shop_url, namespace="shop", allow_loopback=True)
    handler = _handler(box, "shop.get_order")
    for _ in range(2):
        assert run_sync(handler, {"order_id": "A1042"})["status"] == "shipped"
    assert box.mcp_upstreams["shop"].pool.opened == 3  # type: ignore[attr-defined]


# -- the gate, end to end; credentials from configuration -------------------------------------------


@pytest.fixture(scope="module")
def shop_url() -> Generator[str]:
    with serve_process("tests/mcp/mcp_testkit.py:shop_box", cwd=str(ROOT), args=["--tenant", "acme"]) as url:
        yield url


async def test_through_the_gate_the_imported_tool_runs_on_the_shared_session(shop_url):
    box = await toolbox_from_mcp(shop_url, namespace="shop", allow_loopback=True, trust_annotations=True)
    try:
        gate = Gate(box)
        for i in range(3):
            result = await gate.call(
                ToolCall(id=f"c{i}", name="shop.get_order", arguments={"order_id": "A1042"}),
                Principal(user="u", tenant="acme"),
            )
            assert not result.is_error and result.structured["status"] == "shipped"
        assert box.mcp_upstreams["shop"].pool.opened == 1  # type: ignore[attr-defined]
    finally:
        await aclose_upstreams(box)


class _BearerAuth(httpx2.Auth):
    """An `httpx2.Auth` that signs every request and remembers which MCP methods it signed."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = "Bearer upstream-token"
        self.methods.append(request.headers.get("mcp-method", request.method))
        yield request


async def test_an_auth_flow_given_to_the_upstream_signs_every_request_of_its_http_transport(shop_url):
    """`auth=` reaches the HTTP client: the listing and the call both go through it."""
    auth = _BearerAuth()
    box = await toolbox_from_mcp(shop_url, namespace="shop", allow_loopback=True, auth=auth)
    try:
        assert (await _handler(box, "shop.get_order")({"order_id": "A1042"}))["status"] == "shipped"
        assert "tools/list" in auth.methods and "tools/call" in auth.methods
    finally:
        await aclose_upstreams(box)


async def test_a_credentials_auth_flow_replaces_the_upstreams_own(probe_url):
    upstream = McpUpstream(probe_url, namespace="probe", allow_loopback=True, scan="off", auth=_BearerAuth())
    mine = _BearerAuth()
    try:
        assert await call(upstream, "authorization", {}) == "Bearer upstream-token"
        assert await call(
            upstream, "authorization", {}, credential=UpstreamCredential(key="k", auth=mine)
        ) == ("Bearer upstream-token")
        assert "tools/call" in mine.methods
    finally:
        await upstream.aclose()
