"""The scale-out rig: N `maitre gateway` replicas on one Postgres schema and Redis, behind HAProxy.

Shared by the replica-kill test (`tests/scale/test_replica_kill.py`) and the gateway benchmark
(`benchmarks/gateway_bench.py`, which puts `tests/scale` on `sys.path`), so both measure the same
deployment. Everything listens on 127.0.0.1; every process started here is stopped by the context
manager that started it, by its own PID.

- `postgres_error()` / `redis_error()` / `haproxy_binary()`: what is missing, to skip honestly.
- `pg_schema()`: a fresh, uniquely named Postgres schema for one run, dropped afterwards.
- `ledger_upstream()`: the upstream MCP server (`ledger_upstream.py`) in a process of its own.
- `pin_upstream()` + `write_gateway_config()`: the lockfile and `maitre.toml` every replica reads.
- `replicas()`: `python -m maitre.cli gateway --port P` per name, returned once each logs "serving".
- `haproxy()`: `haproxy -db` (foreground) over the replicas, returned once every server is UP.
- `rss_kb()`: a process's resident set (VmRSS) for the "memory flat" check.
- `tools_call()` / `parse_reply()`: a hand-built 2026-07-28 stateless `tools/call` POST (no
  session, no SDK client in the load loop, so the load generator costs little CPU).

Health check. HAProxy asks each replica `GET /healthz` (no token; 200 while at least one upstream
is up, 503 when none is), every 300 ms, and takes a replica out after two failures. (The recipe's
2025-11-25 POST `ping` does not work on a gateway: without a session it answers 400 "Missing
session ID", and 2026-07-28 has no `ping`.)

2025-11-25 sessions across replicas. A 2026-07-28 request carries everything in itself
(`_meta` protocol version and capabilities), so any replica serves it: plain round robin, no
stickiness. A 2025-11-25 client instead opens a session (`initialize` answers `Mcp-Session-Id`)
that lives in the memory of the replica that created it; another replica answers that session id
with 404. maitre offers two answers, both in `haproxy_config`'s `legacy_sessions`:

- `"sticky"`: HAProxy learns the `Mcp-Session-Id` of each `initialize` response in a stick table
  and sends the session's later requests to the same replica. Server-to-client requests
  (elicitation inline) keep working. When that replica dies, the session dies with it: the client
  gets 404 and, as the 2025-11-25 transport says, starts a new session with `initialize`.
- `"stateless"` (`[serve] stateless_legacy = true` in maitre.toml, which `maitre gateway` reads):
  2025-11-25 clients get no session at all, every request stands alone and any replica serves
  it; the price is no server-to-client requests, so an approval cannot be asked inline (the
  caller sees APPROVAL_REQUIRED and retries with the approval id, as a 2026-07-28 caller does).

`test_legacy_sessions.py` checks both, and that plain round robin over stateful replicas fails.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt

__all__ = [
    "AUDIENCE",
    "ISSUER",
    "JWT_SECRET",
    "LEDGER_SCRIPT",
    "MODERN",
    "PG_DSN",
    "REDIS_URL",
    "Haproxy",
    "Replica",
    "bearer_token",
    "error_code",
    "haproxy",
    "haproxy_binary",
    "haproxy_config",
    "ledger_upstream",
    "load_average",
    "parse_reply",
    "pg_schema",
    "pin_upstream",
    "ports",
    "postgres_error",
    "redis_error",
    "replicas",
    "rss_kb",
    "stores_url",
    "tools_call",
    "wait_listening",
    "wrk",
    "WrkRun",
    "write_gateway_config",
]

HERE = Path(__file__).resolve().parent
LEDGER_SCRIPT = HERE / "ledger_upstream.py"
PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("MAITRE_TEST_REDIS", "redis://127.0.0.1:6379/0")
MODERN = "2026-07-28"
JWT_SECRET = "scale-rig-" + "k" * 40
ISSUER = "https://idp.scale.test"
AUDIENCE = "https://gateway.scale.test"
HANDLE_SECRET = "h" * 48
"""MAITRE_MCP_SECRET of every replica: the same on all, so a handle one signs, another accepts."""


# -- what is missing ----------------------------------------------------------------------------


def postgres_error(dsn: str = PG_DSN) -> str | None:
    """Why Postgres cannot be used (None when it can)."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {dsn} is not reachable: {exc}"
    return None


def redis_error(url: str = REDIS_URL) -> str | None:
    """Why Redis cannot be used (None when it can)."""
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except Exception as exc:
        return f"Redis at {url} is not reachable: {exc}"
    return None


