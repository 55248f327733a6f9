"""Where one `tools/call` through `maitre gateway` spends its CPU, layer by layer (issue 14, item 5).

`gateway_bench.py` says how fast the gateway is next to the upstream called directly; this says
why. The machine it runs on is shared (load average ~8 on 2 cores), so it measures **CPU time per
call**, which contention inflates far less than latency, and compares configurations A/B in the
same run.

How it runs: the echo upstream (`_echo_upstream.py`) in a process of its own; the gateway **in this
process**, built as `maitre gateway` builds it (`maitre.toml` read by `load_settings`, `plan_serve`,
`Gateway`, the gate on the configured stores, JWT auth, `serve._serve` on uvicorn, 127.0.0.1);
the load generator (`_loadgen.run_load`, 2026-07-28 stateless calls, each answer checked) in a
child process, so its CPU is not the gateway's. Per store (`memory://`, SQLite file, Postgres
schema) it runs N sequential calls (1 client) and N calls from C concurrent clients, and reports:

- gateway CPU µs per call (`time.process_time` of this process over the window: every thread),
  and the upstream's (its /proc/PID/stat utime+stime), and their ratio. On this shared machine the
  CPU time one call costs moves by up to 2x between minutes (other jobs' cache and core pressure);
  the upstream runs the same uvicorn + SDK server stack, so gateway/upstream CPU is the steadier
  yardstick for an A/B (`--variants base,X,base,X` interleaves them);
- for the sequential run, CPU and wall µs per call **by layer**, from seams timed with
  `time.process_time_ns` / `time.perf_counter_ns` (monkeypatched wrappers, inclusive, only one call
  in flight so nothing else runs between): inbound HTTP (uvicorn/h11 + asyncio, what is outside the
  ASGI app), the SDK server (Starlette, transport security, the session manager, the lowlevel
  server, maitre's handler), the bearer JWT check, the gate's stages, the stores (every store
  method the gate awaited), the MCP client to the upstream (SDK `Client` + httpx2), and the
  upstream process itself. Wall minus CPU per seam shows where a call *waits*.
- `--profile cprofile`: a cProfile of the sequential window (top functions by own time, and the
  totals by package), `--profile pyspy`: `py-spy record` on this process during the concurrent
  window (needs ptrace rights; printed as top frames).

Usage: `python benchmarks/gateway_profile.py [--stores memory,sqlite,postgres] [--calls 300]
[--concurrency 8] [--profile none|cprofile|pyspy] [--json FILE]`. Postgres is skipped with a
reason when it is not reachable. Bounds: at most 5000 calls per window, 64 clients.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import cProfile
import functools
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SELF = Path(__file__).resolve()
HERE = SELF.parent
for folder in (HERE, HERE.parent / "tests" / "scale"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from _echo_upstream import echo_upstream  # noqa: E402
from _loadgen import MODERN, LoadResult, Target, loadavg, run_load  # noqa: E402

__all__ = ["Seams", "main"]

NAMESPACE = "up1"
TOOL = f"{NAMESPACE}.echo"
PG_DSN = os.environ.get("MAITRE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
MAX_CALLS = 5000
MAX_CLIENTS = 64


# -- seams: inclusive CPU and wall time around the layers' entry points ---------------------------


_INSIDE: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("seams_inside", default=frozenset())
"""The seams the running task is inside (tasks it starts inherit it): per call, not per process, so
the next request, which can arrive before the last one's ASGI call has returned, is timed too."""


