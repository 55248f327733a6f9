"""maitre's MCP client: one call on the shared upstream session vs a fresh session per call.

What is measured: the latency of one imported tool's call (`McpUpstream.call("get_order", ...)`,
the handler a `Toolbox.from_mcp` tool runs) against an `MCPServer` (mcp 2.3.0) in a subprocess,
rows side by side in one run:

- **shared**: the long-lived session the import opened (`maitre.mcp.upstream_session`): the anchor;
- **fresh**: `share_sessions=False`, a session opened and closed for every call, with the tool
  listing a new session needs so the `Mcp-Param-*` headers are right (what a per-call maitre client
  must do to be correct);
- **sdk per call**: the SDK's `async with Client(...)` + `call_tool` and nothing else, the way
  `toolbox_from_mcp` called before sessions were kept (no listing: no `Mcp-Param-*` headers).

Over Streamable HTTP at 2026-07-28 (stateless: a "session" is the HTTP client, the discover result
and the listing) and 2025-11-25 (initialize, a session id, a DELETE at the end), and over stdio
(a fresh session is a new server process). The ratio fresh / shared is the one to quote.

Usage: `python benchmarks/mcp_client.py [--quick]` (or via `benchmarks/run_all.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from _harness import acompare, print_table

__all__ = ["main"]


def _server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def get_order(order_id: str) -> dict[str, str]:
        """Look up one order by its id. Use it for status questions."""
        return {"order_id": order_id, "status": "shipped"}

    return server


def _serve_http(port: int) -> None:
    import logging

    import uvicorn

    logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
    app = _server().streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


@contextlib.contextmanager
def _http_server() -> Any:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--serve-http", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the benchmark's MCP server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _rows(target: Any, mode: str) -> tuple[Any, dict[str, Callable[[], Awaitable[Any]]]]:
    from maitre.mcp.client import McpUpstream, http_transport
    from mcp import Client

    options: dict[str, Any] = {"namespace": "bench", "allow_loopback": True, "scan": "off", "mode": mode}
    shared = McpUpstream(target, **options)
    fresh = McpUpstream(target, share_sessions=False, **options)
    arguments = {"order_id": "A1042"}

    async def sdk_per_call() -> Any:
        server = http_transport(target, {}) if isinstance(target, str) else target
        async with Client(server, mode=mode, cache=None) as client:
            return await client.call_tool("get_order", arguments)

    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "shared session": lambda: shared.call("get_order", arguments),
        "fresh session": lambda: fresh.call("get_order", arguments),
        "sdk session per call": sdk_per_call,
    }
    return (shared, fresh), cases


@contextlib.asynccontextmanager
async def _imported(upstreams: tuple[Any, ...]) -> AsyncIterator[None]:
    try:
        for upstream in upstreams:
            await upstream.toolbox()
        yield
    finally:
        for upstream in upstreams:
            await upstream.aclose()


async def _run(quick: bool) -> None:
    from mcp import StdioServerParameters

    n = 40 if quick else 300
    ratios: list[str] = []
    with _http_server() as url:
        for mode, label in (
            ("2026-07-28", "Streamable HTTP, 2026-07-28"),
            ("legacy", "Streamable HTTP, 2025-11-25"),
        ):
            upstreams, cases = _rows(url, mode)
            async with _imported(upstreams):
                rows = await acompare(cases, n=n, warmup=10, rounds=4, batch=1)
            print_table(f"one imported tool call: {label} (µs per call)", rows, anchor="shared session")
            ratios.append(f"{label}: fresh / shared = {rows[1].p50 / rows[0].p50:.1f}x at p50")
    stdio = StdioServerParameters(command=sys.executable, args=[__file__, "--serve-stdio"])
    upstreams, cases = _rows(stdio, "auto")
    cases.pop("sdk session per call")  # a process per call is the "fresh" row already
    async with _imported(upstreams):
        rows = await acompare(cases, n=6 if quick else 30, warmup=2, rounds=2, batch=1)
    print_table("one imported tool call: stdio (µs per call)", rows, anchor="shared session")
    ratios.append(f"stdio: fresh / shared = {rows[1].p50 / rows[0].p50:.1f}x at p50")
    print("\n" + "\n".join(ratios))


def main(quick: bool = False) -> None:
    """Print the shared-vs-fresh tables and the fresh / shared ratios."""
    quick = quick or os.environ.get("MAITRE_BENCH_QUICK") == "1"
    anyio.run(_run, quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--serve-http", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-stdio", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_http is not None:
        _serve_http(options.serve_http)
    elif options.serve_stdio:
        _server().run("stdio")
    else:
        main(quick=options.quick)
