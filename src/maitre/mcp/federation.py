"""The gateway's upstream resources and prompts, served as its own, each kept to its namespace.

`Federation` is the gateway's `ContentSource` (`MCPApp.add_source`): `resources/list`,
`resources/templates/list`, `resources/read`, `prompts/list`, `prompts/get` and
`completion/complete` answered from the upstreams that are up (`Gateway.upstreams`), each through
its long-lived session (`McpUpstream.session()`).

**Names.** No upstream can claim another's names:

- A prompt is `NAMESPACE.name`, as tools are; `prompts/get` of `web.define` reaches upstream
  `web` only, and only for a prompt `web` listed and the scan let through.
- A resource URI is rewritten to `maitre-upstream://NAMESPACE/ORIGINAL`, the upstream's own URI
  appended verbatim (`file:///notes/a.md` of upstream `docs` is
  `maitre-upstream://docs/file:///notes/a.md`). The rewrite is a prefix, so it is reversible and a
  template stays a template (RFC 6570 expansion is concatenation: the expanded gateway template is
  the prefix plus the upstream's expansion). A read goes to the namespace the URI names and nowhere
  else, with the prefix taken off; a URI of this scheme naming no configured upstream is an error,
  never tried elsewhere; a URI of another scheme is not the federation's (the app's own, or
  "Resource not found"). Contents an upstream returns are relabelled under its own namespace,
  whatever URI they claim.

**Untrusted.** What an upstream sends is data from a server maitre does not trust:

- Descriptions of resources, templates and prompts are scanned like tool definitions
  (`maitre.mcp.scanner.scan_tool`, against the other upstreams' tool names); a high-severity
  finding keeps the item out of the list (a prompt kept out cannot be fetched; a resource kept out
  cannot be read). Descriptions are capped at `MAX_DESCRIPTION_CHARS`.
- Text that reaches a model is fenced as a tool result is (`maitre.fence.fence_untrusted`): a
  resource's text contents, and the text of a prompt's messages and of resources embedded in them.
  Binary contents pass as they are. Every item and result carries `_meta`
  `io.maitre/trust: "untrusted"` and `io.maitre/source: "mcp:NAMESPACE"`; the upstream's own
  `io.maitre/*` keys are dropped, so it cannot claim trust.
- A read or a prompt is at most `max_read_bytes` (text and base64 blobs together, default 1 MiB;
  the upstream transport is itself bounded by `McpUpstream.max_response_bytes`); a list keeps at
  most `max_items` items of each kind per upstream.

**One upstream never breaks the others.** Lists are gathered from every upstream at once, each
within `list_timeout_s`; one that is down, slow or failing is left out of that answer (and logged),
the rest are served. A listing is kept until the upstream says it changed, comes up or goes down.
Reads and prompts wait at most `timeout_s`.

**Changes.** `on_change` listeners (the server, which tells 2026-07-28 listen streams and 2025-11-25
sessions) hear `resources` and `prompts` when an upstream comes up or goes down (`changed`), when a
2026-07-28 upstream says so on its `subscriptions/listen` stream, and, for a 2025-11-25 upstream,
when a re-listing every `poll_s` differs from the last (its `list_changed` notifications reach
`McpUpstream`'s own message handler, which follows tools only).

**Reads are logged, not gated.** A resource read or a prompt fetch has no side effect upstream
that maitre can see and no arguments a policy is written for, so it does not pass through the gate
(no approval, no audit-chain entry); each is logged (logger `maitre.mcp.federation`, INFO: who, which
upstream, which URI or prompt, how many bytes), and what it returns is fenced as untrusted.
Resource subscriptions (`resources/subscribe`) are not forwarded to upstreams.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged
from mcp.shared.uri_template import UriTemplate
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..fence import fence_untrusted
from .app import ListKind
from .scanner import scan_tool

if TYPE_CHECKING:
    from ..tools import Toolbox
    from .client import McpUpstream

__all__ = [
    "Federation",
    "MAX_DESCRIPTION_CHARS",
    "URI_SCHEME",
    "UpstreamSilent",
    "gateway_uri",
    "upstream_uri",
]

logger = logging.getLogger("maitre.mcp.federation")

URI_SCHEME = "maitre-upstream"
"""The scheme of the gateway's resource URIs: `maitre-upstream://NAMESPACE/ORIGINAL`."""
MAX_DESCRIPTION_CHARS = 4000
"""An upstream's description of a resource, template or prompt is cut to this many characters."""
_TRUST_META = "io.maitre/trust"
_SOURCE_META = "io.maitre/source"
_MAX_PAGES = 20
_MAX_COMPLETIONS = 100
_MAX_COMPLETION_CHARS = 1000