@dataclass
class Seams:
    """Inclusive process CPU ns and wall ns per seam, and how often it was entered.

    Only meaningful with one call in flight: an `await` inside a seam lets the loop run other
    tasks, whose time lands in the seam too (with one call in flight those are the call's own
    helpers, such as the SDK transport's request task, which is what the seam means)."""

    cpu_ns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    wall_ns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    active: bool = False

    def reset(self) -> None:
        self.cpu_ns.clear()
        self.wall_ns.clear()
        self.calls.clear()

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        inside = _INSIDE.get()
        if not self.active or name in inside:
            yield  # not measuring, or re-entered in this call (counted once, by the outermost)
            return
        token = _INSIDE.set(inside | {name})
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        try:
            yield
        finally:
            self.cpu_ns[name] += time.process_time_ns() - cpu0
            self.wall_ns[name] += time.perf_counter_ns() - wall0
            self.calls[name] += 1
            _INSIDE.reset(token)

    def wrap_async(self, owner: Any, attribute: str, name: str) -> Callable[[], None]:
        """Time every await of `owner.attribute` (an async function) as `name`; returns the undo."""
        original = getattr(owner, attribute)
        seams = self

        @functools.wraps(original)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            with seams.timed(name):
                return await original(*args, **kwargs)

        setattr(owner, attribute, timed)
        return lambda: setattr(owner, attribute, original)

    def wrap_asgi(self, app: Any, name: str) -> Any:
        seams = self

        async def timed(scope: Any, receive: Any, send: Any) -> None:
            if scope.get("type") != "http":
                await app(scope, receive, send)
                return
            with seams.timed(name):
                await app(scope, receive, send)

        return timed


def install_seams(seams: Seams) -> list[Callable[[], None]]:
    """Wrap the layers' entry points (class attributes: every instance made afterwards is timed)."""
    import httpx2

    from maitre.gate import Gate
    from maitre.mcp import direct_call, transports
    from maitre.mcp.auth import SdkTokenVerifier
    from maitre.mcp.client import McpUpstream

    undo = [
        seams.wrap_async(SdkTokenVerifier, "verify_token", "jwt"),
        seams.wrap_async(Gate, "call", "gate"),
        seams.wrap_async(McpUpstream, "call", "mcp_client"),
        seams.wrap_async(httpx2.AsyncClient, "send", "httpx2_send"),
        # The direct call's HTTP exchange: on the client's pool itself (no AsyncClient.send) since
        # direct_call._lean_exchange, through httpx2 otherwise.
        seams.wrap_async(direct_call, "_exchange", "http_exchange"),
    ]
    original_http_app = transports.http_app

    @functools.wraps(original_http_app)
    def http_app(*args: Any, **kwargs: Any) -> Any:
        app = original_http_app(*args, **kwargs)
        wrapped = seams.wrap_asgi(app, "asgi")
        # uvicorn wants an object it can call; Starlette's lifespan must still reach the app.
        return wrapped

    transports.http_app = http_app
    undo.append(lambda: setattr(transports, "http_app", original_http_app))
    return undo


def wrap_stores(seams: Seams, stores: Any) -> None:
    """Time every async method of each store the gate holds (instance attributes), as `stores.NAME.METHOD`."""
    import inspect

    for store_name in ("approvals", "idempotency", "audit", "handles", "runs", "rate_limits"):
        store = getattr(stores, store_name, None)
        if store is None:
            continue
        for attribute in dir(type(store)):
            if attribute.startswith("_"):
                continue
            value = getattr(store, attribute, None)
            if inspect.iscoroutinefunction(value):
                seams.wrap_async(store, attribute, f"stores.{store_name}.{attribute}")


# -- experiments: changes to files this harness does not own, applied by monkeypatching -------------

EXPERIMENTS = (
    "jwt_cache",
    "httptools",
    "uvloop",
    "pg_pipeline",
    "lean_client",
    "one_write",
    "sdk_calls",
    "json_response",
)
"""What `--variants` can turn on (joined with `+`; `base` is none of them):

Since `maitre.mcp.direct_call` and `maitre.mcp.remembered_tokens`, the gateway posts 2026-07-28 calls
directly, writes each request once and remembers verified tokens by itself: `lean_client`,
`one_write` and `jwt_cache` measured those changes before they were made and now add little or
nothing; `sdk_calls` measures the direct path against the SDK session's.

- `jwt_cache`: `JWTVerifier.decode` remembers a verified token's claims (keyed by the whole token,
  bounded, at most 60 s, never past `exp`), so a client sending the same bearer token again is not
  verified again (the proposed change to `maitre/mcp/auth.py`).
- `httptools`: uvicorn parses inbound HTTP with httptools instead of h11 (a dependency).
- `lean_client`: an upper bound, not a drop-in: `McpUpstream._call_on` posts the stateless
  2026-07-28 `tools/call` itself on one pooled httpx2 client (the egress hooks kept) and validates
  the answer as a `CallToolResult`, instead of going through the SDK `Client` (its session,
  dispatcher, memory streams and task per request). It skips what the SDK adds (output-schema
  validation, `input_required` rounds, cancellation), so it says how much of the client layer is
  the SDK's machinery, to decide whether a leaner path in `maitre/mcp/client.py` is worth it.
- `sdk_calls`: every upstream `tools/call` through the SDK session (`McpUpstream(direct_calls=False)`),
  as before `maitre.mcp.direct_call`, to measure what the direct path saves.
- `one_write`: httpcore2 sends a request's head and body in one socket write instead of two (it
  writes each h11 event as it comes, so the upstream wakes up twice per request and parses the
  head alone first). Experiment only: it buffers the whole body (the MCP client's bodies are
  small JSON); the change belongs in httpcore2 or in the transport `egress.py` builds.
- `json_response`: every answer plain JSON (`http_app(json_response=True)`), to measure what the
  SDK's SSE-capable modern path (a task group, a memory stream, a disconnect watcher and a 15 s
  keep-alive timer per request) costs when a call emits nothing.
- `pg_pipeline`: the audit append on Postgres in psycopg's pipeline mode, as before commit cc1bc75
  (to compare with the plain transaction it uses now).
- `uvloop`: the event loop is uvloop's (a dependency). Both need `--extra-path` holding them
  (`pip install --target DIR uvloop httptools`) unless the venv has them."""


