"""A bounded closed-loop load generator for MCP Streamable HTTP `tools/call`, and a `wrk` wrapper.

What it sends: stateless JSON-RPC `tools/call` POSTs (no `initialize`, no session), either with the
2025-11-25 headers (`MCP-Protocol-Version: 2025-11-25`) or as 2026-07-28 requests (`Mcp-Method`,
`Mcp-Name` and the per-request `_meta` envelope the spec requires); for a server that keeps
2025-11-25 sessions (maitre's gateway does), `Target(session=True)` opens one per worker first. Every call carries a unique
argument (`lg-<worker>-<seq>.`); a call counts as OK only if the answer is HTTP 200, a JSON-RPC result
(not an error), not `isError`, complete (no `input_required`), and echoes that value back. Anything
else is counted by kind (`http_503`, `timeout`, `not_echoed`, ...), never silently.

How it loads: N workers, each with its own keep-alive HTTP/1.1 connection, each sending its next
call when the previous answer is in (closed loop). A warm-up (connections opened, servers' caches
and JITs warm) runs first and is not counted; then the measured window runs for a fixed duration
and/or a fixed count of calls. Calls started inside the window are counted, including the ones
still in flight when it closes; req/s = OK calls / (last counted answer - window start).

Why raw asyncio streams instead of an HTTP library: on this 2-core machine the generator competes
with the servers it measures, so its own cost per call is part of the error. Requests are built
from pre-encoded pieces, answers are read with `readuntil`/`readexactly`, and only the JSON body is
parsed. The client's CPU time is recorded with each result (`client_cpu_us_per_call`) so that cost
is visible next to the numbers. Plain `http://` only (the benchmarks run on 127.0.0.1).

`run_wrk(...)` drives `wrk` (Debian package `wrk`) with a Lua script that builds the same bodies
(unique argument per request) and checks each answer's body for `isError: false` and an echoed
`wrk-` value (wrk's Lua cannot match an answer to its request, so that check is weaker); its
summary comes back as one JSON line from the script's `done()`, read into the same `LoadResult`.

Bounds: at most 512 workers, 600 s per window, 10 M calls; every call has a timeout.

Self-test: `python benchmarks/_loadgen.py` (starts the echo upstream, checks OK and failure
counting for both protocols, sessions, the count bound, `combine` and wrk; prints the rows).

Measured here (echo upstream, 8 workers, same run): this client costs ~75-110 µs of its own CPU per
call (about half of it the kernel's loopback send), an `httpx.AsyncClient` per worker ~570-700 µs,
wrk ~45-55 µs. httpx was not cheap enough; wrk is cheaper still but cannot check each answer.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "LEGACY",
    "MODERN",
    "LoadResult",
    "Target",
    "call_once",
    "combine",
    "header_value",
    "loadavg",
    "print_results",
    "run_load",
    "run_wrk",
    "wrk_available",
]

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
MAX_CONCURRENCY = 512
MAX_SECONDS = 600.0
MAX_CALLS = 10_000_000
_READ_LIMIT = 1 << 22
"""Largest response head / SSE line the reader accepts (4 MiB)."""


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where to send `tools/call`, and how."""

    url: str
    """The MCP endpoint, e.g. `http://127.0.0.1:18101/mcp` (plain http only)."""
    tool: str = "echo"
    token: str | None = None
    """Sent as `Authorization: Bearer <token>` when set."""
    protocol: str = LEGACY
    """`2025-11-25` (stateless JSON-RPC with the version header) or `2026-07-28` (headers + `_meta`)."""
    argument: str = "text"
    """The string argument that carries the unique value the answer must echo."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """Other arguments, the same in every call."""
    name: str = ""
    """Row label (defaults to the URL)."""
    session: bool = False
    """2025-11-25 only: each worker opens a session (`initialize`, `notifications/initialized`) on
    its first call and sends its `Mcp-Session-Id` with every call after, as an SDK client would -
    for servers that keep 2025-11-25 sessions (maitre's unless `stateless_legacy`)."""

    @property
    def label(self) -> str:
        return self.name or self.url


@dataclass(kw_only=True)
class LoadResult:
    """One measured window: counts, errors by kind, throughput and latency of the OK calls."""

    name: str
    generator: str
    """`asyncio` (this module's client) or `wrk`."""
    protocol: str
    concurrency: int
    seconds: float
    """Length of the measured window."""
    ok: int
    errors: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    client_cpu_s: float
    """CPU time (user + system) the load generator itself used during the window."""
    loadavg_before: str
    loadavg_after: str
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    """The OK calls' latencies, ascending (this module's generator only; wrk gives percentiles)."""

    @property
    def calls(self) -> int:
        return self.ok + sum(self.errors.values())

    @property
    def rps(self) -> float:
        """OK calls per second."""
        return self.ok / self.seconds if self.seconds > 0 else 0.0

    @property
    def client_cpu_us_per_call(self) -> float:
        return self.client_cpu_s * 1e6 / self.calls if self.calls else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "generator": self.generator,
            "protocol": self.protocol,
            "concurrency": self.concurrency,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            "errors": dict(self.errors),
            "rps": round(self.rps, 1),
            "p50_ms": round(self.p50_ms, 2),
            "p90_ms": round(self.p90_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "max_ms": round(self.max_ms, 2),
            "client_cpu_us_per_call": round(self.client_cpu_us_per_call, 1),
            "loadavg_before": self.loadavg_before,
            "loadavg_after": self.loadavg_after,
        }


def loadavg() -> str:
    """The 1/5/15-minute load averages, as `/proc/loadavg` gives them ("" where there is none)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return ""


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (nan when empty)."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * q) - 1))]


def print_results(results: list[LoadResult], *, file: Any = None) -> None:
    """A fixed-width table of results (req/s of OK calls; latencies of OK calls, wrk: of all)."""
    out = file or sys.stdout
    print(
        f"{'target':34} {'gen':7} {'ok':>7} {'errors':>7} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8} {'gen µs/call':>11}",
        file=out,
    )
    for r in results:
        errors = sum(r.errors.values())
        print(
            f"{r.name[:34]:34} {r.generator:7} {r.ok:7d} {errors:7d} {r.rps:8.1f} {r.p50_ms:8.2f} "
            f"{r.p90_ms:8.2f} {r.p99_ms:8.2f} {r.max_ms:8.1f} {r.client_cpu_us_per_call:11.0f}",
            file=out,
        )
        if r.errors:
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(r.errors.items()))
            print(f"{'':34} errors: {kinds}", file=out)


def _check_bounds(concurrency: int, duration_s: float | None, count: int | None, warmup_s: float) -> None:
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be 1..{MAX_CONCURRENCY}")
    if duration_s is None and count is None:
        raise ValueError("give duration_s, count, or both")
    if duration_s is not None and not 0 < duration_s <= MAX_SECONDS:
        raise ValueError(f"duration_s must be in (0, {MAX_SECONDS:g}]")
    if count is not None and not 1 <= count <= MAX_CALLS:
        raise ValueError(f"count must be 1..{MAX_CALLS}")
    if not 0 <= warmup_s <= MAX_SECONDS:
        raise ValueError(f"warmup_s must be in [0, {MAX_SECONDS:g}]")


# -- building requests ------------------------------------------------------------------------------

_HEADER_SAFE = frozenset(chr(c) for c in range(0x21, 0x7F))


def header_value(value: str) -> str:
    """A 2026-07-28 `Mcp-Name` value: as is when plain visible ASCII, else the Base64 sentinel form."""
    sentinel = value.startswith("=?base64?") and value.endswith("?=")
    if value and not sentinel and set(value) <= _HEADER_SAFE:
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def _envelope() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "maitre-loadgen", "version": "1"},
    }


class _RequestBuilder:
    """Pre-encodes everything but the id and the unique value, so a call costs one join."""

    def __init__(self, target: Target) -> None:
        parts = urlsplit(target.url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"plain http:// URLs only: {target.url!r}")
        if target.protocol not in (LEGACY, MODERN):
            raise ValueError(f"protocol must be {LEGACY} or {MODERN}")
        if target.argument in target.arguments:
            raise ValueError(f"{target.argument!r} is the unique argument; leave it out of arguments")
        if target.session and target.protocol != LEGACY:
            raise ValueError("sessions are a 2025-11-25 thing; 2026-07-28 is stateless")
        self.session = target.session
        self.host = parts.hostname
        self.port = parts.port or 80
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        marker_id, marker_value = 918273645, "\x00UNIQUE\x00"
        params: dict[str, Any] = {
            "name": target.tool,
            "arguments": {**target.arguments, target.argument: marker_value},
        }
        if target.protocol == MODERN:
            params["_meta"] = _envelope()
        body = json.dumps(
            {"jsonrpc": "2.0", "id": marker_id, "method": "tools/call", "params": params},
            separators=(",", ":"),
        )
        head_id, rest = body.split(str(marker_id), 1)
        mid, tail = rest.split(json.dumps(marker_value), 1)
        self._body = (head_id.encode(), mid.encode(), tail.encode())
        headers = [
            f"POST {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",  # with the port: the SDK's DNS-rebinding guard wants it
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"MCP-Protocol-Version: {target.protocol}",
        ]
        if target.protocol == MODERN:
            headers += ["Mcp-Method: tools/call", f"Mcp-Name: {header_value(target.tool)}"]
        if target.token:
            headers.append(f"Authorization: Bearer {target.token}")
        self._head_base = "\r\n".join(headers) + "\r\n"
        self.head = self.head_for("")

    def head_for(self, session_id: str) -> bytes:
        """The request head up to `Content-Length: `, with the session's header when there is one."""
        session = f"Mcp-Session-Id: {session_id}\r\n" if session_id else ""
        return (self._head_base + session + "Content-Length: ").encode()

    def build(self, call_id: int, value: str, head: bytes | None = None) -> bytes:
        """The full request for one call; `value` must be JSON-safe ASCII (the generator's own ids are)."""
        head_id, mid, tail = self._body
        body = b"".join((head_id, str(call_id).encode(), mid, b'"', value.encode(), b'"', tail))
        return b"".join((head or self.head, str(len(body)).encode(), b"\r\n\r\n", body))

    @staticmethod
    def message(head: bytes, message: dict[str, Any]) -> bytes:
        body = json.dumps(message, separators=(",", ":")).encode()
        return b"".join((head, str(len(body)).encode(), b"\r\n\r\n", body))

    async def open_session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """`initialize` + `notifications/initialized` on this connection; the head to send calls with."""
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "maitre-loadgen", "version": "1"},
            },
        }
        writer.write(self.message(self.head, init))
        status, headers, body = await _read_answer(reader)
        if status != 200:
            raise _Failed(f"initialize_http_{status}")
        answer = _message(headers, body, 0)
        if not isinstance(answer, dict) or "result" not in answer:
            raise _Failed("initialize_error")
        head = self.head_for(headers.get(b"mcp-session-id", b"").decode("ascii", "replace"))
        writer.write(self.message(head, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
        status, _, _ = await _read_answer(reader)
        if status not in (200, 202):
            raise _Failed(f"initialized_http_{status}")
        return head


# -- reading and judging answers --------------------------------------------------------------------


class _Failed(Exception):
    """A call that got an answer, but not a good one; `kind` is how it is counted."""

    def __init__(self, kind: str, *, reconnect: bool = False) -> None:
        super().__init__(kind)
        self.kind = kind
        self.reconnect = reconnect


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    """One HTTP/1.1 response: status, lower-cased headers, body (Content-Length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head[:-4].split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise _Failed("bad_http", reconnect=True) from None
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        key, _, value = line.partition(b":")
        headers[key.strip().lower()] = value.strip()
    length = headers.get(b"content-length")
    if length is not None:
        body = await reader.readexactly(int(length))
    elif headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            chunks.append(chunk[:-2])
        body = b"".join(chunks)
    else:
        body = await reader.read()  # no length: the body runs to the connection's close
        headers[b"connection"] = b"close"
    return status, headers, body


def _message(headers: dict[bytes, bytes], body: bytes, call_id: int) -> Any:
    """The JSON-RPC answer to `call_id` in a JSON or an SSE body."""
    if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
        for line in body.split(b"\n"):
            if line.startswith(b"data:"):
                with contextlib.suppress(ValueError):
                    frame = json.loads(line[5:])
                    if isinstance(frame, dict) and frame.get("id") == call_id:
                        return frame
        raise _Failed("no_answer")
    try:
        return json.loads(body)
    except ValueError:
        raise _Failed("bad_json") from None


def _judge(status: int, headers: dict[bytes, bytes], body: bytes, call_id: int, value: str) -> None:
    """Raise `_Failed` unless this is an OK answer to this call."""
    if status != 200:
        raise _Failed(f"http_{status}")
    message = _message(headers, body, call_id)
    if not isinstance(message, dict):
        raise _Failed("bad_json")
    if "error" in message:
        code = message["error"].get("code") if isinstance(message["error"], dict) else None
        raise _Failed(f"jsonrpc_{code}")
    if message.get("id") != call_id:
        raise _Failed("wrong_id")
    result = message.get("result")
    if not isinstance(result, dict):
        raise _Failed("no_result")
    if result.get("isError"):
        raise _Failed("tool_error")
    if result.get("resultType", "complete") != "complete":
        raise _Failed(f"result_{result.get('resultType')}")
    if value.encode() not in body:
        raise _Failed("not_echoed")


# -- the closed loop ------------------------------------------------------------------------------


@dataclass
class _Window:
    """Shared state of one run: the clock, the call budget, what was counted."""

    warm_end: float
    deadline: float
    count: int | None
    started: int = 0
    last_end: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def admit(self, now: float) -> bool | None:
        """None: stop; False: a warm-up call; True: a counted call (and it is taken from the budget)."""
        if now >= self.deadline:
            return None
        if now < self.warm_end:
            return False
        if self.count is not None:
            if self.started >= self.count:
                return None
            self.started += 1
        return True


async def _worker(index: int, builder: _RequestBuilder, window: _Window, timeout_s: float) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    head: bytes | None = None if builder.session else builder.head  # None: open a session first
    seq = 0
    try:
        while True:
            start = time.perf_counter()
            counted = window.admit(start)
            if counted is None:
                return
            seq += 1
            call_id = index * 100_000_000 + seq
            value = f"lg-{index}-{seq}."  # the dot ends it: "lg-1-1." is not inside "lg-1-12."
            kind: str | None = None
            try:
                async with asyncio.timeout(timeout_s):
                    if writer is None:
                        try:
                            reader, writer = await asyncio.open_connection(
                                builder.host, builder.port, limit=_READ_LIMIT
                            )
                        except OSError:
                            raise _Failed("connect") from None
                    assert reader is not None
                    if head is None:
                        head = await builder.open_session(reader, writer)
                    writer.write(builder.build(call_id, value, head))
                    status, headers, body = await _read_answer(reader)
                if headers.get(b"connection", b"").lower() == b"close":
                    writer.close()
                    writer = None
                if status == 404 and builder.session:
                    head = None  # the server forgot the session: open a new one next call
                _judge(status, headers, body, call_id, value)
            except _Failed as failed:
                kind = failed.kind
                if failed.reconnect and writer is not None:
                    writer.close()
                    writer = None
            except TimeoutError:
                kind = "timeout"
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                kind = "disconnect"
            except ValueError:  # a Content-Length or chunk size that is not a number
                kind = "bad_http"
            if kind in ("timeout", "disconnect", "bad_http") and writer is not None:
                writer.close()  # the connection's state is unknown: start a fresh one
                writer = None
            end = time.perf_counter()
            if counted:
                window.last_end = max(window.last_end, end)
                if kind is None:
                    window.latencies.append((end - start) * 1000.0)
                else:
                    window.errors[kind] += 1
            if kind == "connect":
                await asyncio.sleep(0.05)  # do not spin on a refused port
    finally:
        if writer is not None:
            writer.close()


async def run_load(
    target: Target,
    *,
    concurrency: int = 8,
    duration_s: float | None = 10.0,
    count: int | None = None,
    warmup_s: float = 1.0,
    timeout_s: float = 10.0,
) -> LoadResult:
    """Load `target` with `concurrency` closed-loop workers; see the module docstring for the method."""
    _check_bounds(concurrency, duration_s, count, warmup_s)
    builder = _RequestBuilder(target)
    before = loadavg()
    cpu0 = time.process_time()
    now = time.perf_counter()
    warm_end = now + warmup_s
    window = _Window(warm_end=warm_end, deadline=warm_end + (duration_s or MAX_SECONDS), count=count)
    workers = [asyncio.create_task(_worker(i, builder, window, timeout_s)) for i in range(concurrency)]
    if warmup_s:
        await asyncio.sleep(warmup_s)
    cpu_window = time.process_time()
    await asyncio.gather(*workers)
    cpu1 = time.process_time()
    seconds = (window.last_end - warm_end) if window.last_end > warm_end else (duration_s or 0.0)
    ordered = sorted(window.latencies)
    return LoadResult(
        name=target.label,
        generator="asyncio",
        protocol=target.protocol,
        concurrency=concurrency,
        seconds=seconds,
        ok=len(ordered),
        errors=dict(window.errors),
        p50_ms=_percentile(ordered, 0.50),
        p90_ms=_percentile(ordered, 0.90),
        p99_ms=_percentile(ordered, 0.99),
        max_ms=ordered[-1] if ordered else float("nan"),
        client_cpu_s=cpu1 - (cpu_window if warmup_s else cpu0),
        loadavg_before=before,
        loadavg_after=loadavg(),
        latencies_ms=ordered,
    )


def combine(results: list[LoadResult], *, name: str | None = None) -> LoadResult:
    """One row from several windows of the same target (e.g. rounds interleaved with other targets).

    Counts, errors, seconds and CPU add up; percentiles are recomputed from all the latencies, so
    only results of this module's generator combine (wrk's percentiles cannot be merged).
    """
    if not results:
        raise ValueError("nothing to combine")
    if any(r.generator != "asyncio" for r in results):
        raise ValueError("only asyncio results keep their latencies; wrk percentiles cannot be merged")
    ordered = sorted(x for r in results for x in r.latencies_ms)
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r.errors)
    first = results[0]
    return LoadResult(
        name=name or first.name,
        generator=first.generator,
        protocol=first.protocol,
        concurrency=first.concurrency,
        seconds=sum(r.seconds for r in results),
        ok=sum(r.ok for r in results),
        errors=dict(errors),
        p50_ms=_percentile(ordered, 0.50),
        p90_ms=_percentile(ordered, 0.90),
        p99_ms=_percentile(ordered, 0.99),
        max_ms=ordered[-1] if ordered else float("nan"),
        client_cpu_s=sum(r.client_cpu_s for r in results),
        loadavg_before=first.loadavg_before,
        loadavg_after=results[-1].loadavg_after,
        latencies_ms=ordered,
    )


async def _call_once(target: Target, timeout_s: float) -> str | None:
    builder = _RequestBuilder(target)
    value = "lg-probe-1"
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(builder.host, builder.port, limit=_READ_LIMIT)
            try:
                head = await builder.open_session(reader, writer) if builder.session else builder.head
                writer.write(builder.build(1, value, head))
                status, headers, body = await _read_answer(reader)
            finally:
                writer.close()
        _judge(status, headers, body, 1, value)
    except _Failed as failed:
        return failed.kind
    except TimeoutError:
        return "timeout"
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def call_once(target: Target, *, timeout_s: float = 30.0) -> str | None:
    """One call judged like the load's: None if OK, else what was wrong (for start-up checks).

    Usable from sync code and from inside a running event loop (it then runs in its own thread).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_call_once(target, timeout_s))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _call_once(target, timeout_s)).result()