_Kind = Literal["resources", "templates", "prompts"]
_KINDS: tuple[_Kind, ...] = ("resources", "templates", "prompts")
_LISTED: dict[_Kind, ListKind] = {"resources": "resources", "templates": "resources", "prompts": "prompts"}


def gateway_uri(namespace: str, uri: str) -> str:
    """The gateway's URI (or URI template) for upstream `namespace`'s `uri`."""
    return f"{URI_SCHEME}://{namespace}/{uri}"


def upstream_uri(uri: str, namespaces: Iterable[str]) -> tuple[str, str] | None:
    """`(namespace, the upstream's URI)` for a gateway URI; None for a URI of another scheme.

    Raises `MCPError` (invalid params) for a gateway URI that names no namespace of `namespaces`
    or names nothing inside it: such a URI is refused, never routed to some other upstream.
    """
    prefix = f"{URI_SCHEME}://"
    if uri[: len(prefix)].lower() != prefix:
        return None
    rest = uri[len(prefix) :]
    owners = [ns for ns in namespaces if rest.startswith(f"{ns}/")]
    if not owners:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{uri[:200]!r} names no upstream of this gateway",
            data={"uri": uri[:200]},
        )
    namespace = max(owners, key=len)
    original = rest[len(namespace) + 1 :]
    if not original:
        raise MCPError(
            code=INVALID_PARAMS, message=f"{uri[:200]!r} names no resource", data={"uri": uri[:200]}
        )
    return namespace, original


class UpstreamSilent(RuntimeError):
    """An upstream did not answer two checks in a row (`Federation.watch`)."""


@dataclass
class _Listening:
    """Whether an upstream's `subscriptions/listen` stream is open (then its lists are not polled)."""

    now: bool = False


@dataclass
class _Listing:
    """What one upstream offers of one kind, after the scan: the gateway's items and the upstream
    names (prompt names, URIs) they came from."""

    items: list[dict[str, Any]] = field(default_factory=list)
    admitted: set[str] = field(default_factory=set)
    blocked: set[str] = field(default_factory=set)

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.items, sort_keys=True).encode()).hexdigest()


