"""Import another MCP server's tools as namespaced, untrusted, pinned and scanned maitre tools.

`toolbox_from_mcp(target, namespace="weather")` connects with the official SDK client (2026-07-28
with a fall back to 2025-11-25: `mode="auto"`), lists the tools, and admits each as
`Tool.from_schema(name="weather.<tool>", trust="untrusted", source="mcp:weather", ...)`, so the
gate's policy, approval, budgets, taint and audit apply to them like to any other tool.

Before a tool is admitted:

- **Pinned?** With a lockfile, a tool whose whole definition (RFC 8785 hash) differs from its pin,
  or that was never pinned, is kept out and the drift is reported with a diff.
- **Scanned.** With `scan="block"` (default), a tool with a high-severity finding (hidden
  instructions, invisible or confusable Unicode, references to another server's tools, shadowing a
  name another server owns) is kept out; `scan="warn"` only reports.
- **Closed.** Arguments are validated against the pinned `inputSchema` made closed
  (`pinning.closed_schema`): a property the pin does not declare is INVALID_ARGUMENTS and never
  reaches the upstream; an object the upstream declares open (a free-form map) stays open.
- **Annotated.** MCP annotations are the server's *claims*, pinned with the rest of the definition
  so a later flip is drift. They lower policy only for a server the operator marks trusted
  (`trust_annotations=True`): then `readOnlyHint` → effect read, `destructiveHint` (default true)
  → destructive/high risk, else write/medium, `openWorldHint` (default true) → open world.
  Without it every imported tool gets the spec's defaults for absent hints (destructive, high
  risk, open world, not idempotent), so a hostile `readOnlyHint: true` cannot skip approval; the
  claims are kept in `ImportReport.ignored_hints`. The host may override any of it per tool
  (`overrides=`).
- **Addressed.** HTTP targets go through `egress.AddressGuard`: loopback, private, link-local and
  metadata addresses are refused before any socket opens unless allowed (`allow_loopback=True`
  for a local development server, `allowed_hosts=[...]`).
- **Bounded.** One upstream response may be at most `max_response_bytes` (default 4 MiB,
  `egress.DEFAULT_MAX_RESPONSE_BYTES`): an HTTP JSON body is cut off while it is read and one SSE
  event is bounded by the SDK before parsing; over stdio the SDK reads a whole line before maitre
  sees it, so there the cap applies to the parsed result. Either way the call is BUDGET_EXCEEDED.

Held to the pin while connected: a tool whose definition drifts after import (changed or no longer
offered) is taken out of the toolbox at once and refused at call time, and the field-by-field diff
(as `maitre mcp check` prints it) is logged as a warning (stderr unless logging is configured).
Drift is looked for when the upstream says its tool list changed (`notifications/tools/list_changed`
on 2025-11-25 sessions, a `subscriptions/listen` stream on 2026-07-28 ones, both inside
`async with McpUpstream(...)`), and every `recheck_interval_s` (default 300 s; `None` turns it
off): in the background inside `async with`, and before a call whose last check is older.

No token passthrough: the connection to the upstream carries only the `headers` the host
configured for *that* server; a schema tool's handler receives only the validated arguments, so
the caller's own credentials cannot reach an upstream server.

Connections: inside `async with McpUpstream(...) as up:` one session is kept open and shared; the
plain `toolbox_from_mcp` opens a short session per call (cheap over stateless 2026-07-28 HTTP; a
stdio server is spawned per call, so prefer the context manager there).
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, ToolsListChanged
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp import Client, StdioServerParameters

from ..exceptions import ToolDefinitionError, UserError
from ..tools import Tool, Toolbox
from ..types import ToolError
from .egress import (
    DEFAULT_MAX_RESPONSE_BYTES,
    OVERSIZE_MARKER,
    AddressGuard,
    AddressRefused,
    _hooks,
)
from .pinning import DriftReport, Lockfile, check_drift, closed_schema
from .scanner import Finding, scan_servers

__all__ = [
    "DEFAULT_RECHECK_INTERVAL_S",
    "ImportReport",
    "McpUpstream",
    "Target",
    "http_transport",
    "policy_from_annotations",
    "toolbox_from_mcp",
]

logger = logging.getLogger("maitre.mcp.client")

Target = str | StdioServerParameters
"""A Streamable HTTP URL, a command line (`"node server.js stdio"`), or stdio parameters."""

DEFAULT_RECHECK_INTERVAL_S = 300.0
"""How old (seconds) the last look at an upstream's definitions may be before a call looks again."""

