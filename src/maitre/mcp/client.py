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

No token passthrough: the connection to the upstream carries only the `headers` and `auth` the
host configured for *that* server, or the `UpstreamCredential` that `credential_for` chose for the
call (at the gateway: a token the IdP issued for this upstream in exchange for the caller's,
`maitre.mcp.token_exchange`); a schema tool's handler receives only the validated arguments, so
the caller's own credentials cannot reach an upstream server.

Policy the operator writes wins: `overrides` (`[mcp.upstreams.NAME.tools.TOOL]`) set a tool's
effect, risk, approval, scopes and timeout whether or not the server's annotations are trusted,
because the operator decided them for a pinned definition, while annotations are the server's own
claims. An override naming a tool the server does not offer is reported
(`ImportReport.unknown_overrides`, a warning) and applies to nothing.

Connections (`maitre.mcp.upstream_session`): one long-lived session per upstream and credential,
opened by the first call that needs it and shared by every call after (the import's own listing
included, so the `Mcp-Param-*` headers 2026-07-28 requires are derived from it). A session that broke
(a stdio server that died, a 2025-11-25 session the server expired) is replaced by the next call; a
call the server refused only because it had forgotten the session (HTTP 404) is sent once more on the
new one. Opening again after failures backs off exponentially (bounded); an idle session is
health-checked before it is used. `await upstream.aclose()` (or `async with McpUpstream(...)`, or
`aclose_upstreams(toolbox)` for `toolbox_from_mcp`) closes them; a program that does not still exits,
and a stdio server it spawned stops with its event loop. On a 2026-07-28 HTTP session a `tools/call`
whose caller takes no progress or logs is posted directly on the session's own HTTP client
(`maitre.mcp.direct_call`: the SDK's request, headers and checks, without its per-request
machinery), and every request leaves in one socket write; `direct_calls=False` turns the first off.