# -- wrk ------------------------------------------------------------------------------------------

_WRK_LUA = r"""
-- Built by benchmarks/_loadgen.py. Env: TOOL, ARG, PROTOCOL, TOKEN (optional), EXTRA (a JSON
-- object fragment of fixed arguments, e.g. '"a":1,'), MCP_NAME (the Mcp-Name header value).
local tool = os.getenv("TOOL")
local arg = os.getenv("ARG")
local protocol = os.getenv("PROTOCOL")
local token = os.getenv("TOKEN")
local extra = os.getenv("EXTRA") or ""
local meta = ""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = protocol
if protocol == "2026-07-28" then
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = os.getenv("MCP_NAME")
  meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
    '"io.modelcontextprotocol/clientCapabilities":{},' ..
    '"io.modelcontextprotocol/clientInfo":{"name":"maitre-loadgen-wrk","version":"1"}}'
end
if token and #token > 0 then wrk.headers["Authorization"] = "Bearer " .. token end

local threads = {}
local next_thread = 0
function setup(thread)
  next_thread = next_thread + 1
  thread:set("tid", next_thread)
  table.insert(threads, thread)
end

function init(args)
  n = 0
  bad = 0
end

function request()
  n = n + 1
  return wrk.format(nil, nil, nil, string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{%s"%s":"wrk-%d-%d"}%s}}',
    n, tool, extra, arg, tid, n, meta))
end

function response(status, headers, body)
  if status == 200 and not (body:find('"isError"%s*:%s*false') and body:find('wrk%-%d+%-%d+')) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local bad_total = 0
  for _, t in ipairs(threads) do bad_total = bad_total + t:get("bad") end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"duration_us":%d,"requests":%d,"connect":%d,"read":%d,"write":%d,"status":%d,' ..
    '"timeout":%d,"bad_body":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.duration, summary.requests, e.connect, e.read, e.write, e.status, e.timeout, bad_total,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""


def wrk_available() -> str | None:
    """The path of `wrk`, or None (install it with `apt-get install -y wrk`)."""
    return shutil.which("wrk")


def _wrk_once(
    target: Target, *, concurrency: int, seconds: int, threads: int, timeout_s: float, script: str
) -> dict[str, int]:
    """Run wrk once; returns the summary its Lua `done()` printed."""
    wrk = wrk_available()
    if wrk is None:
        raise RuntimeError("wrk is not installed (apt-get install -y wrk)")
    extra = "".join(
        f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}," for k, v in target.arguments.items()
    )
    env = {
        **os.environ,
        "TOOL": target.tool,
        "ARG": target.argument,
        "PROTOCOL": target.protocol,
        "TOKEN": target.token or "",
        "EXTRA": extra,
        "MCP_NAME": header_value(target.tool),
    }
    args = [
        wrk,
        f"-t{threads}",
        f"-c{concurrency}",
        f"-d{seconds}s",
        f"--timeout={max(1, math.ceil(timeout_s))}s",
        "-s",
        script,
        target.url,
    ]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        out, err = proc.communicate(timeout=seconds + timeout_s + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError("wrk did not finish in time") from None
    # communicate() reaped wrk; its CPU shows in RUSAGE_CHILDREN, read by the caller around this call.
    for line in out.decode(errors="replace").splitlines():
        if line.startswith("WRKJSON "):
            summary: dict[str, int] = json.loads(line[len("WRKJSON ") :])
            return summary
    raise RuntimeError(
        f"wrk gave no summary (exit {proc.returncode}): {err.decode(errors='replace').strip()[:300]}"
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(
    target: Target,
    *,
    concurrency: int = 8,
    duration_s: float = 10.0,
    warmup_s: float = 1.0,
    threads: int = 2,
    timeout_s: float = 10.0,
) -> LoadResult:
    """Load `target` with wrk (a separate warm-up run, then the measured one; whole seconds)."""
    _check_bounds(concurrency, duration_s, None, warmup_s)
    threads = max(1, min(threads, concurrency))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="loadgen-") as script:
        script.write(_WRK_LUA)
        script.flush()
        if warmup_s > 0:
            _wrk_once(
                target,
                concurrency=concurrency,
                seconds=max(1, round(warmup_s)),
                threads=threads,
                timeout_s=timeout_s,
                script=script.name,
            )
        before = loadavg()
        cpu0 = _children_cpu()
        summary = _wrk_once(
            target,
            concurrency=concurrency,
            seconds=max(1, round(duration_s)),
            threads=threads,
            timeout_s=timeout_s,
            script=script.name,
        )
        cpu = _children_cpu() - cpu0
    errors = {
        kind: summary[key]
        for kind, key in (
            ("http_non2xx", "status"),
            ("bad_body", "bad_body"),
            ("connect", "connect"),
            ("read", "read"),
            ("write", "write"),
            ("timeout", "timeout"),
        )
        if summary[key]
    }
    ok = max(0, summary["requests"] - summary["status"] - summary["bad_body"])
    return LoadResult(
        name=target.label,
        generator="wrk",
        protocol=target.protocol,
        concurrency=concurrency,
        seconds=summary["duration_us"] / 1e6,
        ok=ok,
        errors=errors,
        p50_ms=summary["p50_us"] / 1000,
        p90_ms=summary["p90_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        max_ms=summary["max_us"] / 1000,
        client_cpu_s=cpu,
        loadavg_before=before,
        loadavg_after=loadavg(),
    )


# -- self-test ------------------------------------------------------------------------------------


def _self_test() -> int:
    """Against the echo upstream: OK calls counted for both protocols and wrk, failures counted as such."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _echo_upstream import echo_upstream

    failures: list[str] = []

    def expect(what: str, condition: bool) -> None:
        print(f"  {'ok  ' if condition else 'FAIL'} {what}", file=sys.stderr)
        if not condition:
            failures.append(what)

    results: list[LoadResult] = []
    with echo_upstream("up1", decoy=True) as url:
        expect("one call works", call_once(Target(url=url)) is None)
        expect(
            "a decoy that does not echo is refused", call_once(Target(url=url, tool="fixed")) == "not_echoed"
        )
        for protocol in (LEGACY, MODERN):
            r = asyncio.run(
                run_load(
                    Target(url=url, protocol=protocol, name=f"echo {protocol}"), duration_s=3, warmup_s=0.5
                )
            )
            results.append(r)
            expect(f"{protocol}: all calls OK ({r.ok} ok, {r.errors})", r.ok > 100 and not r.errors)
            expect(f"{protocol}: percentiles ordered", r.p50_ms <= r.p90_ms <= r.p99_ms <= r.max_ms)
        r = asyncio.run(
            run_load(Target(url=url, name="echo count=500"), count=500, duration_s=None, warmup_s=0)
        )
        results.append(r)
        expect(f"count bound: exactly 500 calls ({r.calls})", r.calls == 500 and r.ok == 500)
        both, (a, b) = combine(results[:2], name="both protocols"), results[:2]
        expect(
            f"combine: counts add up, p50 from all latencies ({a.p50_ms:.2f} / {b.p50_ms:.2f} -> {both.p50_ms:.2f})",
            both.ok == a.ok + b.ok
            and len(both.latencies_ms) == both.ok
            and min(a.p50_ms, b.p50_ms) <= both.p50_ms <= max(a.p50_ms, b.p50_ms),
        )
        r = asyncio.run(
            run_load(Target(url=url, tool="fixed", name="decoy (must fail)"), duration_s=1, warmup_s=0)
        )
        results.append(r)
        expect(f"decoy: every call not_echoed ({r.errors})", r.ok == 0 and r.errors.get("not_echoed", 0) > 0)
        r = asyncio.run(run_load(Target(url=url, tool="nope", name="unknown tool"), duration_s=1, warmup_s=0))
        results.append(r)
        expect(f"unknown tool: no OK call ({r.errors})", r.ok == 0 and r.calls > 0)
        r = asyncio.run(run_load(Target(url=url + "x", name="wrong path"), duration_s=1, warmup_s=0))
        results.append(r)
        expect(f"wrong path: http_404 ({r.errors})", r.ok == 0 and r.errors.get("http_404", 0) > 0)
        if wrk_available():
            for protocol in (LEGACY, MODERN):
                r = run_wrk(
                    Target(url=url, protocol=protocol, name=f"echo {protocol}"), duration_s=3, warmup_s=1
                )
                results.append(r)
                expect(f"wrk {protocol}: all OK ({r.ok} ok, {r.errors})", r.ok > 100 and not r.errors)
            r = run_wrk(Target(url=url, tool="fixed", name="decoy (must fail)"), duration_s=1, warmup_s=0)
            results.append(r)
            expect(
                f"wrk decoy: bad bodies counted ({r.errors})", r.ok == 0 and r.errors.get("bad_body", 0) > 0
            )
        else:
            print("  skip wrk: not installed (apt-get install -y wrk)", file=sys.stderr)
    with echo_upstream("up2", stateful=True) as url2:
        expect("stateful server: a sessionless call is refused", call_once(Target(url=url2)) == "http_400")
        expect(
            "stateful server: a call in a session works", call_once(Target(url=url2, session=True)) is None
        )
        r = asyncio.run(run_load(Target(url=url2, session=True, name="stateful, sessions"), duration_s=2))
        results.append(r)
        expect(f"stateful server: every session call OK ({r.ok} ok, {r.errors})", r.ok > 50 and not r.errors)
    port = int(urlsplit(url).port or 0)
    r = asyncio.run(
        run_load(Target(url=f"http://127.0.0.1:{port}/mcp", name="closed port"), duration_s=0.5, warmup_s=0)
    )
    results.append(r)
    expect(f"closed port: connect errors ({r.errors})", r.ok == 0 and r.errors.get("connect", 0) > 0)
    print_results(results)
    print(f"load average: {loadavg()}")
    print("self-test:", "FAILED " + "; ".join(failures) if failures else "passed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_self_test())