class Federation:
    """The resources and prompts of the upstreams in `upstreams` (namespace → `McpUpstream`).

    Args:
        upstreams: the upstreams that are up now, by namespace (a live mapping: the gateway adds
            and removes them as they come and go).
        namespaces: every configured namespace (up or not), which the gateway URIs may name.
        toolbox: the served tools; the other upstreams' tool names are what a description must
            not steer (the scanner's cross-references).
        list_timeout_s: how long one upstream's listing may take before it is left out.
        timeout_s: how long one read, prompt or completion may take.
        max_items: the most items of one kind kept from one upstream.
        max_read_bytes: the most one read or prompt may carry (text and base64 together).
        poll_s: how often each upstream is checked (`watch`) and, without a listen stream, listed
            again to see whether its lists changed.
    """

    def __init__(
        self,
        upstreams: Mapping[str, McpUpstream],
        namespaces: Iterable[str],
        *,
        toolbox: Toolbox | None = None,
        list_timeout_s: float = 5.0,
        timeout_s: float = 30.0,
        max_items: int = 1000,
        max_read_bytes: int = 1 << 20,
        poll_s: float = 30.0,
    ) -> None:
        self.upstreams = upstreams
        self.namespaces = tuple(namespaces)
        self.toolbox = toolbox
        self.list_timeout_s = list_timeout_s
        self.timeout_s = timeout_s
        self.max_items = max_items
        self.max_read_bytes = max_read_bytes
        self.poll_s = poll_s
        self._listings: dict[tuple[str, _Kind], _Listing] = {}
        self._listeners: list[Callable[[frozenset[ListKind]], None]] = []

    # -- changes ------------------------------------------------------------------------------------

    def on_change(self, listener: Callable[[frozenset[ListKind]], None]) -> None:
        """Call `listener` with the lists that changed (`resources`, `prompts`)."""
        self._listeners.append(listener)

    def changed(self, namespace: str, kinds: Iterable[_Kind] = _KINDS) -> None:
        """`namespace`'s lists of `kinds` changed (it came up, went down, or said so): list again."""
        told: set[ListKind] = set()
        for kind in kinds:
            self._listings.pop((namespace, kind), None)
            told.add(_LISTED[kind])
        for listener in list(self._listeners):
            try:
                listener(frozenset(told))
            except Exception:
                logger.exception("a list-changed listener failed")

    async def watch(self, namespace: str, upstream: McpUpstream) -> None:
        """Follow `namespace` while it is up; return never, raise `UpstreamSilent` when it stops
        answering.

        Every `poll_s` the upstream is asked something (its tools): two rounds in a row without an
        answer (a timeout, a broken connection; an MCP error is an answer) raise. Its resource and
        prompt lists are followed on a `subscriptions/listen` stream (2026-07-28) or by the
        session's own list_changed notifications (2025-11-25); without a stream they are also
        listed again every `poll_s` (a server need not notify), a difference announced.
        """
        listening = _Listening()

        async def told(message: Any) -> None:  # a 2025-11-25 session's own notifications
            if isinstance(message, types.ResourceListChangedNotification):
                self.changed(namespace, ("resources", "templates"))
            elif isinstance(message, types.PromptListChangedNotification):
                self.changed(namespace, ("prompts",))

        stop_telling = upstream.on_notification(told)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._listen_logged, namespace, upstream, listening)
                await self._poll(namespace, upstream, listening)
        finally:
            stop_telling()

    async def _listen_logged(self, namespace: str, upstream: McpUpstream, listening: _Listening) -> None:
        try:
            await self._listen(namespace, upstream, listening)
        except Exception as exc:
            logger.info(
                "upstream %s: resource/prompt change stream ended (%s)", namespace, type(exc).__name__
            )

    async def _listen(self, namespace: str, upstream: McpUpstream, listening: _Listening) -> None:
        async with upstream.session() as client:
            if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                return
            caps = client.server_capabilities
            if caps.resources is None and caps.prompts is None:
                return
            try:
                async with client.listen(
                    resources_list_changed=caps.resources is not None,
                    prompts_list_changed=caps.prompts is not None,
                ) as events:
                    listening.now = True
                    async for event in events:
                        if isinstance(event, ResourcesListChanged):
                            self.changed(namespace, ("resources", "templates"))
                        elif isinstance(event, PromptsListChanged):
                            self.changed(namespace, ("prompts",))
            except ListenNotSupportedError:
                return
            finally:
                listening.now = False
        # The stream ended: a change may have been missed, and from now on the poll lists.
        self.changed(namespace)

    async def _poll(self, namespace: str, upstream: McpUpstream, listening: _Listening) -> None:
        seen: dict[_Kind, str] = {}
        silent = 0
        while True:
            await anyio.sleep(max(self.poll_s, 0.05))
            try:
                with anyio.fail_after(self.list_timeout_s):
                    async with upstream.session() as client:
                        await client.list_tools()
                silent = 0
            except MCPError:
                silent = 0  # it answered, with an error: it is there
            except Exception as exc:
                silent += 1
                logger.info("upstream %s: no answer to a check (%s)", namespace, type(exc).__name__)
                if silent >= 2:
                    raise UpstreamSilent(f"no answer to two checks {self.poll_s:g} s apart") from exc
                continue
            if listening.now:
                continue
            for kind in _KINDS:
                try:
                    with anyio.fail_after(self.list_timeout_s):
                        listing = await self._fetch(namespace, upstream, kind)
                except Exception as exc:
                    logger.info("upstream %s: listing %s failed (%s)", namespace, kind, type(exc).__name__)
                    continue
                fingerprint = listing.fingerprint()
                if kind in seen and seen[kind] != fingerprint:
                    self.changed(namespace, (kind,))
                seen[kind] = fingerprint
                self._listings.setdefault((namespace, kind), listing)

    # -- listing --------------------------------------------------------------------------------------

    async def list_resources(self) -> list[types.Resource]:
        return [types.Resource.model_validate(i) for i in await self._gather("resources")]

    async def list_templates(self) -> list[types.ResourceTemplate]:
        return [types.ResourceTemplate.model_validate(i) for i in await self._gather("templates")]

    async def list_prompts(self) -> list[types.Prompt]:
        return [types.Prompt.model_validate(i) for i in await self._gather("prompts")]

    async def _gather(self, kind: _Kind) -> list[dict[str, Any]]:
        """Every up upstream's items of `kind`, in configuration order; the slow and failing left out."""
        found: dict[str, _Listing] = {}

        async def one(namespace: str) -> None:
            listing = await self._listing(namespace, kind)
            if listing is not None:
                found[namespace] = listing

        async with anyio.create_task_group() as tg:
            for namespace in self.namespaces:
                if namespace in self.upstreams:
                    tg.start_soon(one, namespace)
        return [item for ns in self.namespaces if ns in found for item in found[ns].items]

    async def _listing(self, namespace: str, kind: _Kind) -> _Listing | None:
        cached = self._listings.get((namespace, kind))
        if cached is not None:
            return cached
        upstream = self.upstreams.get(namespace)
        if upstream is None:
            return None
        try:
            with anyio.fail_after(self.list_timeout_s):
                listing = await self._fetch(namespace, upstream, kind)
        except Exception as exc:
            why = "no answer in time" if isinstance(exc, TimeoutError) else type(exc).__name__
            logger.warning("upstream %s: %s left out of the list (%s)", namespace, kind, why)
            return None
        if self.upstreams.get(namespace) is upstream:  # not gone (or replaced) while it was listed
            self._listings[(namespace, kind)] = listing
        return listing

    async def _fetch(self, namespace: str, upstream: McpUpstream, kind: _Kind) -> _Listing:
        """List `kind` on the upstream (bounded pages and items), scan and rewrite each item."""
        raw: list[dict[str, Any]] = []
        async with upstream.session() as client:
            caps = client.server_capabilities
            if (caps.prompts if kind == "prompts" else caps.resources) is None:
                return _Listing()
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                page: Any
                if kind == "resources":
                    page = await client.list_resources(cursor=cursor)
                    entries: list[Any] = list(page.resources)
                elif kind == "templates":
                    page = await client.list_resource_templates(cursor=cursor)
                    entries = list(page.resource_templates)
                else:
                    page = await client.list_prompts(cursor=cursor)
                    entries = list(page.prompts)
                raw += [e.model_dump(by_alias=True, mode="json", exclude_none=True) for e in entries]
                cursor = page.next_cursor
                if cursor is None or len(raw) >= self.max_items:
                    break
        if len(raw) > self.max_items:
            logger.warning(
                "upstream %s offers more than %d %s; the rest are left out", namespace, self.max_items, kind
            )
            raw = raw[: self.max_items]
        return self._admit(namespace, kind, raw)

    def _admit(self, namespace: str, kind: _Kind, raw: list[dict[str, Any]]) -> _Listing:
        listing = _Listing()
        foreign = self._foreign_tools(namespace)
        key = {"resources": "uri", "templates": "uriTemplate", "prompts": "name"}[kind]
        for item in raw:
            ident = item.get(key)
            if not isinstance(ident, str) or not ident:
                continue
            high = [
                f for f in scan_tool(item, server=namespace, foreign_tools=foreign) if f.severity == "high"
            ]
            if high:
                listing.blocked.add(ident)
                logger.warning(
                    "upstream %s: %s %r kept out by the scan: %s",
                    namespace,
                    kind[:-1],
                    ident[:200],
                    "; ".join(f.render() for f in high[:3]),
                )
                continue
            listing.admitted.add(ident)
            rewritten = dict(item)
            if kind == "prompts":
                rewritten["name"] = f"{namespace}.{ident}"
            else:
                rewritten[key] = gateway_uri(namespace, ident)
                if isinstance(item.get("name"), str):
                    rewritten["name"] = f"{namespace}.{item['name']}"
            description = item.get("description")
            if isinstance(description, str) and len(description) > MAX_DESCRIPTION_CHARS:
                rewritten["description"] = description[:MAX_DESCRIPTION_CHARS] + "…"
            rewritten["_meta"] = _labelled(item.get("_meta"), namespace)
            listing.items.append(rewritten)
        return listing

    def _foreign_tools(self, namespace: str) -> dict[str, str]:
        """`{tool name: namespace}` for the other upstreams' tools."""
        if self.toolbox is None:
            return {}
        foreign: dict[str, str] = {}
        for tool in self.toolbox:
            owner = tool.namespace
            if owner and owner != namespace and tool.name.startswith(f"{owner}."):
                foreign[tool.name[len(owner) + 1 :]] = owner
        return foreign

    # -- reading ------------------------------------------------------------------------------------

    async def read_resource(self, uri: str) -> types.ReadResourceResult | None:
        parsed = upstream_uri(uri, self.namespaces)
        if parsed is None:
            return None
        namespace, original = parsed
        upstream = self._up(namespace)
        if await self._blocked(namespace, original):
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"resource {uri[:200]!r} was kept out by the gateway's scan",
                data={"uri": uri[:200]},
            )
        result = await self._ask(
            namespace,
            f"reading {original[:200]!r}",
            lambda c: c.read_resource(original, cache_mode="bypass"),
            upstream,
        )
        contents: list[Any] = []
        size = 0
        source = f"mcp:{namespace}"
        for content in result.contents:
            data = content.model_dump(by_alias=True, mode="json", exclude_none=True)
            own_uri = str(data.get("uri") or original)
            data["uri"] = gateway_uri(namespace, own_uri)
            data["_meta"] = _labelled(data.get("_meta"), namespace)
            if isinstance(data.get("text"), str):
                size += len(data["text"].encode("utf-8", "surrogatepass"))
                data["text"] = fence_untrusted(data["text"], tool=own_uri, source=source)
            elif isinstance(data.get("blob"), str):
                size += len(data["blob"])
            if size > self.max_read_bytes:
                raise self._too_large(namespace, f"resource {original[:200]!r}")
            contents.append(data)
        self._log("read resource %s", namespace, original, size)
        return types.ReadResourceResult.model_validate(
            {"contents": contents, "_meta": _labelled(None, namespace)}
        )

    async def _blocked(self, namespace: str, original: str) -> bool:
        """Whether the scan kept `original` out: a listed resource, or a URI of a listed template.
        (Listed first if need be; an upstream whose lists cannot be had blocks nothing here.)"""
        resources = await self._listing(namespace, "resources")
        if resources is not None and original in resources.blocked:
            return True
        templates = await self._listing(namespace, "templates")
        for template in templates.blocked if templates is not None else ():
            try:
                if UriTemplate.parse(template).match(original) is not None:
                    return True
            except Exception:  # a template the SDK cannot parse: compare it as a plain string
                if template == original:
                    return True
        return False

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult | None:
        owned = self._owner(name)
        if owned is None:
            return None
        namespace, upstream_name = owned
        upstream = self._up(namespace)
        listing = await self._listing(namespace, "prompts")
        if listing is None or upstream_name not in listing.admitted:
            why = (
                "was kept out by the gateway's scan"
                if listing is not None and upstream_name in listing.blocked
                else "is not offered"
            )
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name} ({why})")
        result = await self._ask(
            namespace, f"prompt {upstream_name!r}", lambda c: c.get_prompt(upstream_name, arguments), upstream
        )
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        source = f"mcp:{namespace}"
        size = 0
        for message in data.get("messages", []):
            content = message.get("content")
            if not isinstance(content, dict):
                continue
            size += _relabel_content(content, namespace, upstream_name, source)
        if isinstance(data.get("description"), str):
            data["description"] = data["description"][:MAX_DESCRIPTION_CHARS]
        if size > self.max_read_bytes:
            raise self._too_large(namespace, f"prompt {upstream_name!r}")
        data["_meta"] = _labelled(data.get("_meta"), namespace)
        self._log("got prompt %s", namespace, upstream_name, size)
        return types.GetPromptResult.model_validate(data)

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult | None:
        ref = params.ref
        forwarded: types.PromptReference | types.ResourceTemplateReference
        if isinstance(ref, types.PromptReference):
            owned = self._owner(ref.name)
            if owned is None:
                return None
            namespace, upstream_name = owned
            forwarded = types.PromptReference(type="ref/prompt", name=upstream_name)
        else:
            parsed = upstream_uri(str(ref.uri), self.namespaces)
            if parsed is None:
                return None
            namespace, original = parsed
            forwarded = types.ResourceTemplateReference(type="ref/resource", uri=original)
        upstream = self._up(namespace)
        caps = None
        async with upstream.session() as client:
            caps = client.server_capabilities
        if caps.completions is None:
            return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))
        context = dict(params.context.arguments or {}) if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        result = await self._ask(
            namespace, "completion", lambda c: c.complete(forwarded, argument, context), upstream
        )
        values = [str(v)[:_MAX_COMPLETION_CHARS] for v in result.completion.values[:_MAX_COMPLETIONS]]
        return types.CompleteResult(
            completion=types.Completion(
                values=values,
                total=result.completion.total,
                has_more=bool(result.completion.has_more) or len(result.completion.values) > len(values),
            )
        )

    # -- helpers --------------------------------------------------------------------------------------

    def _owner(self, name: str) -> tuple[str, str] | None:
        """`(namespace, upstream name)` for a gateway prompt name `NAMESPACE.name`."""
        owners = [ns for ns in self.namespaces if name.startswith(f"{ns}.") and len(name) > len(ns) + 1]
        if not owners:
            return None
        namespace = max(owners, key=len)
        return namespace, name[len(namespace) + 1 :]

    def _up(self, namespace: str) -> McpUpstream:
        upstream = self.upstreams.get(namespace)
        if upstream is None:
            raise MCPError(
                code=INTERNAL_ERROR, message=f"upstream {namespace} is unavailable; try again later"
            )
        return upstream

    async def _ask(
        self, namespace: str, what: str, request: Callable[[Any], Any], upstream: McpUpstream
    ) -> Any:
        """`request(client)` on the upstream's session within `timeout_s`; its failures as MCPError."""
        try:
            with anyio.fail_after(self.timeout_s):
                async with upstream.session() as client:
                    return await request(client)
        except MCPError as exc:
            text = " ".join(str(exc.error.message).split())[:300]
            raise MCPError(code=exc.error.code, message=f"upstream {namespace}, {what}: {text}") from None
        except TimeoutError:
            raise MCPError(
                code=INTERNAL_ERROR, message=f"upstream {namespace} did not answer in time ({what})"
            ) from None
        except Exception as exc:
            logger.warning("upstream %s: %s failed (%s)", namespace, what, type(exc).__name__)
            raise MCPError(
                code=INTERNAL_ERROR, message=f"upstream {namespace} is unavailable ({what}); try again later"
            ) from None

    def _too_large(self, namespace: str, what: str) -> MCPError:
        return MCPError(
            code=INTERNAL_ERROR,
            message=f"upstream {namespace}: {what} is larger than the gateway's {self.max_read_bytes}-byte limit",
        )

    def _log(self, action: str, namespace: str, name: str, size: int) -> None:
        from .auth import principal_from_request

        principal = principal_from_request()
        who = f"{principal.tenant}/{principal.user}" if principal is not None else "unauthenticated"
        logger.info(action + " from upstream %s for %s (%d bytes)", name[:200], namespace, who, size)