def apply_experiments(chosen: set[str]) -> list[Callable[[], None]]:
    """Turn on `chosen` (see `EXPERIMENTS`); returns the undo steps. uvloop is the runner's business."""
    import uvicorn

    undo: list[Callable[[], None]] = []
    original_init = uvicorn.Config.__init__
    http = "httptools" if "httptools" in chosen else "h11"

    @functools.wraps(original_init)
    def config_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("http", http)
        original_init(self, *args, **kwargs)

    uvicorn.Config.__init__ = config_init  # type: ignore[method-assign]
    undo.append(lambda: setattr(uvicorn.Config, "__init__", original_init))
    if "one_write" in chosen:
        undo.append(_one_write())
    if "json_response" in chosen:
        from maitre.mcp import transports

        original_http_app = transports.http_app

        @functools.wraps(original_http_app)
        def json_http_app(*args: Any, **kwargs: Any) -> Any:
            kwargs["json_response"] = True
            return original_http_app(*args, **kwargs)

        transports.http_app = json_http_app
        undo.append(lambda: setattr(transports, "http_app", original_http_app))
    if "lean_client" in chosen:
        undo.append(_lean_client())
    if "sdk_calls" in chosen:
        from maitre.mcp.client import McpUpstream

        original_upstream_init = McpUpstream.__init__

        @functools.wraps(original_upstream_init)
        def upstream_init(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs["direct_calls"] = False
            original_upstream_init(self, *args, **kwargs)

        McpUpstream.__init__ = upstream_init  # type: ignore[method-assign]
        undo.append(lambda: setattr(McpUpstream, "__init__", original_upstream_init))
    if "pg_pipeline" in chosen:
        from maitre.storage.engine.postgres import PostgresEngine

        original_transact = PostgresEngine.transact

        async def transact(self: Any, op: Any, *, immediate: bool = False, pipeline: bool = False) -> Any:
            return await original_transact(self, op, immediate=immediate, pipeline=pipeline or immediate)

        PostgresEngine.transact = transact  # type: ignore[method-assign]
        undo.append(lambda: setattr(PostgresEngine, "transact", original_transact))
    if "jwt_cache" in chosen:
        from maitre.mcp.auth import JWTVerifier

        original_decode = JWTVerifier.decode
        cache: dict[tuple[int, str], tuple[float, dict[str, Any]]] = {}

        async def decode(self: Any, token: str) -> dict[str, Any]:
            now = time.time()
            hit = cache.get((id(self), token))
            if hit is not None and hit[0] > now:
                return dict(hit[1])
            claims = await original_decode(self, token)
            exp = claims.get("exp")
            until = min(now + 60.0, float(exp) if isinstance(exp, int | float) else now)
            if len(cache) >= 1024:
                cache.clear()
            cache[(id(self), token)] = (until, dict(claims))
            return claims

        JWTVerifier.decode = decode  # type: ignore[method-assign]
        undo.append(lambda: setattr(JWTVerifier, "decode", original_decode))
    return undo


def _one_write() -> Callable[[], None]:
    import h11
    from httpcore2._async.http11 import AsyncHTTP11Connection

    original = (AsyncHTTP11Connection._send_request_headers, AsyncHTTP11Connection._send_request_body)
    heads: dict[int, bytes] = {}

    async def send_headers(self: Any, request: Any) -> None:
        event = h11.Request(method=request.method, target=request.url.target, headers=request.headers)
        heads[id(self)] = self._h11_state.send(event) or b""

    async def send_body(self: Any, request: Any) -> None:
        timeout = request.extensions.get("timeout", {}).get("write", None)
        parts = [heads.pop(id(self), b"")]
        async for chunk in request.stream:
            parts.append(self._h11_state.send(h11.Data(data=chunk)) or b"")
        parts.append(self._h11_state.send(h11.EndOfMessage()) or b"")
        await self._network_stream.write(b"".join(parts), timeout=timeout)

    AsyncHTTP11Connection._send_request_headers = send_headers  # type: ignore[method-assign]
    AsyncHTTP11Connection._send_request_body = send_body  # type: ignore[method-assign]

    def undo() -> None:
        AsyncHTTP11Connection._send_request_headers, AsyncHTTP11Connection._send_request_body = original

    return undo


def _lean_client() -> Callable[[], None]:
    import httpx2
    import mcp_types as types

    from maitre.mcp.client import McpUpstream
    from maitre.mcp.egress import _hooks

    original = McpUpstream._call_on
    clients: dict[int, httpx2.AsyncClient] = {}
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "maitre-lean", "version": "0"},
    }
    ids = iter(range(1, 1 << 62))

    async def call_on(self: Any, client: Any, name: str, arguments: dict[str, Any], extra: Any) -> Any:
        http = clients.get(id(self))
        if http is None:
            http = clients[id(self)] = httpx2.AsyncClient(
                headers=self.headers, event_hooks=_hooks(self.guard, self.max_response_bytes), timeout=30
            )
        body = {
            "jsonrpc": "2.0",
            "id": next(ids),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta},
        }
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
        }
        response = await http.post(self.target, content=json.dumps(body), headers=headers)
        answer = json.loads(await response.aread())
        return types.CallToolResult.model_validate(answer["result"])

    McpUpstream._call_on = call_on  # type: ignore[method-assign]
    return lambda: setattr(McpUpstream, "_call_on", original)


