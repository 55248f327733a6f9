"""Test doubles for MCP work: real transports, no mocks.

- `serve_process(target, ...)`: run `python -m maitre.mcp serve TARGET --transport http` as a
  subprocess on a free 127.0.0.1 port and yield its URL (the multi-process tests use two);
  `server_process(command, port)` does the same for any server command.
- `raw_request(url, method, params, ...)`: one hand-built 2026-07-28 POST, for attacks a
  well-behaved SDK client would never send (header/body mismatch, missing `_meta`, forged state).
- `bearer_client(url, token)`: an SDK `Client` that sends `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx

from mcp import Client

from .client import http_transport

__all__ = [
    "MODERN",
    "bearer_client",
    "envelope",
    "free_port",
    "raw_request",
    "serve_process",
    "server_process",
]

MODERN = "2026-07-28"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def server_process(
    command: Sequence[str],
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float = 30.0,
) -> Iterator[str]:
    """Run any MCP server `command` that listens on 127.0.0.1:`port`; yields its `/mcp` URL once
    something accepts connections there, and stops it after (terminate, then kill)."""
    proc = subprocess.Popen(
        list(command),
        env={**os.environ, **(env or {})},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited early: {proc.stderr.read() if proc.stderr else ''}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"server on port {port} did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


@contextlib.contextmanager
def serve_process(
    target: str,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout_s: float = 30.0,
) -> Iterator[str]:
    """Serve `target` over HTTP in a subprocess; yields `http://127.0.0.1:PORT/mcp`; stops it after."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "maitre.mcp",
        "serve",
        target,
        "--transport",
        "http",
        "--port",
        str(port),
    ]
    with server_process([*command, *args], port, env=env, cwd=cwd, timeout_s=timeout_s) as url:
        yield url


def envelope(capabilities: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The per-request `_meta` of a 2026-07-28 request."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
        "io.modelcontextprotocol/clientInfo": {"name": "maitre-raw", "version": "0"},
    }


async def raw_request(
    url: str,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    headers: Mapping[str, str] | None = None,
    meta: bool = True,
    capabilities: Mapping[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """POST one 2026-07-28 JSON-RPC request; returns (HTTP status, the JSON-RPC response)."""
    body = dict(params or {})
    if meta:
        body["_meta"] = envelope(capabilities)
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        sent["Mcp-Name"] = name
    sent.update(headers or {})
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": body}, headers=sent
        )
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        frames = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
        return response.status_code, next(f for f in reversed(frames) if "id" in f)
    return response.status_code, json.loads(text) if text else {}


def bearer_client(url: str, token: str, **options: Any) -> Client:
    """An SDK client for `url` that authenticates with `token`."""
    return Client(http_transport(url, {"Authorization": f"Bearer {token}"}), **options)
