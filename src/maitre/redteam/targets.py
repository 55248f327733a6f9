"""What the red team attacks: a gate in this process, or an MCP server over HTTP or stdio.

Both answer the same three questions - what tools do you list, what happens to this call, may a
second person approve this request - so every plugin runs unchanged against a `Toolbox`, a `Gate`,
an `Agent`'s gate, a `maitre serve`, a plain-SDK server or an npm peer:

- `GateTarget` plays a hostile *model*: calls go through the gate with the principal the red team
  chooses (`--principal`, `--tenant`), in runs it names, and a second principal of the same
  tenant can approve (the approval-bypass plugin needs a real approval to try to replay or edit).
- `McpTarget` plays a hostile *client*: one SDK session per target (a fresh one for a request
  that carries a bearer token), maitre's `_meta` keys for approval ids, idempotency keys and
  runs (a server that does not know them ignores them, which is what the plugins test). It can
  approve only when it is given the server's stores (`--stores`, as `maitre approvals approve`
  would be): then a second person of the server's tenant decides, as in process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..gate import CallOptions, Gate
from ..types import Principal, ToolCall

__all__ = ["GateTarget", "McpTarget", "Reply", "Target"]

_TEXT_LIMIT = 2000


@dataclass(kw_only=True)
class Reply:
    """What a target answered to one call."""

    text: str
    is_error: bool
    error_code: str | None = None
    approval_id: str | None = None
    replayed: bool = False
    trust: str | None = None
    audit: dict[str, Any] | None = None
    """The gate's audit entry for the call (decision, error code, seq), when the red team can read it."""