# -- the gateway, in this process ------------------------------------------------------------------


def write_config(folder: Path, *, stores: str, upstream_url: str, lockfile: Path) -> Path:
    """`maitre.toml` as the scale rig writes it for the benchmark (`rig.write_gateway_config`: JWT
    auth, one trusted upstream, no rate limit), so the profile measures the gateway the bench runs."""
    import rig

    return rig.write_gateway_config(
        folder,
        stores=stores,
        upstream_url=upstream_url,
        lockfile=lockfile,
        rate_limits=None,
        namespace=NAMESPACE,
    )


def bearer_token() -> str:
    """A token the rig's configuration accepts (`rig.bearer_token`, an hour long)."""
    import rig

    return rig.bearer_token("bench", "t1", ttl_s=3600)


async def pin(lockfile: Path, url: str) -> None:
    from maitre.mcp.client import McpUpstream
    from maitre.mcp.pinning import Lockfile

    upstream = McpUpstream(url, namespace=NAMESPACE, allow_loopback=True)
    try:
        offered = await upstream.definitions()
    finally:
        await upstream.aclose()
    lock = Lockfile.load(lockfile)
    lock.pin(NAMESPACE, offered, source=url)
    lock.save()


@contextlib.asynccontextmanager
async def running_gateway(config: Path, seams: Seams) -> AsyncIterator[tuple[str, Any]]:
    """The gateway `maitre gateway --config CONFIG` would run, in this event loop; yields (URL, gate)."""
    import anyio

    from maitre.config.files import load_settings
    from maitre.mcp import serve
    from maitre.mcp.app import MCPApp
    from maitre.mcp.gateway import Gateway
    from maitre.mcp.pinning import Lockfile
    from maitre.mcp.testing import free_port

    settings = load_settings(config)
    port = free_port()
    plan = serve.plan_serve(
        settings, target="gateway", transport="http", host="127.0.0.1", port=port, path="/mcp", stores=None
    )
    plan.name = "maitre-gateway"
    file = settings.config
    gateway = Gateway(
        dict(file.mcp.upstreams),
        lockfile=Lockfile.load(settings.path_of(file.mcp.lockfile)),
        trust_annotations=file.gateway.trust_annotations,
        retry_max_s=file.gateway.retry_max_s,
    )
    served: dict[str, Any] = {}
    original_governed = serve._governed

    def governed(loaded: Any, stores: Any, plan_: Any) -> Any:
        server = original_governed(loaded, stores, plan_)
        served["server"] = server
        wrap_stores(seams, server.gate.stores)
        return server

    serve._governed = governed
    verifier = serve._verifier(plan)
    # The gate `maitre gateway` builds from the file (`gate_for`; `_gate_for` before it was public).
    gate_for = getattr(serve, "gate_for", None) or serve._gate_for
    app = MCPApp(gateway.toolbox, name="maitre-gateway", gate=gate_for(gateway.toolbox, None, plan))
    app.add_source(gateway.federation)
    app.health = gateway.health
    try:
        async with gateway, anyio.create_task_group() as tg:
            tg.start_soon(serve._serve, plan, app, verifier)
            deadline = time.monotonic() + 30
            while "server" not in served or not await _listening(port):
                if time.monotonic() > deadline:
                    raise TimeoutError("the gateway did not start listening in 30 s")
                await anyio.sleep(0.05)
            try:
                yield f"http://127.0.0.1:{port}/mcp", served["server"].gate
            finally:
                tg.cancel_scope.cancel()
    finally:
        serve._governed = original_governed


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