def _labelled(meta: Any, namespace: str) -> dict[str, Any]:
    """An upstream's `_meta` without any `io.maitre/*` key of its own, labelled untrusted and sourced."""
    kept = (
        {k: v for k, v in meta.items() if not str(k).startswith("io.maitre/")}
        if isinstance(meta, dict)
        else {}
    )
    return {**kept, _TRUST_META: "untrusted", _SOURCE_META: f"mcp:{namespace}"}


def _relabel_content(content: dict[str, Any], namespace: str, tool: str, source: str) -> int:
    """Fence a prompt message's text and rewrite the URIs it carries; returns its size in bytes."""
    size = 0
    kind = content.get("type")
    if kind == "text" and isinstance(content.get("text"), str):
        size += len(content["text"].encode("utf-8", "surrogatepass"))
        content["text"] = fence_untrusted(content["text"], tool=tool, source=source)
    elif kind == "resource" and isinstance(content.get("resource"), dict):
        embedded = content["resource"]
        own_uri = str(embedded.get("uri") or "")
        embedded["uri"] = gateway_uri(namespace, own_uri)
        embedded["_meta"] = _labelled(embedded.get("_meta"), namespace)
        if isinstance(embedded.get("text"), str):
            size += len(embedded["text"].encode("utf-8", "surrogatepass"))
            embedded["text"] = fence_untrusted(embedded["text"], tool=own_uri, source=source)
        elif isinstance(embedded.get("blob"), str):
            size += len(embedded["blob"])
    elif kind == "resource_link" and isinstance(content.get("uri"), str):
        content["uri"] = gateway_uri(namespace, content["uri"])
    elif isinstance(content.get("data"), str):
        size += len(content["data"])
    content["_meta"] = _labelled(content.get("_meta"), namespace)
    return size
