"""The upstream every gateway benchmark puts behind the gateways: an `MCPServer` with one `echo` tool.

Why this server: it is the smallest real MCP server the official SDK (mcp 2.3.0) makes - Streamable
HTTP, stateless, plain JSON answers - so what a benchmark measures through a gateway is the
gateway's cost, not the tool's. It answers 2025-11-25 and 2026-07-28 requests alike (no
`initialize` needed). `echo(text)` returns `"<name>: <text>"`, which lets a load generator check
that each answer is the answer to *its* call (a unique `text` per call comes back). The tools are
annotated read-only (true of them), so a gateway that trusts the upstream's annotations lets them run
without an approval.

The access log is off and logging is at ERROR, so the upstream spends its CPU on calls; the same
upstream process serves every row of a comparison (direct, maitre, ContextForge).

- `python benchmarks/_echo_upstream.py PORT [NAME] [--decoy] [--stateful]`: serve on
  127.0.0.1:PORT until SIGTERM. `--decoy` adds a `fixed` tool that ignores its argument (for the
  load generator's self-test: its answers must be counted as not echoed); `--stateful` makes
  2025-11-25 clients open a session first (to test the generator's session mode).
- `echo_upstream(name)`: the same as a subprocess on a free port; yields `http://127.0.0.1:PORT/mcp`
  once it answers, and stops it (its whole process group) on exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from maitre.mcp.testing import free_port

__all__ = ["build_app", "echo_upstream", "pin", "serve", "stop_group"]

HERE = Path(__file__).resolve().parent


def build_app(name: str, *, decoy: bool = False, stateful: bool = False) -> Any:
    """The Starlette app: `echo` (and with `decoy`, `fixed`) over stateless JSON Streamable HTTP.

    `stateful`: 2025-11-25 clients must open a session first (to test a client's session mode).
    """
    from mcp.server import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer(name, log_level="ERROR")
    # Honest hints: echo reads nothing and changes nothing. A gateway that trusts this upstream's
    # annotations (maitre: `[gateway] trust_annotations`) then runs it without asking for approval.
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def echo(text: str) -> str:
        """Return the text unchanged, prefixed by the server name."""
        return f"{name}: {text}"

    if decoy:

        @server.tool(annotations=read_only)
        def fixed(text: str) -> str:
            """Return the same text whatever it is given (a tool that does not echo)."""
            return f"{name}: fixed"

    return server.streamable_http_app(stateless_http=not stateful, json_response=True)


def serve(port: int, name: str, *, decoy: bool = False, stateful: bool = False) -> None:
    """Serve until SIGTERM/SIGINT, on 127.0.0.1 only."""
    import uvicorn

    logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
    uvicorn.run(
        build_app(name, decoy=decoy, stateful=stateful),
        host="127.0.0.1",
        port=port,
        log_level="error",
        access_log=False,
    )


def stop_group(proc: subprocess.Popen[Any], *, grace_s: float = 10.0) -> None:
    """SIGTERM the process group `proc` leads, then SIGKILL it if anything is left after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    # Children of the leader (if any) may outlive it; the group id is still the leader's pid.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def pin(pid: int, cpus: set[int]) -> None:
    """Pin a freshly started process to `cpus`; what it starts afterwards inherits the mask."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or a CPU this machine lacks
        os.sched_setaffinity(pid, cpus)


@contextlib.contextmanager
def echo_upstream(
    name: str = "up1",
    *,
    port: int | None = None,
    decoy: bool = False,
    stateful: bool = False,
    python: str = sys.executable,
    timeout_s: float = 30.0,
    cpus: set[int] | None = None,
    pids: list[int] | None = None,
) -> Iterator[str]:
    """Run the echo upstream in a subprocess (its own process group); yields its MCP URL.

    `cpus` pins it (e.g. `{0}`, with the load generator on `{1}`), as `taskset` would; its process
    id is appended to `pids` when given (to read its CPU time).
    """
    port = port or free_port()
    args = [python, str(HERE / "_echo_upstream.py"), str(port), name]
    args += [flag for flag, on in (("--decoy", decoy), ("--stateful", stateful)) if on]
    url = f"http://127.0.0.1:{port}/mcp"
    # stderr goes to a file, not a pipe nobody reads during the run (a full pipe would block it).
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True
        )
        try:
            if pids is not None:
                pids.append(proc.pid)
            if cpus:
                pin(proc.pid, cpus)
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    errors.seek(0)
                    err = errors.read().decode(errors="replace").strip()
                    last = err.splitlines()[-1] if err else f"exit {proc.returncode}"
                    raise RuntimeError(f"echo upstream exited early: {last}")
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"echo upstream on port {port} did not start in {timeout_s:g}s")
                time.sleep(0.05)
            yield url
        finally:
            stop_group(proc)


if __name__ == "__main__":
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not 1 <= len(argv) <= 2 or flags - {"--decoy", "--stateful"}:
        sys.exit("usage: _echo_upstream.py PORT [NAME] [--decoy] [--stateful]")
    name = argv[1] if len(argv) > 1 else f"echo-{argv[0]}"
    serve(int(argv[0]), name, decoy="--decoy" in flags, stateful="--stateful" in flags)