_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_SSE_OVERSIZE = "byte limit"


@dataclass(kw_only=True)
class ImportReport:
    """What happened when a server's tools were imported."""

    server: str
    """The namespace the server was imported under."""
    offered: list[str] = field(default_factory=list)
    imported: list[str] = field(default_factory=list)
    """Canonical names now in the toolbox."""
    blocked: dict[str, str] = field(default_factory=dict)
    """Upstream tool name → why it was kept out."""
    drift: DriftReport | None = None
    findings: list[Finding] = field(default_factory=list)
    ignored_hints: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Upstream tool name → the annotation hints not applied (the server is not trusted)."""
    withdrawn: dict[str, str] = field(default_factory=dict)
    """Upstream tool name → why it was taken out after import (its definition drifted)."""

    def render(self) -> str:
        lines = [f"{self.server}: {len(self.imported)} of {len(self.offered)} tool(s) imported"]
        lines += [f"  kept out {name}: {why}" for name, why in sorted(self.blocked.items())]
        lines += [f"  withdrawn {name}: {why}" for name, why in sorted(self.withdrawn.items())]
        lines += ["  " + f.render() for f in self.findings]
        if self.drift is not None and not self.drift.clean:
            lines += ["", self.drift.render()]
        return "\n".join(lines)


def policy_from_annotations(annotations: Mapping[str, Any] | None) -> dict[str, Any]:
    """Tool metadata from MCP annotations, read with the spec's defaults (conservative)."""
    ann = dict(annotations or {})
    read_only = ann.get("readOnlyHint") is True
    destructive = not read_only and ann.get("destructiveHint", True) is not False
    effect = "read" if read_only else ("destructive" if destructive else "write")
    return {
        "effect": effect,
        "risk": {"read": "low", "write": "medium", "destructive": "high"}[effect],
        "open_world": ann.get("openWorldHint", True) is not False,
        "idempotent": read_only or ann.get("idempotentHint") is True,
    }


def _stdio(target: str) -> StdioServerParameters:
    parts = shlex.split(target)
    if not parts:
        raise UserError("empty MCP server command")
    return StdioServerParameters(command=parts[0], args=parts[1:])