# -- the load, from a child process ----------------------------------------------------------------


async def load_from_child(url: str, token: str, *, calls: int, clients: int, tool: str = TOOL) -> LoadResult:
    """`calls` checked 2026-07-28 calls from `clients` workers, run by a child process (its CPU is
    its own); the child prints the result as JSON."""
    args = [sys.executable, str(SELF), "--_load", url, token, str(calls), str(clients), tool]
    proc = await asyncio.create_subprocess_exec(
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=600)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed: {err.decode(errors='replace')[-2000:]}")
    data = json.loads(out.decode().strip().splitlines()[-1])
    latencies = data.pop("latencies_ms")
    data.pop("rps", None)
    data.pop("client_cpu_us_per_call", None)
    return LoadResult(**data, latencies_ms=latencies)


def _child_load(url: str, token: str, calls: int, clients: int, tool: str) -> None:
    target = Target(url=url, tool=tool, token=token or None, protocol=MODERN, name=tool)
    result = asyncio.run(run_load(target, concurrency=clients, duration_s=None, count=calls, warmup_s=0))
    record = result.as_dict()
    record["seconds"] = result.seconds
    record["client_cpu_s"] = result.client_cpu_s
    for derived in ("rps", "client_cpu_us_per_call"):
        record.pop(derived, None)
    record["latencies_ms"] = result.latencies_ms
    print(json.dumps(record))


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its reaped children so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def upstream_pid(port: int) -> int | None:
    """The pid listening on 127.0.0.1:`port` (the echo upstream), from /proc/net/tcp and fds."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        local, state = parts[1], parts[3]
        if state == "0A" and int(local.split(":")[1], 16) == port:
            inode = parts[9]
            break
    if inode is None:
        return None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                        return int(pid)
    return None


# -- one configuration ------------------------------------------------------------------------------


@dataclass
class Window:
    """One measured window: the load's result and the CPU each side spent on it."""

    label: str
    result: LoadResult
    gateway_cpu_s: float
    upstream_cpu_s: float
    seams: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return self.result.calls

    @property
    def ratio(self) -> float:
        """Gateway CPU over the upstream's for the same calls (nan when the upstream's is unknown)."""
        return self.gateway_cpu_s / self.upstream_cpu_s if self.upstream_cpu_s > 0 else float("nan")

    def per_call_us(self, seconds: float) -> float:
        return seconds * 1e6 / self.calls if self.calls else float("nan")

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "label": self.label,
            "calls": self.calls,
            "ok": r.ok,
            "errors": r.errors,
            "rps": round(r.rps, 1),
            "p50_ms": round(r.p50_ms, 2),
            "p99_ms": round(r.p99_ms, 2),
            "gateway_cpu_us_per_call": round(self.per_call_us(self.gateway_cpu_s)),
            "upstream_cpu_us_per_call": round(self.per_call_us(self.upstream_cpu_s)),
            "gateway_over_upstream_cpu": round(self.ratio, 2),
            "seams": self.seams,
            "loadavg": [r.loadavg_before, r.loadavg_after],
        }