Input the server asks for: `elicitation_callback`, `sampling_callback` and `list_roots_callback`
(the SDK's callback types) answer a server's questions, both ways the protocol asks them (a request
during the call on 2025-11-25, an `input_required` result on 2026-07-28, retried with the answers and
the echoed `requestState`). An accepted form elicitation gets the schema's defaults for the fields
the answer left out (SEP-1034). Without the callback a question is INPUT_REQUIRED (not retryable),
saying what the server asked; the capability is then not declared either.

Served over MCP (the gateway: the tool runs under an MCP `tools/call`, `context.current_call()`),
the call is the caller's as far as the protocol goes, while an in-process caller (an agent) gets
the shapes above:

- **Content.** A result with non-text blocks is returned as the list of its blocks (wire dicts),
  which the server sends on as blocks (`context.upstream_blocks`: every upstream text fenced,
  `io.maitre/` `_meta` keys dropped), so an image stays an image and a replay gives the same blocks.
- **Progress and logs.** The upstream's progress for the call goes to the caller's progress token
  (increasing values only, bounded in number); its logs go to the caller's log, as `mcp:NAME`, when
  the caller takes logs (the upstream is asked for them at the caller's level) and exactly one call
  is in flight on the session (the SDK does not say whose call a log is about).
- **Questions.** An upstream's `input_required` becomes the gateway's own for a 2026-07-28 caller
  (same questions, the upstream's requestState sealed inside the server's), and is asked during the
  call of a 2025-11-25 caller; a question, or an upstream's -32021, needing a capability the caller
  did not declare is the caller's own -32021.

Errors say what happened: an upstream that needs a person's sign-in (`LoginRequired`) or refused
the token exchanged for the caller is AUTH_REQUIRED (not retryable; `maitre mcp login NAME`); a
maitre server's APPROVAL_REQUIRED (`_meta["io.maitre/error"]`) arrives
as APPROVAL_REQUIRED with its approval id (`call(..., approval_id=...)` retries it once decided there);
a protocol error the server answered is not "unavailable"; only a connection that failed is
TEMPORARY_UNAVAILABLE (retryable).
"""

from __future__ import annotations

import copy
import json
import logging
import re
import shlex
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp.client._input_required import (
    DEFAULT_INPUT_REQUIRED_MAX_ROUNDS,
    InputRequiredRoundsExceededError,
    run_input_required_driver,
)
from mcp.client.session import ClientRequestContext, ElicitationFnT, ListRootsFnT, SamplingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, ToolsListChanged
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    LOG_LEVEL_META_KEY,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    REQUEST_TIMEOUT,
    URL_ELICITATION_REQUIRED,
)
from pydantic import ValidationError

from mcp import Client, StdioServerParameters

from ..exceptions import ToolDefinitionError, UserError
from ..gate.execute import current_idempotency_key
from ..tools import Tool, Toolbox
from ..tools.drafts import normalise_schema
from ..tools.tool import base_name_for
from ..types import ErrorCode, ToolError
from .approvals import APPROVAL_META_KEY
from .context import McpCallContext, current_call
from .direct_call import HttpLink, linked_http_transport, post_tool_call, supports_direct_calls
from .egress import (
    DEFAULT_MAX_RESPONSE_BYTES,
    OVERSIZE_MARKER,
    AddressGuard,
    AddressRefused,
)
from .pinning import DriftReport, Lockfile, check_drift, closed_schema
from .scanner import Finding, scan_servers
from .token_exchange import UpstreamTokenRefused
from .upstream_auth import LoginRequired
from .upstream_session import (
    Backoff,
    SessionPool,
    UpstreamCredential,
    UpstreamUnavailable,
    breaks_session,
    undelivered,
)

__all__ = [
    "Backoff",
    "DEFAULT_RECHECK_INTERVAL_S",
    "ElicitationFnT",
    "IDEMPOTENCY_META_KEY",
    "ImportReport",
    "ListRootsFnT",
    "McpUpstream",
    "SamplingFnT",
    "Target",
    "UpstreamCredential",
    "aclose_upstreams",
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
_MAITRE_ERROR = "io.maitre/error"
"""Where a maitre server puts the structured ToolError of an error result (`maitre.mcp.wire`)."""
_REMOTE_CODES = frozenset(
    {
        ErrorCode.APPROVAL_REQUIRED,
        ErrorCode.APPROVAL_DENIED,
        ErrorCode.INPUT_REQUIRED,
        ErrorCode.AUTH_REQUIRED,
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.NOT_FOUND,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.CONFLICT,
        ErrorCode.RATE_LIMITED,
        ErrorCode.TIMEOUT,
        ErrorCode.TEMPORARY_UNAVAILABLE,
    }
)
"""The codes an upstream's structured error keeps; any other (the local run's own signals such as
LOOP_DETECTED or BUDGET_EXCEEDED) reads as INVALID_STATE: an untrusted server cannot stop a run."""
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")
"""An idempotency key sent upstream: what a maitre server reads whole (`wire.meta_id` keeps 128)."""
IDEMPOTENCY_META_KEY = "io.maitre/idempotencyKey"
"""Request `_meta` key naming one logical operation (`maitre.mcp.server.IDEMPOTENCY_META_KEY`)."""
_SHOWN = 300
"""The most characters of a server's own text (a question, an error) an error message quotes."""
_REFUSALS = {
    "Elicitation not supported": ("elicitation_callback", "to ask the user something"),
    "Sampling not supported": ("sampling_callback", "for a completion from the client's model"),
    "List roots not supported": ("list_roots_callback", "for the client's roots"),
}
"""The SDK's own refusals when a callback is missing: a 2025-11-25 server that asked during the call
and relays the refusal as its error is a server that needed input, not a broken one."""
_CAPABILITY_OF = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
"""The client capability each question a server may ask needs."""
_INPUT_KINDS = {
    "elicitation/create": "elicitation_callback",
    "sampling/createMessage": "sampling_callback",
    "roots/list": "list_roots_callback",
}


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
    unknown_overrides: list[str] = field(default_factory=list)
    """Tool names `overrides` gives policy for that the upstream does not offer (a typo, a renamed
    tool): reported and logged, never applied to anything else."""

    def render(self) -> str:
        lines = [f"{self.server}: {len(self.imported)} of {len(self.offered)} tool(s) imported"]
        lines += [f"  kept out {name}: {why}" for name, why in sorted(self.blocked.items())]
        lines += [f"  withdrawn {name}: {why}" for name, why in sorted(self.withdrawn.items())]
        lines += [f"  override for {name}: the server offers no such tool" for name in self.unknown_overrides]
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
        overrides: per upstream tool name, metadata that replaces what annotations suggest (the
            operator's decision: it applies without `trust_annotations`; see the module docstring).
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
        timeout_s: read timeout of upstream requests (and of opening a session).
        elicitation_callback: answers the server's questions for the user (SDK `ElicitationFnT`);
            an accepted form answer gets the schema's defaults for fields it leaves out.
        sampling_callback: answers the server's requests for an LLM completion (`SamplingFnT`).
        list_roots_callback: tells the server the client's roots (`ListRootsFnT`).
        input_required_max_rounds: the most `input_required` rounds one call may take.
        health_check_idle_s: a session unused this long is checked before it is used again.
        backoff: how long opening waits after failures (`Backoff()`: 0.25 s doubling to 30 s).
        max_sessions: how many credentials may hold an open session at once.
        share_sessions: False opens a session for every call (and lists the tools on it, so the
            `Mcp-Param-*` headers stay right), closing it after; for comparisons only.
        credential_for: called (awaited) before every imported tool's call to choose whose
            connection it uses: an `UpstreamCredential` (pooled by its key; e.g. a token obtained
            for the calling user by token exchange) or None for the upstream's own. It runs in the
            caller's context, so it can see the request's principal; an exception it raises fails
            that call only.
        direct_calls: on a 2026-07-28 HTTP session, post a `tools/call` whose caller takes no
            progress or logs straight on the session's HTTP client (`maitre.mcp.direct_call`: the
            same request and checks as the SDK's, without its per-request machinery). False sends
            every call through the SDK session; for comparisons.
        forward_idempotency_keys: send the key the gate minted for each write call in its
            `_meta` (`io.maitre/idempotencyKey`), so a write retried after a crash or a replica
            kill names the same operation and an upstream that honours the key (maitre's own
            servers do) runs it once; other servers ignore an unknown `_meta` entry. Reads carry
            no key.
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
        elicitation_callback: ElicitationFnT | None = None,
        sampling_callback: SamplingFnT | None = None,
        list_roots_callback: ListRootsFnT | None = None,
        input_required_max_rounds: int = DEFAULT_INPUT_REQUIRED_MAX_ROUNDS,
        health_check_idle_s: float | None = 30.0,
        backoff: Backoff | None = None,
        max_sessions: int = 64,
        share_sessions: bool = True,
        credential_for: Callable[[], Awaitable[UpstreamCredential | None]] | None = None,
        direct_calls: bool = True,
        forward_idempotency_keys: bool = True,
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
        self.elicitation_callback = elicitation_callback
        self.sampling_callback = sampling_callback
        self.list_roots_callback = list_roots_callback
        self.input_required_max_rounds = input_required_max_rounds
        self.credential_for = credential_for
        self.direct_calls = direct_calls
        self.forward_idempotency_keys = forward_idempotency_keys
        self.report = ImportReport(server=namespace)
        self.pool = SessionPool(
            self._connect,
            name=namespace,
            on_open=self._on_open,
            backoff=backoff,
            health_check_idle_s=health_check_idle_s,
            open_timeout_s=timeout_s,
            max_sessions=max_sessions,
            share=share_sessions,
        )
        """The upstream's open sessions (`maitre.mcp.upstream_session.SessionPool`)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._listening = False
        self._box: Toolbox | None = None
        self._admitted: dict[str, dict[str, Any]] = {}
        """Upstream name → the definition it was admitted with (the pin this session holds it to)."""
        self._withdrawn: dict[str, str] = {}
        self._checked_at = 0.0
        self._stale = False
        self._recheck_lock = anyio.Lock()
        self._notification_listeners: list[Callable[[Any], Awaitable[None]]] = []
        self._in_flight: dict[int, list[McpCallContext]] = {}
        """Per session, the MCP calls at the gateway's door each upstream call in flight serves (the
        relay's targets for the upstream's progress and logs)."""
        self._links: dict[int, HttpLink] = {}
        """Per HTTP session, the HTTP client its transport runs on (direct calls post on it too)."""

    # -- connections ----------------------------------------------------------------------------

    def _connect(self, credential: UpstreamCredential | None = None) -> Client:
        """A new SDK client for this upstream (entered by the session pool's owner task)."""
        if isinstance(self.target, StdioServerParameters):
            server: Any = self.target
        else:
            headers = {**self.headers, **(credential.headers if credential is not None else {})}
            auth = credential.auth if credential is not None and credential.auth is not None else self.auth
            link = HttpLink(self.target, self.max_response_bytes)
            server = linked_http_transport(link, headers, auth=auth, guard=self.guard)
        elicit = self.elicitation_callback
        in_flight: list[McpCallContext] = []
        client = Client(
            server,
            mode=self.mode,
            read_timeout_seconds=self.timeout_s,
            cache=None,
            message_handler=self._on_message,
            elicitation_callback=_with_defaults(elicit) if elicit is not None else None,
            sampling_callback=self.sampling_callback,
            list_roots_callback=self.list_roots_callback,
            logging_callback=self._log_relay(in_flight),
        )
        self._in_flight[id(client)] = in_flight
        weakref.finalize(client, self._in_flight.pop, id(client), None)
        if not isinstance(self.target, StdioServerParameters):
            self._links[id(client)] = link
            weakref.finalize(client, self._links.pop, id(client), None)
        return client

    def _log_relay(self, in_flight: list[McpCallContext]) -> Any:
        """The session's `logging_callback`: an upstream log message goes to the caller's log when
        exactly one MCP call is in flight on the session. The SDK does not say which request a log
        belongs to, and a session may serve several callers at once: a log that could be another
        caller's is not relayed (it stays in maitre's own log at debug level). It arrives as data
        from `mcp:NAMESPACE` (the upstream's own logger name after it), its text shortened."""

        async def relay(params: types.LoggingMessageNotificationParams) -> None:
            if len(in_flight) != 1:
                logger.debug(
                    "MCP upstream %s log not relayed (%d calls in flight)", self.namespace, len(in_flight)
                )
                return
            name = f"mcp:{self.namespace}" + (f"/{_quote(params.logger, 64)}" if params.logger else "")
            try:
                await in_flight[0].log(params.level, _jsonable(params.data), name)
            except Exception as exc:  # the caller went away: the upstream call goes on
                logger.debug("MCP upstream %s log not relayed: %s", self.namespace, type(exc).__name__)

        return relay

    async def _check_target(self) -> None:
        """Refuse a non-public HTTP target before anything connects (stdio is a local process)."""
        if isinstance(self.target, str):
            await self.guard.check_url(self.target)

    async def _on_open(self, client: Client) -> None:
        """A new session (a reconnect, another credential): list the tools on it before any call, so
        the SDK knows their `x-mcp-header` parameters, and hold what it offers to the pin."""
        if self._admitted:
            await self.recheck(client)

    @asynccontextmanager
    async def session(self, credential: UpstreamCredential | None = None) -> AsyncIterator[Client]:
        """A connected client: the shared session for `credential` (opened if needed)."""
        if not self.pool.is_open(credential):
            await self._check_target()  # before opening; an open session's requests are checked by the hook
        async with self.pool.client(credential) as client:
            yield client

    async def aclose(self) -> None:
        """Close every session this upstream holds open. Calls after it open a new one."""
        await self.pool.aclose()

    async def __aenter__(self) -> McpUpstream:
        if self._entered:
            raise RuntimeError("McpUpstream is already entered")
        await self._check_target()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        try:
            self._tg = self.pool.task_group = tg
            await self.pool.acquire()  # an unreachable server fails here, not at the first call
            await tg.start(self._listen)
            if self.recheck_interval_s is not None:
                tg.start_soon(self._periodic, self.recheck_interval_s)
        except BaseException as exc:
            tg.cancel_scope.cancel()
            await self._leave(tg, exc)
            raise
        self._entered = True
        return self

    async def __aexit__(self, *exc: Any) -> None:
        tg = self._tg
        self._entered = False
        if tg is not None:
            tg.cancel_scope.cancel()
            await self._leave(tg, None)

    async def _leave(self, tg: anyio.abc.TaskGroup, exc: BaseException | None) -> None:
        self._listening = False
        try:
            await self.pool.aclose()
        finally:
            self._tg = self.pool.task_group = None
            await tg.__aexit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)

    # -- watching for drift -------------------------------------------------------------------------

    async def _listen(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """On a 2026-07-28 session, re-check whenever the upstream says its tool list changed; after
        the stream (or its session) ends, listen again on the session the pool has then."""
        started = False
        while True:
            try:
                async with self.pool.client() as client, client.listen(tools_list_changed=True) as sub:
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

    def on_notification(self, listener: Callable[[Any], Awaitable[None]]) -> Callable[[], None]:
        """Call `listener` with every notification a session of this upstream receives (2025-11-25
        `notifications/resources/list_changed`, `.../prompts/list_changed`, ...); returns a function
        that removes it. A listener that raises is logged and kept."""
        self._notification_listeners.append(listener)

        def remove() -> None:
            if listener in self._notification_listeners:
                self._notification_listeners.remove(listener)

        return remove

    async def _on_message(self, message: Any) -> None:
        """Tell the listeners; the 2025-11-25 `notifications/tools/list_changed`: re-check now, or
        before the next call."""
        for listener in list(self._notification_listeners):
            try:
                await listener(message)
            except Exception:
                logger.exception("MCP upstream %s: a notification listener failed", self.namespace)
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

    async def recheck(self, client: Client | None = None, *, if_due: bool = False) -> list[str]:
        """Compare what the upstream offers now with what was admitted; withdraw what drifted.

        With `if_due`, nothing is listed when another look finished while this one waited (many
        calls finding the last look too old make one listing, not one each).
        Returns the upstream names withdrawn by this check.
        """
        if client is None:
            # Outside the lock: a session opened for this look lists the tools itself (`_on_open`).
            async with self.session() as own:
                return await self.recheck(own, if_due=if_due)
        async with self._recheck_lock:
            if if_due and not self._due():
                return []
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

    def definition(self, name: str) -> dict[str, Any] | None:
        """The wire definition the upstream tool `name` was admitted with (its pin, which every call is
        held to), as the server sent it; None if it was not admitted or was withdrawn since."""
        held = self._admitted.get(name)
        return copy.deepcopy(held) if held is not None and name not in self._withdrawn else None

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
                    peers.setdefault(tool.namespace, []).append(
                        {"name": tool.upstream_name or tool.base_name}
                    )
            findings = scan_servers({**peers, self.namespace: offered})
            report.findings = [f for f in findings if f.server == self.namespace]
            if self.scan == "block":
                for finding in report.findings:
                    if finding.severity == "high":
                        report.blocked.setdefault(
                            finding.tool, f"scanner: {finding.message} at {finding.path}"
                        )
        report.unknown_overrides = sorted(set(self.overrides) - set(report.offered))
        if report.unknown_overrides:
            logger.warning(
                "MCP import %s: overrides name tool(s) the server does not offer, ignored: %s",
                self.namespace,
                ", ".join(report.unknown_overrides),
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
            credential = await self.credential_for() if self.credential_for is not None else None
            # The gate's key for this write (None for a read): a retry after a crash or a replica
            # kill names the same operation, so an upstream that honours the key runs it once.
            key = current_idempotency_key() if self.forward_idempotency_keys else None
            return await self.call(name, arguments, credential=credential, idempotency_key=key)

        # Normalised (draft-04/06/07 forms read as 2020-12) before it is closed: closing first would
        # leave objects inside a draft-07 tuple open. The pin keeps the definition as sent.
        schema = normalise_schema(dict(definition.get("inputSchema") or {"type": "object"}))
        return Tool.from_schema(
            name=name,
            namespace=self.namespace,
            description=str(definition.get("description") or ""),
            input_schema=closed_schema(schema),
            handler=handler,
            **metadata,
        )

    # -- calling -------------------------------------------------------------------------------------

    def _refuse_withdrawn(self, name: str) -> None:
        why = self._withdrawn.get(name)
        if why is not None:
            raise ToolError(
                "INVALID_STATE",
                f"{self.namespace}.{base_name_for(name)} was withdrawn: its definition on the MCP server "
                "changed after "
                f"it was pinned ({why}). It stays out until someone reviews it and re-pins it "
                "(`maitre mcp check`, then `maitre mcp pin`).",
                details={"upstream": self.namespace, "withdrawn": name},
            )

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        credential: UpstreamCredential | None = None,
        approval_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Call an upstream tool; upstream errors become `ToolError`s (untrusted text).

        Args:
            name: the upstream's own tool name (without the namespace).
            arguments: the (validated) arguments.
            credential: whose connection to use (default: the upstream's own headers and auth).
            approval_id: retry a call a maitre upstream answered with APPROVAL_REQUIRED, once
                someone allowed to has approved it there (`_meta["io.maitre/approvalId"]`).
            idempotency_key: names this one logical operation to the upstream
                (`_meta["io.maitre/idempotencyKey"]`, printable ASCII, at most 128 characters): an
                upstream that honours it (a maitre server does, per its caller and tool) runs the
                operation once however often the same key is sent, so a write whose first attempt
                ended in doubt can be sent again. Pass the key the host's gate minted for the call
                (scoped to its principal and tool), never a key a caller chose: two callers' raw keys
                would share the upstream's one principal there.
        """
        self._refuse_withdrawn(name)
        meta: dict[str, Any] | None = None
        if approval_id is not None:
            if not _ID.match(approval_id):
                raise ToolError("INVALID_ARGUMENTS", "approval_id is not an approval id")
            meta = {APPROVAL_META_KEY: approval_id}
        if idempotency_key is not None:
            if not _KEY.match(idempotency_key):
                raise ToolError(
                    "INVALID_ARGUMENTS", "idempotency_key must be 1-128 printable ASCII characters"
                )
            meta = {**(meta or {}), IDEMPOTENCY_META_KEY: idempotency_key}
        result: types.CallToolResult | dict[str, Any] | None = None
        for attempt in (1, 2):
            try:
                async with self.session(credential) as client:
                    if self._due():
                        await self.recheck(client, if_due=True)
                    if name not in self._withdrawn:
                        result = await self._call_on(client, name, arguments, meta)
                break
            except ToolError:
                raise
            except Exception as exc:
                if attempt == 1 and undelivered(exc):
                    logger.info(
                        "MCP upstream %s forgot the session; calling %s on a new one", self.namespace, name
                    )
                    continue
                refusal = self._refusal_for_caller(name, exc)
                if refusal is not None:
                    return refusal
                raise self._failure(name, exc) from None
        self._refuse_withdrawn(name)
        assert result is not None
        if isinstance(result, dict):  # the caller is asked for the upstream's input (NeedsInput)
            return result
        return self._shape(name, result)

    async def _call_on(
        self, client: Client, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None
    ) -> types.CallToolResult | dict[str, Any]:
        """`tools/call`, answering `input_required` rounds with the host's callbacks (2026-07-28), or
        passing them to a 2026-07-28 MCP caller as its own (`_ask_caller`)."""
        caller = current_call()
        if caller is None:
            return await self._call_tool_on(client, name, arguments, meta, None, None)
        if caller.log_level is not None:  # the caller takes logs: ask the upstream for them (2026-07-28)
            meta = {**(meta or {}), LOG_LEVEL_META_KEY: caller.log_level}
        in_flight = self._in_flight.setdefault(id(client), [])
        in_flight.append(caller)
        try:
            return await self._call_tool_on(client, name, arguments, meta, _progress_relay(caller), caller)
        finally:
            in_flight.remove(caller)

    async def _call_tool_on(
        self,
        client: Client,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any] | None,
        progress: ProgressFnT | None,
        caller: McpCallContext | None,
    ) -> types.CallToolResult | dict[str, Any]:
        session = client.session
        # Only when there is a caller to tell: otherwise the upstream is not asked for progress at all.
        relayed: dict[str, Any] = {"progress_callback": progress} if progress is not None else {}
        # A tool the operator gave a longer timeout than the upstream's requests waits that long.
        longer = self.overrides.get(name, {}).get("timeout")
        wait = float(longer) if isinstance(longer, int | float) and longer > self.timeout_s else None

        link = self._links.get(id(client)) if self.direct_calls else None
        direct = (
            link is not None
            and (caller is None or (caller.log_level is None and not _wants_progress(caller)))
            and supports_direct_calls(session)
        )

        async def post(responses: types.InputResponses | None, state: str | None) -> Any:
            http = link.http if link is not None else None
            if direct and http is not None:
                return await post_tool_call(
                    session,
                    http,
                    str(self.target),
                    name,
                    arguments,
                    meta=meta,
                    input_responses=responses,
                    request_state=state,
                    timeout_s=wait if wait is not None else self.timeout_s,
                    max_response_bytes=self.max_response_bytes,
                )
            return await session.call_tool(
                name,
                arguments,
                read_timeout_seconds=wait,
                **relayed,
                input_responses=responses,
                request_state=state,
                meta=meta,  # type: ignore[arg-type]  # RequestParamsMeta is a TypedDict, open to extensions
                allow_input_required=True,
            )

        async def send(responses: types.InputResponses | None, state: str | None) -> Any:
            try:
                return await post(responses, state)
            except MCPError as exc:
                if exc.code != HEADER_MISMATCH:
                    raise
            # The spec's recovery: the listing the headers came from is stale. List again (the SDK
            # takes the headers from it; a drifted tool is withdrawn) and send once more.
            await self.recheck(client)
            self._refuse_withdrawn(name)
            return await post(responses, state)

        async def answer(key: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
            if getattr(self, _INPUT_KINDS.get(request.method, ""), None) is None:
                raise self._input_required(name, {key: request})
            params = request.params
            ctx = ClientRequestContext(session=session, request_id=key, meta=params.meta if params else None)
            return await session.dispatch_input_request(ctx, request)

        responses, state = self._resumed(caller, name)
        first = await send(responses, state)
        if not isinstance(first, types.InputRequiredResult):
            return first  # type: ignore[no-any-return]
        if caller is not None and caller.modern:
            return self._ask_caller(caller, name, first)
        if caller is not None and caller.can_ask:  # a 2025-11-25 caller: asked during its call
            missing = self._missing_capabilities(caller, first)
            if missing:
                return self._reject_missing(caller, name, missing)
            relayed_done: types.CallToolResult = await run_input_required_driver(
                first, dispatch=_asked_of(caller), retry=send, max_rounds=self.input_required_max_rounds
            )
            return relayed_done
        unanswerable = {
            key: request
            for key, request in (first.input_requests or {}).items()
            if getattr(self, _INPUT_KINDS.get(request.method, ""), None) is None
        }
        if unanswerable:  # say everything the host cannot answer at once, not the first of them
            raise self._input_required(name, unanswerable)
        done: types.CallToolResult = await run_input_required_driver(
            first, dispatch=answer, retry=send, max_rounds=self.input_required_max_rounds
        )
        return done

    def _resumed(
        self, caller: McpCallContext | None, name: str
    ) -> tuple[types.InputResponses | None, str | None]:
        """The caller's answers and the upstream's own request state, when a 2026-07-28 caller retries
        a call whose upstream asked it for input (`_ask_caller`); else nothing (a fresh call)."""
        if (
            caller is None
            or not caller.modern
            or (not caller.input_responses and caller.request_state is None)
        ):
            return None, None
        state: str | None = None
        if caller.request_state is not None:
            # Our own envelope, sealed by the server before it reached the caller and verified when it
            # came back; a state issued for another upstream's or tool's question is refused.
            try:
                sealed = json.loads(caller.request_state)
            except ValueError:
                sealed = None
            if (
                not isinstance(sealed, dict)
                or sealed.get("upstream") != self.namespace
                or sealed.get("tool") != name
            ):
                raise ToolError(
                    "INVALID_ARGUMENTS",
                    f"the requestState sent with {self.namespace}.{name} belongs to another call",
                )
            upstream_state = sealed.get("state")
            state = upstream_state if isinstance(upstream_state, str) else None
        return dict(caller.input_responses) or None, state

    def _ask_caller(
        self, caller: McpCallContext, name: str, asked: types.InputRequiredResult
    ) -> dict[str, Any]:
        """The upstream's `input_required` as the gateway's own, to a 2026-07-28 caller: the same
        questions, under the same keys, and the upstream's request state sealed inside ours (the
        server signs it: the caller can neither change nor forge it). A question
        needing a capability the caller did not declare is -32021 instead."""
        requests = dict(asked.input_requests or {})
        missing = self._missing_capabilities(caller, asked)
        if missing:
            return self._reject_missing(caller, name, missing)
        sealed = json.dumps({"upstream": self.namespace, "tool": name, "state": asked.request_state})
        return caller.input_required(requests, state=sealed)

    @staticmethod
    def _missing_capabilities(caller: McpCallContext, asked: types.InputRequiredResult) -> list[str]:
        """The client capabilities the upstream's questions need that the caller did not declare."""
        return sorted(
            {
                capability
                for request in (asked.input_requests or {}).values()
                if (capability := _CAPABILITY_OF.get(request.method)) is not None
                and not caller.supports(capability)
            }
        )

    def _reject_missing(self, caller: McpCallContext, name: str, missing: list[str]) -> dict[str, Any]:
        return caller.reject(
            MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"{self.namespace}.{name} needs the client capabilities {', '.join(missing)}, "
                "which this request did not declare",
                data={"requiredCapabilities": {capability: {} for capability in missing}},
            )
        )

    def _refusal_for_caller(self, name: str, exc: BaseException) -> dict[str, Any] | None:
        """The upstream's -32021 (a client capability it needs was not declared) as the same JSON-RPC
        error to an MCP caller that did not declare it either: the caller's request is what lacks the
        capability, so it gets the spec's error (HTTP 400 on 2026-07-28), not a tool result. Only the
        capabilities are taken from the upstream (as a validated `ClientCapabilities`); the message
        is maitre's own. None for an in-process caller, or one that declared them all (it gets
        INPUT_REQUIRED: the gateway cannot relay the question yet)."""
        caller = current_call()
        leaf = next(
            (
                e
                for e in _leaves(exc)
                if isinstance(e, MCPError) and e.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            ),
            None,
        )
        if caller is None or leaf is None:
            return None
        data = leaf.data if isinstance(leaf.data, Mapping) else {}
        try:
            required = types.ClientCapabilities.model_validate(data.get("requiredCapabilities") or {})
        except ValidationError:
            return None
        wanted = required.model_dump(by_alias=True, mode="json", exclude_none=True)
        missing = sorted(key for key in wanted if not caller.supports(key))
        if not missing:
            return None
        return caller.reject(
            MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=f"{self.namespace}.{name} needs the client capabilities {', '.join(missing)}, which "
                "this request did not declare",
                data={"requiredCapabilities": wanted},
            )
        )

    def _input_required(self, name: str, requests: Mapping[str, types.InputRequest]) -> ToolError:
        asked = {key: _describe_request(request) for key, request in requests.items()}
        callbacks = sorted({_INPUT_KINDS.get(r.method, r.method) for r in requests.values()})
        said = "; ".join(a["summary"] for a in asked.values())
        return ToolError(
            ErrorCode.INPUT_REQUIRED,
            f"{self.namespace}.{name} did not run: the MCP server {self.namespace!r} needs input first, and "
            f"this host has no way to give it ({said}). Ask the user, or pass "
            f"{' / '.join(callbacks)} to McpUpstream / Toolbox.from_mcp so the server's question can be "
            "answered.",
            details={"upstream": self.namespace, "tool": f"{self.namespace}.{name}", "input_requests": asked},
        )

    def _failure(self, name: str, exc: BaseException) -> ToolError:
        leaves = _leaves(exc)
        for leaf in leaves:
            if isinstance(leaf, ToolError):  # raised by us inside the SDK's input-required driver
                return leaf
        if any(isinstance(leaf, AddressRefused) for leaf in leaves):
            logger.warning("MCP upstream %s refused: %s", self.namespace, leaves[0])
            return ToolError(
                "PERMISSION_DENIED",
                f"The MCP server {self.namespace!r} is at an address maitre does not connect to.",
            )
        if any(OVERSIZE_MARKER in str(leaf) or _SSE_OVERSIZE in str(leaf) for leaf in leaves):
            return self._too_large(name)
        for leaf in leaves:
            if isinstance(leaf, LoginRequired | UpstreamTokenRefused):
                return self._sign_in_needed(name, leaf)
        for leaf in leaves:
            if isinstance(leaf, UpstreamUnavailable):
                return ToolError(
                    "TEMPORARY_UNAVAILABLE",
                    f"The MCP server {self.namespace!r} could not be reached the last times maitre tried "
                    f"({_cause(leaf.cause)}). Try again in {leaf.retry_after_s:.1f} s.",
                    retryable=True,
                    retry_after_s=round(leaf.retry_after_s, 3),
                    details={"upstream": self.namespace},
                )
            if isinstance(leaf, InputRequiredRoundsExceededError):
                return ToolError(
                    "INVALID_STATE",
                    f"{self.namespace}.{name}: the MCP server kept asking for input for more than "
                    f"{leaf.max_rounds} rounds; maitre stopped answering it.",
                    details={"upstream": self.namespace},
                )
            if isinstance(leaf, MCPError) and not breaks_session(leaf):
                return self._protocol_error(name, leaf)
            if isinstance(leaf, ValidationError):
                return ToolError(
                    "INVALID_STATE",
                    f"{self.namespace}.{name}: the MCP server answered with a result that does not follow "
                    "the protocol (or the tool's declared output schema), so maitre did not use it.",
                    details={"upstream": self.namespace},
                )
        logger.warning("MCP upstream %s failed on %s: %s", self.namespace, name, _cause(exc))
        return ToolError(
            "TEMPORARY_UNAVAILABLE",
            f"The MCP server {self.namespace!r} could not be reached or its connection broke "
            f"({_cause(exc)}). Try again later.",
            retryable=True,
            details={"upstream": self.namespace},
        )

    def _sign_in_needed(self, name: str, leaf: LoginRequired | UpstreamTokenRefused) -> ToolError:
        """An upstream that needs credentials only a person (or the operator) can give: not retryable."""
        if isinstance(leaf, UpstreamTokenRefused):
            return ToolError(
                ErrorCode.AUTH_REQUIRED,
                f"{self.namespace}.{name} did not run: {leaf}",
                details={"upstream": self.namespace, "reason": "exchanged_token_refused"},
            )
        return ToolError(
            ErrorCode.AUTH_REQUIRED,
            f"{self.namespace}.{name} did not run: the MCP server {self.namespace!r} needs someone to sign in "
            f"first, and nobody is signed in here. The operator runs `maitre mcp login {self.namespace}` "
            "(once; the tokens are kept and refreshed), then the call can be made again.",
            details={
                "upstream": self.namespace,
                "reason": "login_required",
                "command": f"maitre mcp login {self.namespace}",
            },
        )

    def _protocol_error(self, name: str, exc: MCPError) -> ToolError:
        """A JSON-RPC error the server answered: what it said, with the code that fits."""
        said = _quote(exc.message)
        details: dict[str, Any] = {"upstream": self.namespace, "rpc_code": exc.code}
        if exc.code == REQUEST_TIMEOUT:
            return ToolError(
                "TIMEOUT",
                f"{self.namespace}.{name} gave no answer within {self.timeout_s:g} s.",
                retryable=True,
                details=details,
            )
        refusal = _REFUSALS.get(exc.message)
        if refusal is not None and getattr(self, refusal[0]) is None:
            callback, what = refusal
            return ToolError(
                ErrorCode.INPUT_REQUIRED,
                f"{self.namespace}.{name} did not finish: the MCP server {self.namespace!r} asked during the "
                f"call {what}, and this host has no way to answer. Ask the user, or pass {callback} to "
                "McpUpstream / Toolbox.from_mcp.",
                details={**details, "input_requests": {"during_call": {"callback": callback}}},
            )
        if exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
            return ToolError(
                ErrorCode.INPUT_REQUIRED,
                f"{self.namespace}.{name} did not run: the MCP server needs a client capability this host "
                f"did not declare ({said}). Pass elicitation_callback / sampling_callback / "
                "list_roots_callback to McpUpstream / Toolbox.from_mcp for the one it names.",
                details={**details, "required": _jsonable(exc.data)},
            )
        if exc.code == URL_ELICITATION_REQUIRED:
            urls = [
                {"url": str(e.get("url", ""))[:2048], "message": _quote(str(e.get("message", "")))}
                for e in (exc.data or {}).get("elicitations", [])
                if isinstance(e, Mapping)
            ][:5]
            return ToolError(
                ErrorCode.INPUT_REQUIRED,
                f"{self.namespace}.{name} did not run: the MCP server asks the user to open a page first "
                f"({'; '.join(u['message'] or u['url'] for u in urls) or said}). Ask the user to open it, then "
                "call again.",
                details={**details, "urls": urls},
            )
        if exc.code == INVALID_PARAMS:
            return ToolError(
                "INVALID_ARGUMENTS",
                f"The MCP server {self.namespace!r} refused the arguments of {self.namespace}.{name}: {said}",
                details=details,
            )
        if exc.code == METHOD_NOT_FOUND:
            return ToolError(
                "INVALID_STATE",
                f"The MCP server {self.namespace!r} does not offer {name} (any more): {said}",
                details=details,
            )
        return ToolError(
            "INVALID_STATE",
            f"The MCP server {self.namespace!r} answered {self.namespace}.{name} with an error "
            f"(JSON-RPC {exc.code}): {said}",
            details=details,
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
            remote = (result.meta or {}).get(_MAITRE_ERROR)
            if isinstance(remote, Mapping):
                raise self._remote_error(name, remote, text)
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

    def _remote_error(self, name: str, error: Mapping[str, Any], text: str) -> ToolError:
        """A maitre server's structured ToolError, read as untrusted data: the code (if it is one an
        upstream may give), its message, and the approval id of an APPROVAL_REQUIRED."""
        tool = f"{self.namespace}.{name}"
        try:
            code = ErrorCode(str(error.get("code")))
        except ValueError:
            code = ErrorCode.INVALID_STATE
        message = _quote(str(error.get("message") or text or "(no message)"), 1000)
        remote_details = error.get("details")
        remote_details = remote_details if isinstance(remote_details, Mapping) else {}
        details: dict[str, Any] = {
            "upstream": self.namespace,
            "tool": tool,
            "remote_code": str(error.get("code")),
        }
        if code is ErrorCode.APPROVAL_REQUIRED:
            approval_id = remote_details.get("approval_id")
            if isinstance(approval_id, str) and _ID.match(approval_id):
                details["approval_id"] = approval_id
                for key in ("call_hash", "expires_at"):
                    value = remote_details.get(key)
                    if isinstance(value, str | int | float) and not isinstance(value, bool):
                        details[key] = value if not isinstance(value, str) else value[:128]
                return ToolError(
                    ErrorCode.APPROVAL_REQUIRED,
                    f"{tool} needs a human approval on the MCP server {self.namespace!r} before it runs "
                    f"(approval id {approval_id}); the server said: {message} Do not call it again with "
                    "other arguments to get around this; once someone allowed to approve it there has done "
                    "so, the host retries this exact call with that approval id.",
                    details=details,
                )
            code = ErrorCode.INVALID_STATE  # an approval without an id the host could ever retry with
        if code not in _REMOTE_CODES:
            code = ErrorCode.INVALID_STATE
        retry_after = error.get("retry_after_s")
        return ToolError(
            code,
            f"{tool} reported an error ({error.get('code')}): {message}",
            details=details,
            retry_after_s=float(min(retry_after, 3600))
            if isinstance(retry_after, int | float) and not isinstance(retry_after, bool) and retry_after >= 0
            else None,
        )


def _asked_of(caller: McpCallContext) -> Any:
    """The input-required driver's `dispatch` for a 2025-11-25 caller: each question the upstream
    asked becomes the same server-to-client request on the caller's call (elicitation, sampling, its
    roots), if the caller declared the capability; otherwise the upstream is told it is not supported."""

    async def answer(key: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        capability = _CAPABILITY_OF.get(request.method)
        if capability is None or not caller.supports(capability):
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{request.method} not supported")
        session, related = caller.session, caller.request_id
        params = request.params
        if isinstance(params, types.ElicitRequestFormParams):
            elicited: types.ElicitResult = await session.elicit_form(
                params.message, params.requested_schema, related_request_id=related
            )
            return elicited
        if isinstance(params, types.ElicitRequestURLParams):
            opened: types.ElicitResult = await session.elicit_url(
                params.message, params.url, params.elicitation_id, related_request_id=related
            )
            return opened
        if isinstance(params, types.CreateMessageRequestParams):
            sampled: types.CreateMessageResult = await session.create_message(
                params.messages,
                max_tokens=params.max_tokens,
                system_prompt=params.system_prompt,
                include_context=params.include_context,
                temperature=params.temperature,
                stop_sequences=params.stop_sequences,
                model_preferences=params.model_preferences,
                related_request_id=related,
            )
            return sampled
        roots: types.ListRootsResult = await session.list_roots()
        return roots

    return answer


def _wants_progress(caller: McpCallContext) -> bool:
    """Whether the caller's request carries a progress token (so the upstream call is asked for
    progress, through the SDK session). The SDK keeps the token on the request's outbound channel
    (`progress_token` on 2026-07-28, `_progress_token` before); when neither can be read the answer
    is True: the SDK path relays progress whatever the caller sent."""
    outbound = getattr(caller.session, "_request_outbound", None)
    for attribute in ("progress_token", "_progress_token"):
        if hasattr(outbound, attribute):
            return getattr(outbound, attribute) is not None
    return True


_MAX_RELAYED_PROGRESS = 1000
"""The most progress notifications one upstream call passes on to its caller (a flood stops there)."""


def _progress_relay(caller: McpCallContext) -> ProgressFnT:
    """The upstream call's `progress_callback`: its progress, on the caller's progress token (a no-op
    when the caller sent none). Only increasing values pass (the spec's rule, which also stops a
    flood of repeats), at most `_MAX_RELAYED_PROGRESS` of them; the message is shortened."""
    last: float | None = None
    sent = 0

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        nonlocal last, sent
        if (last is not None and progress <= last) or sent >= _MAX_RELAYED_PROGRESS:
            return
        last, sent = progress, sent + 1
        try:
            await caller.report_progress(progress, total, _quote(message) if message else None)
        except Exception as exc:  # the caller went away: the upstream call goes on
            logger.debug("progress not relayed: %s", type(exc).__name__)

    return relay


def _with_defaults(callback: ElicitationFnT) -> ElicitationFnT:
    """The host's elicitation callback, whose accepted form answers get the schema's `default` for
    every field they leave out (SEP-1034: the defaults are what the form would have shown)."""

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer = await callback(context, params)
        if (
            isinstance(answer, types.ElicitResult)
            and answer.action == "accept"
            and isinstance(params, types.ElicitRequestFormParams)
        ):
            properties = (params.requested_schema or {}).get("properties") or {}
            content = dict(answer.content or {})
            for field_name, schema in properties.items():
                if field_name not in content and isinstance(schema, Mapping) and "default" in schema:
                    content[field_name] = schema["default"]
            answer = answer.model_copy(update={"content": content})
        return answer

    return elicit


def _describe_request(request: types.InputRequest) -> dict[str, Any]:
    """What a server asked, for an error the model and the host read (its text is quoted, short)."""
    params = request.params
    if isinstance(request, types.ElicitRequest) and isinstance(params, types.ElicitRequestURLParams):
        return {
            "method": request.method,
            "mode": "url",
            "message": _quote(params.message),
            "url": params.url[:2048],
            "summary": f"it asks the user to open {params.url[:200]}: {_quote(params.message)!r}",
        }
    if isinstance(request, types.ElicitRequest) and isinstance(params, types.ElicitRequestFormParams):
        fields = [str(k)[:64] for k in ((params.requested_schema or {}).get("properties") or {})][:20]
        return {
            "method": request.method,
            "mode": "form",
            "message": _quote(params.message),
            "fields": fields,
            "summary": f"it asks the user {_quote(params.message)!r} (fields: {', '.join(fields) or 'none'})",
        }
    if isinstance(request, types.CreateMessageRequest) and isinstance(
        params, types.CreateMessageRequestParams
    ):
        return {
            "method": request.method,
            "messages": len(params.messages),
            "max_tokens": params.max_tokens,
            "summary": f"it asks the client's model for a completion ({len(params.messages)} message(s))",
        }
    return {"method": request.method, "summary": "it asks for the client's roots (the folders it may see)"}


def _quote(text: str, limit: int = _SHOWN) -> str:
    """A server's own text, shortened and on one line (it is untrusted: data, not instructions)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value if not isinstance(value, str) else _quote(value)
    if isinstance(value, Mapping):
        return {str(k)[:64]: _jsonable(v) for k, v in list(value.items())[:20]}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value[:20]]
    return _quote(str(value))


def _cause(exc: BaseException | None) -> str:
    """A short name for what broke: the innermost exception's type (and the SDK's message)."""
    if exc is None:
        return "no answer"
    leaf = _leaves(exc)[0]
    if isinstance(leaf, MCPError):
        return f"{'connection closed' if leaf.code == CONNECTION_CLOSED else _quote(leaf.message, 80)}"
    return type(leaf).__name__


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or `exc` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


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

    The imported tools share one long-lived session per upstream (the import's own), reopened when it
    breaks. The import report is on `toolbox.mcp_reports[namespace]`, the upstream on
    `toolbox.mcp_upstreams[namespace]`; `await aclose_upstreams(toolbox)` closes their sessions.
    """
    upstream = McpUpstream(target, namespace=namespace, lockfile=lockfile, **options)
    try:
        box = await upstream.toolbox(into)
    except BaseException:
        await upstream.aclose()
        raise
    reports = getattr(box, "mcp_reports", None)
    if reports is None:
        reports = {}
        box.mcp_reports = reports  # type: ignore[attr-defined]
    reports[namespace] = upstream.report
    upstreams = getattr(box, "mcp_upstreams", None)
    if upstreams is None:
        upstreams = {}
        box.mcp_upstreams = upstreams  # type: ignore[attr-defined]
    previous = upstreams.get(namespace)
    upstreams[namespace] = upstream
    if previous is not None and previous is not upstream:
        await previous.aclose()
    return box


async def aclose_upstreams(box: Toolbox) -> None:
    """Close the upstream sessions the MCP tools imported into `box` hold (`toolbox_from_mcp`)."""
    upstreams: dict[str, McpUpstream] = getattr(box, "mcp_upstreams", None) or {}
    for upstream in list(upstreams.values()):
        await upstream.aclose()