def haproxy_binary() -> str | None:
    """The haproxy executable (Debian puts it in /usr/sbin, which a user's PATH may lack)."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")


def load_average() -> str:
    """The 1/5/15-minute load averages, for printing next to a timing."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


# -- Postgres ------------------------------------------------------------------------------------


@contextlib.contextmanager
def pg_schema(dsn: str = PG_DSN, prefix: str = "maitre_scale") -> Iterator[str]:
    """A schema name no one else uses (the stores create it), dropped with everything in it after."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def stores_url(schema: str, dsn: str = PG_DSN) -> str:
    """The `[stores] url` of a schema on `dsn`."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


# -- processes -----------------------------------------------------------------------------------


def wait_listening(
    port: int, proc: subprocess.Popen[Any], what: str, log: Path, timeout_s: float = 30
) -> None:
    """Until something accepts on 127.0.0.1:`port`; fails with `log` if `proc` exits first."""
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}): {log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not listen on {port} in {timeout_s} s: {log.read_text()[-3000:]}")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[Any], timeout_s: float = 10) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def ledger_upstream(port: int, ledger: Path, log: Path) -> Iterator[str]:
    """The ledger MCP server on 127.0.0.1:`port`, recording writes in `ledger`; yields its URL."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(LEDGER_SCRIPT), str(port), str(ledger)],
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_listening(port, proc, "the ledger upstream", log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(proc)


async def pin_upstream(lockfile: Path, namespace: str, url: str) -> None:
    """Pin what the upstream at `url` offers now under `namespace` (as `maitre mcp pin` does)."""
    from maitre.mcp.client import McpUpstream
    from maitre.mcp.pinning import Lockfile

    upstream = McpUpstream(url, namespace=namespace, allow_loopback=True)
    try:
        offered = await upstream.definitions()
    finally:
        await upstream.aclose()
    lock = Lockfile.load(lockfile)
    lock.pin(namespace, offered, source=url)
    lock.save()


def write_gateway_config(
    folder: Path,
    *,
    stores: str,
    upstream_url: str,
    lockfile: Path,
    rate_limits: str | None = REDIS_URL,
    namespace: str = "ledger",
    stateless_legacy: bool = False,
) -> Path:
    """`maitre.toml` for every replica: one trusted upstream, JWT auth and the shared stores.

    With `rate_limits` (a redis:// URL) each user gets a rate limit kept in Redis, generous enough
    never to refuse: every call pays for the shared bucket, as in a real deployment, without the
    test measuring the limit. With None there is no rate limit at all (as ContextForge runs in the
    benchmark, where its limit is off).
    """
    (folder / "jwt.key").write_text(JWT_SECRET)
    stores_section = f'[stores]\nurl = "{stores}"\n'
    budgets = "[budgets]\nmax_calls_per_run = 1000000\n"
    if rate_limits:
        stores_section += f'rate_limits = "{rate_limits}"\n'
        budgets += "rate_limit = { per_second = 1000000, burst = 1000000 }\n"
    text = f"""{stores_section}
[auth]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
key_file = "jwt.key"

{budgets}
[mcp]
lockfile = "{lockfile.name}"

[mcp.upstreams.{namespace}]
url = "{upstream_url}"
allow_loopback = true

[gateway]
trust_annotations = ["{namespace}"]
retry_max_s = 1.0

[serve]
stateless_legacy = {"true" if stateless_legacy else "false"}
"""
    config = folder / "maitre.toml"
    config.write_text(text)
    return config


def bearer_token(user: str, tenant: str, ttl_s: int = 900) -> str:
    """A JWT the replicas accept (HS256 with the rig's key)."""
    claims = {"sub": user, "tenant": tenant, "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + ttl_s}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


@dataclass
class Replica:
    """One running `maitre gateway` process."""

    name: str
    port: int
    proc: subprocess.Popen[Any]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@contextlib.contextmanager
def replicas(
    configs: Mapping[str, Path], ports: Mapping[str, int], folder: Path, timeout_s: float = 60
) -> Iterator[dict[str, Replica]]:
    """`python -m maitre.cli gateway --config CONFIG --port PORT` for each name (the Python process
    itself, no shell between, so `Replica.pid` is the one to signal), all started at once; yields
    them by name once each has logged "serving". Stopped (SIGTERM, then SIGKILL) at the end."""
    env = {**os.environ, "MAITRE_MCP_SECRET": HANDLE_SECRET, "MAITRE_CONFIG": ""}
    started: dict[str, Replica] = {}
    try:
        for name, config in configs.items():
            log = folder / f"{name}.log"
            command = [sys.executable, "-m", "maitre.cli", "gateway", "--config", str(config)]
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [*command, "--port", str(ports[name])],
                    cwd=config.parent,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                )
            started[name] = Replica(name, ports[name], proc, log)
        deadline = time.monotonic() + timeout_s
        for one in started.values():
            while "serving " not in one.log.read_text():
                if one.proc.poll() is not None:
                    raise RuntimeError(
                        f"replica {one.name} exited ({one.proc.returncode}): {one.log.read_text()[-3000:]}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replica {one.name} did not start: {one.log.read_text()[-3000:]}")
                time.sleep(0.05)
        yield started
    finally:
        for one in started.values():  # all at once: each takes a second or so to drain
            if one.proc.poll() is None:
                one.proc.terminate()
        for one in started.values():
            _stop(one.proc)


def rss_kb(pid: int) -> int:
    """VmRSS of `pid` in kB, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError(f"no VmRSS for pid {pid}")


# -- HAProxy -------------------------------------------------------------------------------------


def haproxy_config(
    *,
    port: int,
    stats_port: int,
    servers: Mapping[str, int],
    path: str = "/mcp",
    legacy_sessions: str = "sticky",
) -> str:
    """A foreground HAProxy over `servers` (name → port), round robin.

    Retries: a connect that fails (a dead replica not yet marked DOWN) is retried on another server
    (`retries` + `option redispatch 1`); so is a request whose replica closed the connection without
    answering (`retry-on empty-response`: it died holding it, or HAProxy reused a kept-alive
    connection to a replica that had just died). Retrying a POST is safe only because every write
    through maitre has an idempotency key (the host's, or one minted from the arguments): the
    retry replays the stored result, runs the write if the dead replica never claimed it, or is
    answered INVALID_STATE if it died holding the claim, never a second execution. Clients still
    retry what reaches them as a failure, with the same key. `legacy_sessions="sticky"` adds the Mcp-Session-Id stick
    table (module docstring); "none" leaves 2025-11-25 sessions unpinned.
    """
    check = f"    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1:{port}\n"
    sticky = ""
    if legacy_sessions == "sticky":
        sticky = (
            "    stick-table type string len 128 size 100k expire 30m\n"
            "    stick on req.hdr(mcp-session-id) if { req.hdr(mcp-session-id) -m found }\n"
            "    stick store-response res.hdr(mcp-session-id)\n"
        )
    elif legacy_sessions != "none":
        raise ValueError(f"legacy_sessions must be 'sticky' or 'none', not {legacy_sessions!r}")
    lines = "".join(
        f"    server {name} 127.0.0.1:{server_port} check\n" for name, server_port in servers.items()
    )
    return f"""global
    maxconn 2048
    log stdout format raw local0 info
defaults
    mode http
    log global
    option httplog
    option dontlognull
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
frontend mcp_in
    bind 127.0.0.1:{port}
    default_backend gateways
backend gateways
    balance roundrobin
    option httpchk
{check}    http-check expect status 200
    default-server inter 300ms fall 2 rise 2
{sticky}{lines}frontend stats
    bind 127.0.0.1:{stats_port}
    stats enable
    stats uri /stats
"""


@dataclass
class Haproxy:
    """A running `haproxy -db`, its front URL and its stats page."""

    proc: subprocess.Popen[Any]
    port: int
    stats_port: int
    log: Path
    path: str = "/mcp"
    servers: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def status(self) -> dict[str, str]:
        """Server name → HAProxy's status (UP, DOWN, ...) from the stats CSV."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5) as page:
            rows = page.read().decode().splitlines()
        header = rows[0].lstrip("# ").split(",")
        at = {name: i for i, name in enumerate(header)}
        return {
            cells[at["svname"]]: cells[at["status"]]
            for cells in (row.split(",") for row in rows[1:] if row)
            if cells[at["pxname"]] == "gateways" and cells[at["svname"]] not in ("FRONTEND", "BACKEND")
        }

    def wait(self, want: Mapping[str, str], timeout_s: float = 15) -> None:
        """Until each named server has the wanted status (e.g. {"g1": "UP"})."""
        deadline = time.monotonic() + timeout_s
        while True:
            now = self.status()
            if all(now.get(name, "").startswith(status) for name, status in want.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"HAProxy servers {now}, wanted {dict(want)}: {self.log.read_text()[-2000:]}"
                )
            time.sleep(0.1)

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines()


@contextlib.contextmanager
def haproxy(
    folder: Path,
    *,
    port: int,
    stats_port: int,
    servers: Mapping[str, int],
    legacy_sessions: str = "sticky",
) -> Iterator[Haproxy]:
    """Write the config, check it (`haproxy -c`), run `haproxy -db`; yields once all are UP."""
    binary = haproxy_binary()
    if binary is None:
        raise FileNotFoundError("haproxy is not installed (apt-get install -y haproxy)")
    config = folder / "haproxy.cfg"
    config.write_text(
        haproxy_config(port=port, stats_port=stats_port, servers=servers, legacy_sessions=legacy_sessions)
    )
    checked = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        raise RuntimeError(f"haproxy -c: {checked.stdout}{checked.stderr}")
    log = folder / "haproxy.log"
    with log.open("w") as out:
        proc = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(stats_port, proc, "haproxy", log)
        running = Haproxy(proc, port, stats_port, log, servers=list(servers))
        running.wait(dict.fromkeys(servers, "UP"))
        yield running
    finally:
        _stop(proc)


# -- the wire ------------------------------------------------------------------------------------

_ids = itertools.count(1)
_lock = threading.Lock()


def tools_call(
    name: str, arguments: Mapping[str, Any], *, token: str, idempotency_key: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of one stateless 2026-07-28 `tools/call`, with the host's idempotency key
    in `_meta` when given (`io.maitre/idempotencyKey`: the gate dedups by it across replicas)."""
    from maitre.mcp.server import IDEMPOTENCY_META_KEY
    from maitre.mcp.testing import envelope

    meta = envelope()
    if idempotency_key is not None:
        meta[IDEMPOTENCY_META_KEY] = idempotency_key
    with _lock:
        request_id = next(_ids)
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": dict(arguments), "_meta": meta},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
        "Authorization": f"Bearer {token}",
    }
    return json.dumps(body).encode(), headers


def parse_reply(content_type: str, text: str) -> dict[str, Any]:
    """The JSON-RPC response of a POST (plain JSON, or the last SSE frame with an id)."""
    if content_type.startswith("text/event-stream"):
        frames = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
        return next(f for f in reversed(frames) if "id" in f)
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def error_code(reply: Mapping[str, Any]) -> str | None:
    """The gate's error code of a tools/call result (`_meta["io.maitre/error"].code`), or the
    JSON-RPC error code as text, or None for a success."""
    if "error" in reply:
        return f"jsonrpc:{reply['error'].get('code')}"
    result = reply.get("result") or {}
    if not result.get("isError"):
        return None
    found = (result.get("_meta") or {}).get("io.maitre/error") or {}
    return str(found.get("code") or "isError")


def ports(n: int) -> Sequence[int]:
    """`n` distinct free ports on 127.0.0.1."""
    from maitre.mcp.testing import free_port

    chosen: list[int] = []
    while len(chosen) < n:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    return chosen


# -- wrk -----------------------------------------------------------------------------------------

WRK_SCRIPT = HERE / "wrk_ledger.lua"


@dataclass
class WrkRun:
    """What one fixed-length wrk run measured (wrk counts; it does not read the answers)."""

    requests: int
    seconds: float
    non2xx: int
    socket_errors: int
    p50_ms: float
    p99_ms: float

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def wrk(
    url: str,
    *,
    token: str,
    prefix: str,
    seconds: float,
    connections: int = 8,
    threads: int = 2,
    script: Path = WRK_SCRIPT,
) -> WrkRun:
    """`wrk -t THREADS -c CONNECTIONS -d SECONDS` with `script` (writes and reads alternating)."""
    binary = shutil.which("wrk")
    if binary is None:
        raise FileNotFoundError("wrk is not installed (apt-get install -y wrk)")
    env = {**os.environ, "TOKEN": token, "PREFIX": prefix}
    done = subprocess.run(
        [
            binary,
            f"-t{threads}",
            f"-c{connections}",
            f"-d{seconds}s",
            "--timeout",
            "10s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=seconds + 30,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}{done.stderr}")
    data = json.loads(line[4:])
    return WrkRun(
        requests=data["requests"],
        seconds=data["duration_us"] / 1e6,
        non2xx=data["non2xx"],
        socket_errors=data["connect"] + data["read"] + data["write"] + data["timeout"],
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
    )
