"""IBM ContextForge (`mcp-contextforge-gateway` 1.1.0) started in front of an upstream, as a benchmark anchor.

    with contextforge("http://127.0.0.1:18101/mcp", workers=2) as cf:
        run_load(Target(url=cf.url, tool=cf.tool_name, token=cf.token))

What it does, following ../shared/recipes/gateway-benchmark.md (verified there by hand):
- installs ContextForge once into a cached venv, `.bench/contextforge-venv` (git-ignored), with a
  Python 3.12/3.13 (1.1.0 needs >=3.12,<3.14; the machine's python3 is 3.11): pyenv's 3.12.1,
  else another pyenv 3.12/3.13, else `uv python find`, else `python3.12`/`python3.13` on PATH;
- starts it on a free 127.0.0.1 port with the requested uvicorn worker count, offline: SQLite in a
  temporary directory, no Redis (`CACHE_TYPE=database`), generated secrets and passwords (it refuses
  placeholders and weak ones), `SSRF_ALLOW_LOCALHOST=true` (to register a 127.0.0.1 upstream),
  `RATE_LIMITING_ENABLED=false` (its default 100 req/min limit with a 15-minute lockout would end
  any benchmark), `LOG_LEVEL=ERROR` and no access log (the maitre side logs no line per call
  either), UI and admin API off. The environment is built from scratch, not inherited, so a
  stray `DATABASE_URL` or `REDIS_URL` of the caller's cannot leak in; its working directory is
  the temporary one, so no `.env` file is read;
- waits for `/health`, mints an admin token with its own CLI, registers the upstream (`/gateways`),
  finds the imported tool (renamed `<gateway>-<tool>`, e.g. `up1-echo`), creates a virtual server
  exposing it (`/servers`) and checks one `tools/call` through it the way the load generator
  judges calls, before handing it out;
- on exit stops the whole process group (uvicorn's supervisor, its workers and their
  `multiprocessing` helpers; the gateway is started directly, not through a shell, so the PID is
  the gateway's - the recipe's gotcha 7), and checks nothing listens on the port any more.

Anything that keeps ContextForge from running (no 3.12, install failure, a start-up error, the
check call failing) raises `ContextForgeUnavailable` with a one-line reason: a benchmark prints it
as a skip instead of a traceback. This module runs only under `make bench`.

The context manager is synchronous (it blocks for the ~10-20 s start-up); from async code, enter it
in a thread or before the event loop starts.

Self-test / one-off measurement (echo upstream direct vs through ContextForge, same load
generator, 8 clients; `--wrk` adds wrk rows; 2026-07-28 `tools/call` works through it too):
`python benchmarks/contextforge.py [--workers N] [--seconds S] [--wrk] [--protocol 2026-07-28]`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: `import _loadgen`

from _echo_upstream import pin
from _loadgen import Target, call_once

from maitre.mcp.testing import free_port

__all__ = [
    "VERSION",
    "ContextForge",
    "ContextForgeUnavailable",
    "contextforge",
    "ensure_installed",
    "find_python",
]

VERSION = "1.1.0"
PACKAGE = "mcp-contextforge-gateway"
REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".bench" / "contextforge-venv"
ADMIN_EMAIL = "admin@example.com"
INSTALL_TIMEOUT_S = 900.0


class ContextForgeUnavailable(Exception):
    """ContextForge cannot be run here; the message is one line saying why (print it as a skip)."""


@dataclass(frozen=True, kw_only=True)
class ContextForge:
    """A running ContextForge with one upstream registered and one virtual server over its tool."""

    url: str
    """The virtual server's MCP endpoint: `http://127.0.0.1:PORT/servers/<id>/mcp`."""
    token: str
    """Admin bearer token (every MCP call needs `Authorization: Bearer <token>`)."""
    tool_name: str
    """The upstream tool as ContextForge exposes it, e.g. `up1-echo`."""
    server_id: str
    base_url: str
    """`http://127.0.0.1:PORT` (its REST API: /health, /tools, /gateways, /servers)."""
    port: int
    pid: int
    workers: int
    startup_s: float
    """Launch to healthy `/health`."""
    log_path: Path
    """Its stdout/stderr (removed on exit with the temporary directory)."""


# -- finding a Python and installing ----------------------------------------------------------------