async def measure(
    label: str,
    url: str,
    token: str,
    *,
    calls: int,
    clients: int,
    up_pid: int | None,
    seams: Seams | None = None,
    profiler: cProfile.Profile | None = None,
    tool: str = TOOL,
) -> Window:
    up0 = proc_cpu_s(up_pid) if up_pid else 0.0
    if seams is not None:
        seams.reset()
        seams.active = True
    if profiler is not None:
        profiler.enable()
    cpu0 = time.process_time()
    try:
        result = await load_from_child(url, token, calls=calls, clients=clients, tool=tool)
    finally:
        cpu = time.process_time() - cpu0
        if profiler is not None:
            profiler.disable()
        if seams is not None:
            seams.active = False
    upstream = (proc_cpu_s(up_pid) - up0) if up_pid else float("nan")
    window = Window(label, result, cpu, upstream)
    if seams is not None:
        n = max(1, result.calls)
        window.seams = {
            name: {
                "cpu_us": round(seams.cpu_ns[name] / n / 1e3, 1),
                "wall_us": round(seams.wall_ns[name] / n / 1e3, 1),
                "per_call": round(seams.calls[name] / n, 2),
            }
            for name in sorted(seams.cpu_ns)
        }
    return window


def layers(window: Window) -> dict[str, float]:
    """CPU µs per call by layer (exclusive), from the sequential window's seams."""
    s = {name: v["cpu_us"] for name, v in window.seams.items()}
    stores = sum(v for name, v in s.items() if name.startswith("stores."))
    total = window.per_call_us(window.gateway_cpu_s)
    asgi = s.get("asgi", 0.0)
    gate = s.get("gate", 0.0)
    client = s.get("mcp_client", 0.0)
    jwt = s.get("jwt", 0.0)
    return {
        "inbound HTTP (uvicorn/h11, asyncio; outside the ASGI app)": total - asgi,
        "SDK server + maitre handler (ASGI app minus JWT and gate)": asgi - jwt - gate,
        "bearer JWT check": jwt,
        "gate stages (gate minus stores and upstream call)": gate - stores - client,
        "stores (every store method the gate awaited)": stores,
        "MCP client to upstream (SDK Client + httpx2)": client,
        "  of which the HTTP exchange (direct_call._exchange)": s.get("http_exchange", 0.0),
        "    of it through httpx2 AsyncClient.send": s.get("httpx2_send", 0.0),
        "gateway total (process CPU)": total,
        "upstream process": window.per_call_us(window.upstream_cpu_s),
    }


def print_window(window: Window, *, file: Any = sys.stdout) -> None:
    r = window.result
    print(
        f"  {window.label:28} {r.ok:5d} ok {sum(r.errors.values()):3d} err {r.rps:7.1f} req/s "
        f"p50 {r.p50_ms:7.2f} ms p99 {r.p99_ms:7.2f} ms | gateway CPU "
        f"{window.per_call_us(window.gateway_cpu_s):6.0f} µs/call, upstream "
        f"{window.per_call_us(window.upstream_cpu_s):5.0f} µs/call ({window.ratio:.2f}x) "
        f"| load {r.loadavg_after}",
        file=file,
    )
    if r.errors:
        print(f"    errors: {r.errors}", file=file)


def print_layers(window: Window, *, file: Any = sys.stdout) -> None:
    print(f"  CPU µs per call by layer ({window.label}):", file=file)
    for name, value in layers(window).items():
        print(f"    {name:62} {value:8.0f}", file=file)
    print("  seams (inclusive, per call): cpu µs / wall µs / entries", file=file)
    for name, v in window.seams.items():
        print(f"    {name:44} {v['cpu_us']:8.1f} {v['wall_us']:9.1f} {v['per_call']:6.2f}", file=file)