class McpUpstream:
    """One other MCP server, and the tools maitre imports from it.

    Args:
        target: URL, command line, or `StdioServerParameters`.
        namespace: prefix of the imported names (`weather.get_forecast`); also the lockfile key.
        lockfile: path or `Lockfile`; when given, only pinned, unchanged tools are imported.
        headers: HTTP headers for *this* upstream (its own credentials), never the caller's.
        auth: an `httpx2.Auth` for *this* upstream's HTTP transport (an OAuth client flow, see
            `maitre.mcp.upstream_auth`); like `headers`, it is the upstream's credential, never
            the caller's. Ignored for a stdio target.
        scan: "block" (high findings keep a tool out), "warn" (report only) or "off".
        peers: other servers' wire definitions (`{namespace: [tool, ...]}`), for shadowing checks.
        overrides: per upstream tool name, metadata that replaces what annotations suggest.
        trust_annotations: the operator trusts this server's annotations to *lower* policy
            (`readOnlyHint: true` → a read that runs without approval). Default False: every
            imported tool is destructive, high risk, open world, whatever it claims.
        allow_loopback: allow an HTTP target on 127.0.0.0/8 or ::1 (a local development server,
            tests). Default False.
        allowed_hosts: host names, addresses or networks (`"10.20.0.0/16"`) allowed although
            private or link-local; a metadata address must be listed by itself.
        max_response_bytes: the most one upstream response may be (default 4 MiB); larger is
            BUDGET_EXCEEDED.
        recheck_interval_s: look at the upstream's definitions again when the last look is older
            than this (default 300 s); a drifted tool is withdrawn. None: only on list_changed.
        mode: the SDK client's negotiation mode ("auto", "legacy" or "2026-07-28").
        timeout_s: read timeout of upstream requests.
    """

    def __init__(
        self,
        target: Target,
        *,
        namespace: str,
        lockfile: str | PathLike[str] | Lockfile | None = None,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        scan: Literal["block", "warn", "off"] = "block",
        peers: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        trust_annotations: bool = False,
        allow_loopback: bool = False,
        allowed_hosts: Iterable[str] = (),
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        recheck_interval_s: float | None = DEFAULT_RECHECK_INTERVAL_S,
        mode: str = "auto",
        timeout_s: float = 30.0,
    ) -> None:
        self.target: Target = _stdio(target) if isinstance(target, str) and "://" not in target else target
        self.namespace = namespace
        self.lockfile = Lockfile.load(lockfile) if isinstance(lockfile, str | PathLike) else lockfile
        self.headers = dict(headers or {})
        self.auth = auth
        self.scan = scan
        self.peers = {k: list(v) for k, v in (peers or {}).items()}
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}
        self.trust_annotations = trust_annotations
        self.guard = AddressGuard.of(allow_loopback=allow_loopback, allowed_hosts=allowed_hosts)
        if max_response_bytes < 1024:
            raise UserError("max_response_bytes must be at least 1024")
        self.max_response_bytes = max_response_bytes
        self.recheck_interval_s = recheck_interval_s
        self.mode = mode
        self.timeout_s = timeout_s
        self.report = ImportReport(server=namespace)
        self._client: Client | None = None
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._listening = False
        self._box: Toolbox | None = None
        self._admitted: dict[str, dict[str, Any]] = {}
        """Upstream name → the definition it was admitted with (the pin this session holds it to)."""
        self._withdrawn: dict[str, str] = {}
        self._checked_at = 0.0
        self._stale = False
        self._recheck_lock = anyio.Lock()

    # -- connections ----------------------------------------------------------------------------

    def _new_client(self) -> Client:
        if isinstance(self.target, StdioServerParameters):
            server: Any = self.target
        else:
            server = _guarded_transport(
                self.target,
                self.headers,
                auth=self.auth,
                guard=self.guard,
                max_response_bytes=self.max_response_bytes,
            )
        return Client(
            server,
            mode=self.mode,
            read_timeout_seconds=self.timeout_s,
            cache=None,
            message_handler=self._on_message,
        )

    async def _check_target(self) -> None:
        """Refuse a non-public HTTP target before anything connects (stdio is a local process)."""
        if isinstance(self.target, str):
            await self.guard.check_url(self.target)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """The open shared session, or a fresh one for the duration of the block."""
        if self._client is not None:
            yield self._client
            return
        await self._check_target()
        async with self._new_client() as client:
            yield client

    async def __aenter__(self) -> McpUpstream:
        await self._check_target()
        stack = AsyncExitStack()
        try:
            self._client = await stack.enter_async_context(self._new_client())
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            self._tg = tg
            await tg.start(self._listen)
            if self.recheck_interval_s is not None:
                tg.start_soon(self._periodic, self.recheck_interval_s)
        except BaseException:
            self._client = self._tg = None
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: Any) -> None:
        stack, self._stack, self._client, self._tg = self._stack, None, None, None
        self._listening = False
        if stack is not None:
            await stack.aclose()

    # -- watching for drift -------------------------------------------------------------------------

    async def _listen(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """On a 2026-07-28 session, re-check whenever the upstream says its tool list changed."""
        client = self._client
        assert client is not None
        started = False
        while True:
            try:
                async with client.listen(tools_list_changed=True) as sub:
                    self._listening = True
                    if not started:
                        started = True
                        task_status.started()
                    async for event in sub:
                        if isinstance(event, ToolsListChanged):
                            await self._recheck_logged()
            except ListenNotSupportedError:
                break  # a 2025-11-25 session: notifications arrive through `_on_message`
            except Exception as exc:
                logger.info("MCP upstream %s: list-changed stream ended (%s)", self.namespace, exc)
            self._listening = False
            self._stale = True
            if not started:
                break
            await anyio.sleep(5.0)
        if not started:
            task_status.started()

    async def _periodic(self, interval: float) -> None:
        while True:
            await anyio.sleep(max(interval, 0.05))
            await self._recheck_logged()

    async def _on_message(self, message: Any) -> None:
        """The 2025-11-25 `notifications/tools/list_changed`: re-check now, or before the next call."""
        if not isinstance(message, types.ToolListChangedNotification) or self._listening:
            return
        self._stale = True
        if self._tg is not None:
            self._tg.start_soon(self._recheck_logged)

    async def _recheck_logged(self) -> None:
        try:
            await self.recheck()
        except Exception as exc:
            self._stale = True
            logger.warning("MCP upstream %s: re-check failed (%s)", self.namespace, type(exc).__name__)

    async def recheck(self, client: Client | None = None) -> list[str]:
        """Compare what the upstream offers now with what was admitted; withdraw what drifted.

        Returns the upstream names withdrawn by this check.
        """
        async with self._recheck_lock:
            if client is None:
                async with self.session() as own:
                    offered = await self._list(own)
            else:
                offered = await self._list(client)
            self._checked_at = time.monotonic()
            self._stale = False
            admitted = {n: d for n, d in self._admitted.items() if n not in self._withdrawn}
            if not admitted:
                return []
            held = Lockfile(Path("(admitted)"))
            held.pin(self.namespace, admitted.values())
            report = check_drift(self.namespace, offered, held)
            drifted = [d for d in report.drift if d.kind != "added" and d.name in admitted]
            for drift in drifted:
                self._withdraw(drift.name, drift.describe())
            if drifted:
                shown = DriftReport(server=self.namespace, admitted=report.admitted, drift=drifted)
                logger.warning(
                    "MCP upstream %s drifted since import; withdrawn until re-pinned:\n%s",
                    self.namespace,
                    shown.render(),
                )
            return [d.name for d in drifted]

    def _withdraw(self, name: str, why: str) -> None:
        self._withdrawn[name] = why
        self.report.withdrawn[name] = why
        canonical = f"{self.namespace}.{name}"
        if self._box is not None and canonical in self._box.names():
            self._box.remove(canonical)

    def _due(self) -> bool:
        if self._stale:
            return True
        interval = self.recheck_interval_s
        return interval is not None and time.monotonic() - self._checked_at >= interval

    # -- listing and importing --------------------------------------------------------------------

    async def _list(self, client: Client) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def definitions(self) -> list[dict[str, Any]]:
        """The upstream's tool definitions, wire-shaped (camelCase), in the server's order."""
        async with self.session() as client:
            return await self._list(client)

    async def toolbox(self, into: Toolbox | None = None) -> Toolbox:
        """Import the admitted tools into `into` (or a new toolbox) and return it."""
        box = into if into is not None else Toolbox()
        offered = await self.definitions()
        self._checked_at = time.monotonic()
        report = ImportReport(server=self.namespace, offered=[str(t["name"]) for t in offered])
        pins: dict[str, dict[str, Any]] = {}
        if self.lockfile is not None:
            pins = self.lockfile.pins(self.namespace)
            report.drift = check_drift(self.namespace, offered, self.lockfile)
            for drift in report.drift.drift:
                if drift.kind != "removed":
                    report.blocked[drift.name] = f"not pinned as offered ({drift.describe()})"
        if self.scan != "off":
            peers = dict(self.peers)
            for tool in box:
                if tool.namespace and tool.namespace != self.namespace:
                    peers.setdefault(tool.namespace, []).append({"name": tool.base_name})
            findings = scan_servers({**peers, self.namespace: offered})
            report.findings = [f for f in findings if f.server == self.namespace]
            if self.scan == "block":
                for finding in report.findings:
                    if finding.severity == "high":
                        report.blocked.setdefault(
                            finding.tool, f"scanner: {finding.message} at {finding.path}"
                        )
        self.report = report
        for definition in offered:
            name = str(definition["name"])
            if name in report.blocked:
                continue
            # With a lockfile the hash matched, so the pinned definition is the one offered.
            held = (pins.get(name) or {}).get("definition") or definition
            try:
                tool = self._to_tool(held)
                box.add(tool)
            except (ToolDefinitionError, UserError) as exc:
                report.blocked[name] = str(exc)
                continue
            report.imported.append(tool.name)
            self._admitted[name] = dict(held)
            self._withdrawn.pop(name, None)
        if report.blocked:
            logger.warning("MCP import %s:\n%s", self.namespace, report.render())
        self._box = box
        return box

    def _policy(self, name: str, annotations: Mapping[str, Any]) -> dict[str, Any]:
        """Policy metadata: from the annotations only for a trusted server, else the spec's defaults."""
        if self.trust_annotations:
            return {**policy_from_annotations(annotations), "annotations": dict(annotations)}
        claims = {k: v for k, v in annotations.items() if k in _HINTS}
        if claims:
            self.report.ignored_hints[name] = claims
        # Absent hints read as the most cautious (destructive, open world): no claim can lower that.
        kept = {k: v for k, v in annotations.items() if k not in _HINTS}
        return {**policy_from_annotations(None), "annotations": kept}

    def _to_tool(self, definition: Mapping[str, Any]) -> Tool:
        name = str(definition["name"])
        annotations = dict(definition.get("annotations") or {})
        metadata: dict[str, Any] = {
            **self._policy(name, annotations),
            "trust": "untrusted",
            "source": f"mcp:{self.namespace}",
            "tags": ("mcp", self.namespace),
            "title": definition.get("title"),
            "output_schema": definition.get("outputSchema"),
            **self.overrides.get(name, {}),
        }

        async def handler(arguments: dict[str, Any]) -> Any:
            return await self.call(name, arguments)

        return Tool.from_schema(
            name=f"{self.namespace}.{name}",
            description=str(definition.get("description") or ""),
            input_schema=closed_schema(dict(definition.get("inputSchema") or {"type": "object"})),
            handler=handler,
            **metadata,
        )

    # -- calling -------------------------------------------------------------------------------------

    def _refuse_withdrawn(self, name: str) -> None:
        why = self._withdrawn.get(name)
        if why is not None:
            raise ToolError(
                "INVALID_STATE",
                f"{self.namespace}.{name} was withdrawn: its definition on the MCP server changed after "
                f"it was pinned ({why}). It stays out until someone reviews it and re-pins it "
                "(`maitre mcp check`, then `maitre mcp pin`).",
                details={"upstream": self.namespace, "withdrawn": name},
            )

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call an upstream tool; upstream errors become `ToolError`s (untrusted text)."""
        self._refuse_withdrawn(name)
        result: types.CallToolResult | None = None
        try:
            async with self.session() as client:
                if self._due():
                    await self.recheck(client)
                # Raised outside the session: an exception inside it comes out in an ExceptionGroup.
                if name not in self._withdrawn:
                    result = await client.call_tool(name, arguments)
        except Exception as exc:
            raise self._failure(name, exc) from None
        self._refuse_withdrawn(name)
        assert result is not None
        return self._shape(name, result)

    def _failure(self, name: str, exc: BaseException) -> ToolError:
        leaves = _leaves(exc)
        if any(isinstance(leaf, AddressRefused) for leaf in leaves):
            logger.warning("MCP upstream %s refused: %s", self.namespace, leaves[0])
            return ToolError(
                "PERMISSION_DENIED",
                f"The MCP server {self.namespace!r} is at an address maitre does not connect to.",
            )
        if any(OVERSIZE_MARKER in str(leaf) or _SSE_OVERSIZE in str(leaf) for leaf in leaves):
            return self._too_large(name)
        logger.warning("MCP upstream %s failed on %s: %s", self.namespace, name, type(exc).__name__)
        return ToolError(
            "TEMPORARY_UNAVAILABLE",
            f"The MCP server {self.namespace!r} could not be reached or failed ({type(exc).__name__}). "
            "Try again later.",
            retryable=True,
        )

    def _too_large(self, name: str) -> ToolError:
        return ToolError(
            "BUDGET_EXCEEDED",
            f"{self.namespace}.{name} answered with more than {self.max_response_bytes} bytes, the cap "
            "for one upstream response; ask for less (a narrower query, a page).",
            details={
                "budget": "response_bytes",
                "limit": self.max_response_bytes,
                "upstream": self.namespace,
            },
        )

    def _shape(self, name: str, result: types.CallToolResult) -> Any:
        # Over stdio the SDK has already read and parsed the line; this is the earliest point there.
        # Every block and the structured content count (images, embedded resources too).
        size = len(result.model_dump_json(by_alias=True, exclude_none=True))
        if size > self.max_response_bytes:
            raise self._too_large(name)
        text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
        if result.is_error:
            raise ToolError(
                "INVALID_STATE",
                f"{self.namespace}.{name} reported an error: {text or '(no message)'}",
                user_fixable=True,
                details={"upstream": self.namespace},
            )
        if result.structured_content is not None:
            return result.structured_content
        if all(isinstance(block, types.TextContent) for block in result.content):
            return text
        return [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content]


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or `exc` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@asynccontextmanager
async def _guarded_transport(
    url: str,
    headers: Mapping[str, str],
    *,
    auth: httpx2.Auth | None,
    guard: AddressGuard,
    max_response_bytes: int,
) -> AsyncIterator[Any]:
    """`egress.guarded_http_transport` with an `httpx2.Auth` on the HTTP client (the guard's request
    hook runs before every request the auth flow sends too, token endpoints included)."""
    await guard.check_url(url)
    async with create_mcp_http_client(headers=dict(headers) or None, auth=auth) as http:
        http.event_hooks = _hooks(guard, max_response_bytes)
        async with streamable_http_client(
            url, http_client=http, max_sse_event_size=max_response_bytes
        ) as streams:
            yield streams


@asynccontextmanager
async def http_transport(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """A Streamable HTTP transport for `mcp.Client` that sends these headers (and only these)."""
    async with (
        create_mcp_http_client(headers=dict(headers) or None) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def toolbox_from_mcp(
    target: Target,
    *,
    namespace: str,
    lockfile: str | PathLike[str] | Lockfile | None = None,
    into: Toolbox | None = None,
    **options: Any,
) -> Toolbox:
    """Import another MCP server's tools; see `McpUpstream` for the options.

    Each imported tool opens a short session per call. The import report is on
    `toolbox.mcp_reports[namespace]`.
    """
    upstream = McpUpstream(target, namespace=namespace, lockfile=lockfile, **options)
    box = await upstream.toolbox(into)
    reports = getattr(box, "mcp_reports", None)
    if reports is None:
        reports = {}
        box.mcp_reports = reports  # type: ignore[attr-defined]
    reports[namespace] = upstream.report
    return box
