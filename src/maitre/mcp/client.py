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
- **Annotated.** MCP annotations are the server's *claims*: they set the policy metadata
  (`readOnlyHint` → effect read, `destructiveHint` (default true) → destructive/high risk, else
  write/medium; `openWorldHint` (default true) → open world), they are pinned with the rest of the
  definition so a later flip is drift, and the host may override any of it per tool (`overrides=`).

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
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal

import mcp_types as types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp import Client, StdioServerParameters

from ..exceptions import ToolDefinitionError, UserError
from ..tools import Tool, Toolbox
from ..types import ToolError
from .pinning import DriftReport, Lockfile, check_drift
from .scanner import Finding, scan_servers

__all__ = [
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

    def render(self) -> str:
        lines = [f"{self.server}: {len(self.imported)} of {len(self.offered)} tool(s) imported"]
        lines += [f"  kept out {name}: {why}" for name, why in sorted(self.blocked.items())]
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
        scan: "block" (high findings keep a tool out), "warn" (report only) or "off".
        peers: other servers' wire definitions (`{namespace: [tool, ...]}`), for shadowing checks.
        overrides: per upstream tool name, metadata that replaces what annotations suggest.
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
        scan: Literal["block", "warn", "off"] = "block",
        peers: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        mode: str = "auto",
        timeout_s: float = 30.0,
    ) -> None:
        self.target: Target = _stdio(target) if isinstance(target, str) and "://" not in target else target
        self.namespace = namespace
        self.lockfile = Lockfile.load(lockfile) if isinstance(lockfile, str | PathLike) else lockfile
        self.headers = dict(headers or {})
        self.scan = scan
        self.peers = {k: list(v) for k, v in (peers or {}).items()}
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}
        self.mode = mode
        self.timeout_s = timeout_s
        self.report = ImportReport(server=namespace)
        self._client: Client | None = None
        self._stack: AsyncExitStack | None = None

    # -- connections ----------------------------------------------------------------------------

    def _new_client(self) -> Client:
        if isinstance(self.target, StdioServerParameters):
            server: Any = self.target
        else:
            server = http_transport(self.target, self.headers)
        return Client(server, mode=self.mode, read_timeout_seconds=self.timeout_s, cache=None)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        """The open shared session, or a fresh one for the duration of the block."""
        if self._client is not None:
            yield self._client
            return
        async with self._new_client() as client:
            yield client

    async def __aenter__(self) -> McpUpstream:
        stack = AsyncExitStack()
        self._client = await stack.enter_async_context(self._new_client())
        self._stack = stack
        return self

    async def __aexit__(self, *exc: Any) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    # -- listing and importing --------------------------------------------------------------------

    async def definitions(self) -> list[dict[str, Any]]:
        """The upstream's tool definitions, wire-shaped (camelCase), in the server's order."""
        tools: list[dict[str, Any]] = []
        async with self.session() as client:
            cursor: str | None = None
            for _ in range(100):
                page = await client.list_tools(cursor=cursor)
                tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
        return tools

    async def toolbox(self, into: Toolbox | None = None) -> Toolbox:
        """Import the admitted tools into `into` (or a new toolbox) and return it."""
        box = into if into is not None else Toolbox()
        offered = await self.definitions()
        report = ImportReport(server=self.namespace, offered=[str(t["name"]) for t in offered])
        if self.lockfile is not None:
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
        for definition in offered:
            name = str(definition["name"])
            if name in report.blocked:
                continue
            try:
                tool = self._to_tool(definition)
                box.add(tool)
            except (ToolDefinitionError, UserError) as exc:
                report.blocked[name] = str(exc)
                continue
            report.imported.append(tool.name)
        if report.blocked:
            logger.warning("MCP import %s:\n%s", self.namespace, report.render())
        self.report = report
        return box

    def _to_tool(self, definition: Mapping[str, Any]) -> Tool:
        name = str(definition["name"])
        annotations = dict(definition.get("annotations") or {})
        metadata: dict[str, Any] = {
            **policy_from_annotations(annotations),
            "trust": "untrusted",
            "source": f"mcp:{self.namespace}",
            "tags": ("mcp", self.namespace),
            "annotations": annotations,
            "title": definition.get("title"),
            "output_schema": definition.get("outputSchema"),
            **self.overrides.get(name, {}),
        }

        async def handler(arguments: dict[str, Any]) -> Any:
            return await self.call(name, arguments)

        return Tool.from_schema(
            name=f"{self.namespace}.{name}",
            description=str(definition.get("description") or ""),
            input_schema=dict(definition.get("inputSchema") or {"type": "object"}),
            handler=handler,
            **metadata,
        )

    # -- calling -------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call an upstream tool; upstream errors become `ToolError`s (untrusted text)."""
        try:
            async with self.session() as client:
                result = await client.call_tool(name, arguments)
        except ToolError:
            raise
        except Exception as exc:
            logger.warning("MCP upstream %s failed on %s: %s", self.namespace, name, type(exc).__name__)
            raise ToolError(
                "TEMPORARY_UNAVAILABLE",
                f"The MCP server {self.namespace!r} could not be reached or failed ({type(exc).__name__}). "
                "Try again later.",
                retryable=True,
            ) from None
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