def print_profile(profiler: cProfile.Profile, *, top: int = 30, file: Any = sys.stdout) -> None:
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("cumulative").print_stats("src/maitre/", top)
    stats.sort_stats("tottime").print_stats("src/maitre/", top)
    stats.sort_stats("cumulative").print_stats(
        "src/maitre/(gate|audit|storage|tools|fence|tracing|types)", top
    )
    print(stream.getvalue(), file=file)
    by_package: dict[str, float] = defaultdict(float)
    total = 0.0
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += tottime
        by_package[_package(filename)] += tottime
    print("  own time by package (% of profiled):", file=file)
    for name, t in sorted(by_package.items(), key=lambda kv: -kv[1])[:20]:
        print(f"    {name:40} {100 * t / total:5.1f}%", file=file)


def _package(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/maitre/" in filename:
        rest = filename.split("/maitre/", 1)[1]
        return "maitre/" + (rest.split("/", 1)[0] if "/" in rest else rest)
    if filename.startswith("<") or "/lib/python" in filename:
        return "stdlib " + Path(filename).name if "/asyncio/" not in filename else "stdlib asyncio"
    return filename


# -- the run -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def store_url(kind: str, folder: Path) -> Iterator[str]:
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        yield str(folder / "maitre.db")
    elif kind == "postgres":
        import rig  # tests/scale/rig.py

        with rig.pg_schema(PG_DSN, prefix="maitre_profile") as schema:
            yield rig.stores_url(schema, PG_DSN)
    else:
        raise ValueError(f"unknown store kind {kind!r}")


def postgres_error() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


async def profile_store(
    kind: str, variant: str, upstream_url: str, up_pid: int | None, args: argparse.Namespace, seams: Seams
) -> list[Window]:
    kind_label = kind if variant == "base" else f"{kind} [{variant}]"
    windows: list[Window] = []
    with tempfile.TemporaryDirectory(prefix="gwprof-") as tmp, store_url(kind, Path(tmp)) as stores:
        folder = Path(tmp)
        lockfile = folder / "maitre.lock.json"
        await pin(lockfile, upstream_url)
        config = write_config(folder, stores=stores, upstream_url=upstream_url, lockfile=lockfile)
        token = bearer_token()
        async with running_gateway(config, seams) as (url, _gate):
            await load_from_child(url, token, calls=min(100, args.calls), clients=2)  # warm-up
            # CPU time, not wall: on a loaded machine a loopback send() "takes" as long as the woken
            # receiver keeps this process off the core, which is not this process's cost.
            profiler = cProfile.Profile(time.thread_time) if args.profile == "cprofile" else None
            seq = await measure(
                f"{kind_label}, 1 client", url, token, calls=args.calls, clients=1, up_pid=up_pid, seams=seams
            )
            windows.append(seq)
            print_window(seq)
            if profiler is not None:
                prof = await measure(
                    f"{kind_label}, 1 client, cProfile",
                    url,
                    token,
                    calls=args.calls,
                    clients=1,
                    up_pid=up_pid,
                    profiler=profiler,
                )
                print_window(prof)
            spy = None
            if args.profile == "pyspy":
                spy = _start_pyspy(folder, args)
            conc = await measure(
                f"{kind_label}, {args.concurrency} clients",
                url,
                token,
                calls=args.calls,
                clients=args.concurrency,
                up_pid=up_pid,
            )
            windows.append(conc)
            print_window(conc)
            print_layers(seq)
            if profiler is not None:
                print_profile(profiler)
            if spy is not None:
                _stop_pyspy(spy, folder)
    return windows


def _start_pyspy(folder: Path, args: argparse.Namespace) -> subprocess.Popen[bytes] | None:
    import shutil

    found = os.environ.get("PY_SPY") or shutil.which("py-spy")
    py_spy = Path(found) if found else Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        print("  (py-spy not found: pip install py-spy, or PY_SPY=/path/to/py-spy)")
        return None
    out = folder / "pyspy.txt"
    return subprocess.Popen(
        [str(py_spy), "record", "-p", str(os.getpid()), "-d", "60", "-r", "250", "-f", "raw", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop_pyspy(proc: subprocess.Popen[bytes], folder: Path) -> None:
    import signal

    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    out = folder / "pyspy.txt"
    if not out.exists():
        print("  (py-spy wrote nothing: it may lack ptrace rights)")
        return
    inclusive: dict[str, int] = defaultdict(int)
    own: dict[str, int] = defaultdict(int)
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        total += count
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += count
        own[frames[-1]] += count
    print("  py-spy, concurrent window, top own frames (% of samples):")
    for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:25]:
        print(f"    {100 * n / total:5.1f}%  {frame[:140]}")
    print("  py-spy, concurrent window, top inclusive frames (% of samples):")
    for frame, n in sorted(inclusive.items(), key=lambda kv: -kv[1])[:60]:
        print(f"    {100 * n / total:5.1f}%  {frame[:140]}")
    keep = os.environ.get("PY_SPY_KEEP")
    if keep:
        Path(keep).write_text(out.read_text())


async def direct_rows(upstream_url: str, up_pid: int | None, args: argparse.Namespace) -> list[Window]:
    """The upstream called directly, 1 and C clients: the yardstick of the issue's ratios."""
    print("upstream direct:")
    await load_from_child(upstream_url, "", calls=min(100, args.calls), clients=2, tool="echo")  # warm-up
    rows = []
    for clients in (1, args.concurrency):
        window = await measure(
            f"direct, {clients} client(s)",
            upstream_url,
            "",
            calls=args.calls,
            clients=clients,
            up_pid=up_pid,
            tool="echo",
        )
        print_window(window)
        rows.append(window)
    return rows


def run_all(args: argparse.Namespace) -> list[Window]:
    """Every store × variant, each variant in an event loop of its own (uvloop's when asked)."""
    seams = Seams()
    undo = install_seams(seams)
    windows: list[Window] = []
    try:
        print(f"load average at start: {loadavg()} ({os.cpu_count()} cores)")
        with echo_upstream(NAMESPACE) as upstream_url:
            port = int(upstream_url.rsplit(":", 1)[1].split("/", 1)[0])
            up_pid = upstream_pid(port)
            windows += asyncio.run(direct_rows(upstream_url, up_pid, args))
            for kind in args.stores:
                if kind == "postgres" and (why := postgres_error()):
                    print(f"{kind}: skipped ({why})")
                    continue
                for variant in args.variants:
                    chosen = set() if variant == "base" else set(variant.split("+"))
                    print(f"{kind}, {variant}:")
                    loop_factory = None
                    if "uvloop" in chosen:
                        import uvloop

                        loop_factory = uvloop.new_event_loop
                    steps = apply_experiments(chosen)
                    try:
                        with asyncio.Runner(loop_factory=loop_factory) as runner:
                            windows += runner.run(
                                profile_store(kind, variant, upstream_url, up_pid, args, seams)
                            )
                    finally:
                        for step in reversed(steps):
                            step()
        print(f"load average at the end: {loadavg()}")
    finally:
        for step in reversed(undo):
            step()
    return windows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_load"]:
        url, token, calls, clients, tool = argv[1:6]
        _child_load(url, token, int(calls), int(clients), tool)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--stores", default="memory,sqlite,postgres", help="comma-separated: memory,sqlite,postgres"
    )
    parser.add_argument("--calls", type=int, default=300, help="calls per window")
    parser.add_argument("--concurrency", type=int, default=8, help="clients in the concurrent window")
    parser.add_argument("--profile", choices=("none", "cprofile", "pyspy"), default="none")
    parser.add_argument(
        "--variants",
        default="base",
        help=f"comma-separated; each 'base' or experiments joined by '+': {', '.join(EXPERIMENTS)}",
    )
    parser.add_argument(
        "--extra-path", default=None, help="a folder with uvloop/httptools (pip install --target)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every window as JSON here")
    args = parser.parse_args(argv)
    args.stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = {e for v in args.variants if v != "base" for e in v.split("+")} - set(EXPERIMENTS)
    if unknown:
        parser.error(f"unknown experiment(s): {', '.join(sorted(unknown))}")
    if args.extra_path:
        sys.path.append(args.extra_path)
    if not 1 <= args.calls <= MAX_CALLS or not 1 <= args.concurrency <= MAX_CLIENTS:
        parser.error(f"--calls must be 1..{MAX_CALLS}, --concurrency 1..{MAX_CLIENTS}")
    os.environ.setdefault("MAITRE_MCP_SECRET", "p" * 48)
    import logging

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    windows = run_all(args)
    if args.json is not None:
        args.json.write_text(json.dumps([w.as_dict() for w in windows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