def _version_of(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def _usable(python: str) -> bool:
    version = _version_of(python)
    return version is not None and (3, 12) <= version < (3, 14)


def _pyenv_root() -> Path | None:
    if os.environ.get("PYENV_ROOT"):
        return Path(os.environ["PYENV_ROOT"])
    if shutil.which("pyenv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30, check=True)
            if out.stdout.strip():
                return Path(out.stdout.strip())
    default = Path.home() / ".pyenv"
    return default if default.is_dir() else None


def find_python() -> str | None:
    """A Python 3.12/3.13 interpreter for ContextForge, or None."""
    candidates: list[str] = []
    root = _pyenv_root()
    if root is not None:
        versions = root / "versions"
        candidates.append(str(versions / "3.12.1" / "bin" / "python3"))
        if versions.is_dir():
            for prefix in ("3.12.", "3.13."):
                candidates += sorted(
                    (str(p / "bin" / "python3") for p in versions.glob(f"{prefix}*")), reverse=True
                )
    uv = shutil.which("uv")
    if uv:
        for version in ("3.12", "3.13"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                out = subprocess.run(
                    [uv, "python", "find", version], capture_output=True, text=True, timeout=30, check=True
                )
                candidates.append(out.stdout.strip())
    candidates += [p for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and _usable(candidate):
            return candidate
    return None


def _installed_version(venv: Path) -> str | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; print(m.version({PACKAGE!r}))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return out.stdout.strip()
    return None


def _last_line(text: str, *, prefer: str = "ERROR") -> str:
    """The line of a tool's output that says what went wrong (the last `prefer` line, else the last)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    chosen = [line for line in lines if prefer in line and "is ignored" not in line]
    return (chosen or lines or ["(no output)"])[-1][:300]


def ensure_installed(venv: Path = VENV, *, python: str | None = None) -> Path:
    """The venv's Python with ContextForge `VERSION` in it, installing it once (raises `ContextForgeUnavailable`)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two benchmarks starting at once install once
        if _installed_version(venv) == VERSION:
            return venv / "bin" / "python"
        if not (venv / "bin" / "python").exists():
            interpreter = python or find_python()
            if interpreter is None:
                raise ContextForgeUnavailable(
                    f"no Python 3.12/3.13 found (pyenv, uv, python3.12 on PATH); {PACKAGE} {VERSION} needs one"
                )
            version = _version_of(interpreter)
            if version is None or not (3, 12) <= version < (3, 14):
                found = "not runnable" if version is None else f"Python {version[0]}.{version[1]}"
                raise ContextForgeUnavailable(
                    f"{interpreter} is {found}; {PACKAGE} {VERSION} needs 3.12 or 3.13"
                )
            made = subprocess.run(
                [interpreter, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300
            )
            if made.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                raise ContextForgeUnavailable(f"creating {venv} failed: {_last_line(made.stderr)}")
        print(f"installing {PACKAGE}=={VERSION} into {venv} (once) ...", file=sys.stderr)
        try:
            pip = subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    *[f"{PACKAGE}=={VERSION}"],
                ],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ContextForgeUnavailable(
                f"pip install {PACKAGE}=={VERSION} took over {INSTALL_TIMEOUT_S:g}s"
            ) from None
        if pip.returncode != 0 or _installed_version(venv) != VERSION:
            raise ContextForgeUnavailable(
                f"pip install {PACKAGE}=={VERSION} failed: {_last_line(pip.stderr + pip.stdout)}"
            )
        return venv / "bin" / "python"


# -- running ----------------------------------------------------------------------------------------


def _settings(workdir: Path, port: int) -> dict[str, str]:
    """ContextForge's environment: offline, SQLite, no rate limits, strong generated secrets."""

    def password() -> str:
        return "Cf-" + secrets.token_hex(12)  # >= 12 chars, upper/lower/digit/symbol, never a known-weak one

    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "LANG": "C.UTF-8",
        "TMPDIR": str(workdir),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "DATABASE_URL": f"sqlite:///{workdir}/mcp.db",  # + the absolute path's own slash = 4 slashes
        "CACHE_TYPE": "database",
        "JWT_SECRET_KEY": secrets.token_hex(32),
        "AUTH_ENCRYPTION_SECRET": secrets.token_hex(32),
        "PLATFORM_ADMIN_EMAIL": ADMIN_EMAIL,
        "PLATFORM_ADMIN_PASSWORD": password(),
        "DEFAULT_USER_PASSWORD": password(),
        "BASIC_AUTH_PASSWORD": password(),
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "false",
        "SSRF_ALLOW_LOCALHOST": "true",
        "RATE_LIMITING_ENABLED": "false",
        "LOG_LEVEL": "ERROR",
    }


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def _stop(proc: subprocess.Popen[Any], port: int) -> None:
    """SIGTERM the gateway's process group, SIGKILL what is left; then the port must be free."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # workers or helpers that outlived the supervisor
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for _ in range(40):
        if not _listening(port):
            return
        time.sleep(0.25)
    print(f"contextforge: something still listens on 127.0.0.1:{port} after stopping it", file=sys.stderr)


def _wait_healthy(proc: subprocess.Popen[Any], base_url: str, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as http:
        while True:
            if proc.poll() is not None:
                raise ContextForgeUnavailable(
                    f"exited during start-up (exit {proc.returncode}): {_last_line(log_path.read_text(errors='replace'))}"
                )
            with contextlib.suppress(httpx.HTTPError):
                response = http.get(f"{base_url}/health")
                if response.status_code == 200 and response.json().get("status") == "healthy":
                    return
            if time.monotonic() > deadline:
                raise ContextForgeUnavailable(f"/health not healthy after {timeout_s:g}s")
            time.sleep(0.25)


def _mint_token(python: Path, env: dict[str, str], workdir: Path) -> str:
    """An admin JWT from ContextForge's own CLI (it needs the same secrets in its environment)."""
    args = [str(python), "-m", "mcpgateway.utils.create_jwt_token", "--username", ADMIN_EMAIL]
    args += ["--admin", "--full-name", "Admin", "--exp", "600"]
    try:
        out = subprocess.run(args, env=env, cwd=workdir, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise ContextForgeUnavailable("minting the admin token timed out") from None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    token = lines[-1] if lines else ""
    if out.returncode != 0 or token.count(".") != 2:
        raise ContextForgeUnavailable(
            f"minting the admin token failed: {_last_line(out.stderr + out.stdout)}"
        )
    return token


def _api(http: httpx.Client, method: str, path: str, body: Any = None) -> Any:
    try:
        response = http.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise ContextForgeUnavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from None
    if response.status_code not in (200, 201):
        raise ContextForgeUnavailable(f"{method} {path}: HTTP {response.status_code} {response.text[:200]!r}")
    return response.json()


def _register(base_url: str, token: str, upstream_url: str, gateway_name: str, tool: str) -> tuple[str, str]:
    """Register the upstream, find its imported `tool`, make a virtual server of it: (server id, tool name)."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=60.0) as http:
        gateway = _api(
            http,
            "POST",
            "/gateways",
            {"name": gateway_name, "url": upstream_url, "transport": "STREAMABLEHTTP"},
        )
        if not gateway.get("reachable", True):
            raise ContextForgeUnavailable(
                f"upstream {upstream_url} registered but not reachable from ContextForge"
            )
        listed = _api(http, "GET", "/tools")
        if isinstance(listed, dict):  # a page ({"items": [...]}) or a plain list, depending on options
            listed = listed.get("items") or listed.get("tools") or []
        tools: list[Any] = listed if isinstance(listed, list) else []
        wanted = [
            t
            for t in tools
            if isinstance(t, dict)
            and (t.get("originalName") or t.get("original_name")) == tool
            and t.get("gatewayId", t.get("gateway_id", gateway.get("id"))) == gateway.get("id")
        ]
        if not wanted:
            names = [t.get("name") for t in tools if isinstance(t, dict)]
            raise ContextForgeUnavailable(f"tool {tool!r} of {gateway_name!r} not imported (tools: {names})")
        found = wanted[0]
        server = _api(
            http,
            "POST",
            "/servers",
            {
                "server": {
                    "name": f"bench-{gateway_name}",
                    "description": f"benchmark: {gateway_name}'s {tool}",
                    "associated_tools": [found["id"]],
                }
            },
        )
        return str(server["id"]), str(found["name"])


@contextlib.contextmanager
def contextforge(
    upstream_url: str,
    *,
    workers: int = 1,
    tool: str = "echo",
    gateway_name: str = "up1",
    venv: Path = VENV,
    python: str | None = None,
    start_timeout_s: float = 180.0,
    cpus: set[int] | None = None,
) -> Iterator[ContextForge]:
    """Run ContextForge in front of `upstream_url` (Streamable HTTP); see the module docstring.

    `workers`: uvicorn worker processes (give it the maitre gateway's count, for a fair row).
    `cpus`: pin it and everything it starts (workers, helpers) to these CPUs.
    """
    if not 1 <= workers <= 16:
        raise ValueError("workers must be 1..16")
    venv_python = ensure_installed(venv, python=python)
    gateway_bin = venv / "bin" / "mcpgateway"
    workdir = Path(tempfile.mkdtemp(prefix="contextforge-"))
    port = free_port()
    env = _settings(workdir, port)
    log_path = workdir / "contextforge.log"
    proc: subprocess.Popen[Any] | None = None
    try:
        args = [str(gateway_bin), "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
        args += ["--no-access-log", "--log-level", "warning"]
        with open(log_path, "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                args, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        if cpus:
            pin(proc.pid, cpus)  # before it spawns its workers (the interpreter takes ~1 s to get there)
        base_url = f"http://127.0.0.1:{port}"
        _wait_healthy(proc, base_url, log_path, start_timeout_s)
        startup_s = time.monotonic() - started
        token = _mint_token(venv_python, env, workdir)
        server_id, tool_name = _register(base_url, token, upstream_url, gateway_name, tool)
        url = f"{base_url}/servers/{server_id}/mcp"
        problem = call_once(Target(url=url, tool=tool_name, token=token))
        if problem is not None:
            raise ContextForgeUnavailable(f"started, but a tools/call through it failed: {problem}")
        yield ContextForge(
            url=url,
            token=token,
            tool_name=tool_name,
            server_id=server_id,
            base_url=base_url,
            port=port,
            pid=proc.pid,
            workers=workers,
            startup_s=startup_s,
            log_path=log_path,
        )
    finally:
        if proc is not None:
            _stop(proc, port)
        shutil.rmtree(workdir, ignore_errors=True)


# -- self-test: one measured comparison ------------------------------------------------------------


def _demo() -> int:
    import argparse
    import asyncio

    from _echo_upstream import echo_upstream
    from _loadgen import LEGACY, MODERN, LoadResult, loadavg, print_results, run_load, run_wrk, wrk_available

    parser = argparse.ArgumentParser(description="echo upstream direct vs through ContextForge")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--wrk", action="store_true", help="also measure both with wrk")
    parser.add_argument("--protocol", choices=[LEGACY, MODERN], default=LEGACY)
    parser.add_argument("--venv", type=Path, default=VENV)
    parser.add_argument("--python", default=None, help="interpreter for a new venv (default: found)")
    options = parser.parse_args()
    results: list[LoadResult] = []
    port = 0
    with echo_upstream("up1") as upstream:
        try:
            with contextforge(
                upstream, workers=options.workers, venv=options.venv, python=options.python
            ) as cf:
                print(
                    f"ContextForge {VERSION}: pid {cf.pid}, {cf.workers} worker(s), healthy after "
                    f"{cf.startup_s:.1f}s, tool {cf.tool_name}, {cf.url}",
                    file=sys.stderr,
                )
                direct = Target(url=upstream, protocol=options.protocol, name="upstream direct")
                forged = Target(
                    url=cf.url,
                    tool=cf.tool_name,
                    token=cf.token,
                    protocol=options.protocol,
                    name="via ContextForge",
                )
                for target in (direct, forged):
                    load = run_load(target, concurrency=options.clients, duration_s=options.seconds)
                    results.append(asyncio.run(load))
                if options.wrk and wrk_available():
                    for target in (direct, forged):
                        results.append(
                            run_wrk(target, concurrency=options.clients, duration_s=options.seconds)
                        )
                port = cf.port
        except ContextForgeUnavailable as reason:
            print(f"ContextForge: skipped ({reason})")
            return 0
    print_results(results)
    direct_row, forged_row = results[:2]
    print(
        f"ContextForge / direct: {forged_row.rps / direct_row.rps:.3f}x req/s, "
        f"p50 {forged_row.p50_ms / direct_row.p50_ms:.1f}x; "
        f"load average before/after: {direct_row.loadavg_before} / {results[-1].loadavg_after}"
    )
    print(f"load average now: {loadavg()}; port {port} listening after exit: {_listening(port)}")
    print(json.dumps([r.as_dict() for r in results]), file=sys.stderr)
    return 1 if _listening(port) else 0


if __name__ == "__main__":
    sys.exit(_demo())
