"""tools/call over Streamable HTTP: the maitre-governed server vs a plain `MCPServer`, same tool.

What is measured: requests per second and per-request latency (p50/p99) of 2026-07-28 stateless
`tools/call` POSTs, 8 concurrent keep-alive connections, for `get_order(order_id)` served by

- `MCPServer` (mcp 2.3.0, stateless) in JSON-response mode and in its default (SSE-capable) mode:
  the anchors;
- maitre's `GovernedServer` with the same function in a `Toolbox`, every call through `Gate.call`,
  in the same two modes. Each maitre row is compared with the anchor in the same mode (the same
  transport settings on both sides).

Method (ANCHORS.md): each server is a subprocess pinned to CPU 0, the load generator runs here on
CPU 1; both servers get `gc.freeze()` after start-up; the generator is a minimal asyncio HTTP/1.1
client with pre-built requests, so it is never the bottleneck. Rows alternate in rounds so drift on
a shared machine lands on every row alike; the ratio is what to quote, absolute numbers are only
indicative.

Usage: `python benchmarks/mcp_bench.py [--quick]` (or via `benchmarks/run_all.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["main"]

CONNECTIONS = 8
MODERN = "2026-07-28"


# -- the servers (run as subprocesses of this file) -------------------------------------------------


async def get_order(order_id: str) -> dict[str, str]:
    """Look up one order by its id. Use it for status questions."""
    return {"order_id": order_id, "status": "shipped"}


def _plain_app(json_response: bool) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")
    server.tool()(get_order)
    return server.streamable_http_app(stateless_http=True, json_response=json_response)


def _maitre_app(json_response: bool) -> Any:
    from maitre import Toolbox
    from maitre.mcp.app import MCPApp
    from maitre.mcp.server import GovernedServer
    from maitre.mcp.transports import http_app

    box = Toolbox()
    box.add_tool(get_order)
    return http_app(GovernedServer(MCPApp(box, name="bench")), json_response=json_response)


def _serve(kind: str, port: int) -> None:
    import logging

    import uvicorn

    logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {0})
    json_response = kind.endswith("-json")
    app = _plain_app(json_response) if kind.startswith("plain") else _maitre_app(json_response)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False)
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag
            await asyncio.sleep(0.01)
        gc.collect()
        gc.freeze()
        await task

    asyncio.run(run())


# -- the load generator -----------------------------------------------------------------------------


def _request(port: int, i: int) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {
                "name": "get_order",
                "arguments": {"order_id": "A1042"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: get_order\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = None
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    if length is None:  # chunked (SSE): read chunks until the terminating one
        body = b""
        while True:
            size = int((await reader.readline()).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    else:
        body = await reader.readexactly(length)
    if status != 200 or b'"isError":true' in body or b'"error"' in body:
        raise RuntimeError(f"bad response {status}: {body[:200]!r}")
    return body


@dataclass(kw_only=True)
class Row:
    name: str
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def _load(port: int, seconds: float, row: Row | None) -> None:
    request = _request(port, 1)
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                writer.write(request)
                await _read_response(reader)
                if row is not None:
                    row.latencies_ms.append((time.perf_counter() - start) * 1000)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    if row is not None:
        row.seconds += time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _server(kind: str):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(quick: bool = False) -> None:
    """Print req/s and p50/p99 for each server and the ratio to the plain MCPServer."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {1})
    seconds, rounds = (2.0, 2) if quick else (6.0, 3)
    kinds = {
        "plain-json": "MCPServer (anchor, JSON)",
        "maitre-json": "maitre governed (JSON)",
        "plain": "MCPServer (anchor, default)",
        "maitre": "maitre governed (default)",
    }
    rows = {kind: Row(name=label) for kind, label in kinds.items()}
    with contextlib.ExitStack() as stack:
        ports = {kind: stack.enter_context(_server(kind)) for kind in kinds}
        for port in ports.values():
            asyncio.run(_load(port, 1.0, None))  # warm up
        for _ in range(rounds):
            for kind, port in ports.items():
                asyncio.run(_load(port, seconds, rows[kind]))
    anchors = {"plain-json": rows["plain-json"], "maitre-json": rows["plain-json"]}
    anchors |= {"plain": rows["plain"], "maitre": rows["plain"]}
    print(
        f"tools/call over Streamable HTTP (2026-07-28 stateless), {CONNECTIONS} connections, "
        f"{rounds} x {seconds:g}s per row; server on CPU 0, load on CPU 1"
    )
    print(f"{'server':30} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'req/s vs same-mode anchor':>26}")
    for kind, row in rows.items():
        print(
            f"{row.name:30} {row.rps:9.0f} {row.pct(0.5):8.2f} {row.pct(0.99):8.2f} "
            f"{row.rps / anchors[kind].rps:25.2f}x"
        )
    for mode, kind in (("JSON", "maitre-json"), ("default", "maitre")):
        ratio = rows[kind].rps / anchors[kind].rps
        print(
            f"governed / MCPServer, {mode} mode: {ratio:.2f}x req/s (goal >= 1.0x: {'met' if ratio >= 1 else 'NOT met'})"
        )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        _serve(sys.argv[2], int(sys.argv[3]))
    else:
        parser = argparse.ArgumentParser()
        parser.add_argument("--quick", action="store_true")
        main(quick=parser.parse_args().quick)