class Target(Protocol):
    """**Protocol:** one thing to attack."""

    label: str
    """How reports name it (`examples/redteam/governed.py:box`, `http://127.0.0.1:8300/mcp`)."""
    kind: str
    """`toolbox`, `gate`, `agent`, `mcp-http` or `mcp-stdio`."""
    in_process: bool
    """Whether the red team chooses the principal (a gate here) or the server does (MCP)."""
    carries_tokens: bool
    """Whether a request can carry a bearer token (MCP over HTTP)."""

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tool definitions as a client would see them now (MCP wire shape)."""
        ...

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        run: str | None = None,
        approval_id: str | None = None,
        idempotency_key: str | None = None,
        token: str | None = None,
        principal: Principal | None = None,
    ) -> Reply:
        """Send one call and say what came back (never raises for the target's refusals)."""
        ...

    async def approve(self, approval_id: str) -> str | None:
        """Approve a pending request as a second person: None when done, else why it cannot."""
        ...

    async def aclose(self) -> None: ...


def _clip(text: str) -> str:
    return text if len(text) <= _TEXT_LIMIT else text[:_TEXT_LIMIT] + f"... ({len(text)} characters)"


class GateTarget:
    """A gate in this process: a Toolbox's default gate, a Gate of your own, or an Agent's gate."""

    in_process = True
    carries_tokens = False

    def __init__(self, gate: Gate, *, label: str, kind: str, principal: Principal) -> None:
        self.gate = gate
        self.label = label
        self.kind = kind
        self.principal = principal
        self._runs: dict[tuple[str, str, str], Any] = {}

    async def list_tools(self) -> list[dict[str, Any]]:
        return list(self.gate.toolbox.definitions("mcp"))

    def _run(self, name: str | None, principal: Principal) -> Any:
        if name is None:
            return None
        key = (principal.tenant, principal.user, name)
        if key not in self._runs:
            self._runs[key] = self.gate.new_run(principal)
        return self._runs[key]

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        run: str | None = None,
        approval_id: str | None = None,
        idempotency_key: str | None = None,
        token: str | None = None,
        principal: Principal | None = None,
    ) -> Reply:
        who = principal or self.principal
        options = CallOptions(approval_id=approval_id, idempotency_key=idempotency_key)
        call = ToolCall(id=f"rt-{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)
        result = await self.gate.call(call, who, self._run(run, who), options=options)
        error = result.error
        entry = await self.gate.stores.audit.last() if self.gate.recorders else None
        audit = (
            {
                "seq": entry.seq,
                "decision": entry.decision,
                "error_code": entry.error_code,
                "approval_id": entry.approval_id,
                "replayed": entry.replayed,
            }
            if entry is not None and entry.call_id == call.id
            else None
        )
        return Reply(
            audit=audit,
            text=_clip(result.content),
            is_error=result.is_error,
            error_code=None if error is None else str(error.code),
            approval_id=None if result.approval is None else result.approval.approval_id,
            replayed=result.replayed,
            trust=str(result.trust),
        )

    async def approve(self, approval_id: str) -> str | None:
        approver = Principal(
            user=f"{self.principal.user}-approver",
            tenant=self.principal.tenant,
            roles=frozenset({"approver"}),
        )
        try:
            await self.gate.approvals.approve(approval_id, approver)
        except Exception as exc:  # the refusal is the finding; report it, never crash the run
            return f"{type(exc).__name__}: {exc}"
        return None

    async def aclose(self) -> None:
        """Close the sessions of tools the gate imported from other MCP servers, if any."""
        try:
            from ..mcp.client import aclose_upstreams
        except ImportError:  # without the mcp extra nothing can have been imported
            return
        await aclose_upstreams(self.gate.toolbox)


class McpTarget:
    """An MCP server at an HTTP URL or started from a command on stdio."""

    in_process = False

    def __init__(
        self,
        *,
        url: str | None = None,
        command: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 20.0,
        approver_stores: str | None = None,
        tenant: str = "local",
    ) -> None:
        if (url is None) == (command is None):
            raise ValueError("an MCP target is a URL or a command, not both")
        self.url = url
        self.command = command
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.label = url or f"--stdio {command}"
        self.kind = "mcp-http" if url else "mcp-stdio"
        self.carries_tokens = url is not None
        self.approver_stores = approver_stores
        """The server's stores (`maitre serve --stores URL`): with them a second person can approve."""
        self.tenant = tenant
        """The tenant the server serves the red team as (`maitre serve --tenant`), for that approver."""
        self._stack = contextlib.AsyncExitStack()
        self._client: Any = None

    def _server(self, headers: Mapping[str, str]) -> Any:
        from mcp import StdioServerParameters

        from ..mcp.egress import guarded_http_transport

        if self.url is not None:  # a hostile server's replies are capped as an imported one's are (4 MiB)
            return guarded_http_transport(self.url, headers)
        assert self.command is not None
        parts = shlex.split(self.command)
        return StdioServerParameters(command=parts[0], args=parts[1:], env={**os.environ, **self.env})

    def _new_client(self, headers: Mapping[str, str] | None = None) -> Any:
        from mcp import Client

        return Client(self._server(headers or {}), read_timeout_seconds=self.timeout_s, cache=None)

    async def _session(self) -> Any:
        if self._client is None:
            self._client = await self._stack.enter_async_context(self._new_client())
        return self._client

    async def list_tools(self) -> list[dict[str, Any]]:
        client = await self._session()
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(50):  # pages, bounded: a hostile server could page forever
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call(
        self,
        name: str,
        arguments: Any,
        *,
        run: str | None = None,
        approval_id: str | None = None,
        idempotency_key: str | None = None,
        token: str | None = None,
        principal: Principal | None = None,
    ) -> Reply:
        from mcp import MCPError

        meta: dict[str, Any] = {}
        if run is not None:
            meta["io.maitre/runId"] = run
        if approval_id is not None:
            meta["io.maitre/approvalId"] = approval_id
        if idempotency_key is not None:
            meta["io.maitre/idempotencyKey"] = idempotency_key
        args = arguments if isinstance(arguments, dict) else {"_raw": arguments}
        try:
            if token is not None:
                async with self._new_client({"Authorization": f"Bearer {token}"}) as client:
                    result = await client.call_tool(name, args, meta=meta or None)
            else:
                client = await self._session()
                result = await client.call_tool(name, args, meta=meta or None)
        except MCPError as exc:
            return Reply(
                text=_clip(f"protocol error {exc.code}: {exc}"), is_error=True, error_code="PROTOCOL_ERROR"
            )
        except Exception as exc:  # a transport failure is the server refusing, in effect
            return Reply(
                text=_clip(f"{type(exc).__name__}: {exc}"), is_error=True, error_code="TRANSPORT_ERROR"
            )
        return _reply(result)

    async def approve(self, approval_id: str) -> str | None:
        """Approve in the server's stores as a second person of its tenant (needs `approver_stores`)."""
        if self.approver_stores is None:
            return "an MCP client cannot approve its own request; a person decides in the server's stores"
        from ..stores import open_stores
        from ..tools import Toolbox

        stores = await open_stores(self.approver_stores)
        try:
            approver = Principal(user="redteam-approver", tenant=self.tenant, roles=frozenset({"approver"}))
            await Gate(Toolbox(), stores=stores).approvals.approve(approval_id, approver)
        except Exception as exc:  # the refusal is evidence; report it, never crash the run
            return f"{type(exc).__name__}: {exc}"
        finally:
            await stores.close()
        return None

    async def aclose(self) -> None:
        await self._stack.aclose()


def _reply(result: Any) -> Reply:
    texts = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        texts.append(
            text if isinstance(text, str) else json.dumps(block.model_dump(mode="json"), default=str)
        )
    if result.structured_content is not None and not texts:
        texts.append(json.dumps(result.structured_content, default=str))
    meta = result.meta or {}
    error = meta.get("io.maitre/error") if isinstance(meta, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    approval = details.get("approval_id") if isinstance(details, dict) else None
    return Reply(
        text=_clip("\n".join(texts)),
        is_error=bool(result.is_error),
        error_code=str(code) if code else None,
        approval_id=str(approval) if approval else None,
        replayed=bool(meta.get("io.maitre/replayed")) if isinstance(meta, dict) else False,
        trust=str(meta["io.maitre/trust"]) if isinstance(meta, dict) and "io.maitre/trust" in meta else None,
    )
