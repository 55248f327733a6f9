"""`Gateway`: many upstream MCP servers behind one governed endpoint (`maitre gateway`).

Every upstream of the configuration (`[mcp.upstreams.NAME]`; NAME is its namespace) is imported
into ONE `Toolbox` with `McpUpstream`: namespaced (`NAME.tool`), untrusted, held to its pins in the
lockfile (`[mcp] lockfile`; a tool not pinned as offered stays out) and scanned with
`scan="block"` (a high-severity finding, including a name that shadows another upstream's, keeps
a tool out). Annotations lower policy only for the upstreams `trust_annotations` names; every
other tool is destructive and high risk whatever it claims. The toolbox is then served through
one gate, over the configured stores, by the same machinery as `maitre serve`
(`serve.run_plan`), so policy, approvals, budgets, idempotency and audit apply to every call.

The upstreams' resources and prompts are served too (`maitre.mcp.federation.Federation`, the
app's source: prompts as `NAMESPACE.name`, resource URIs as `maitre-upstream://NAMESPACE/...`,
scanned, fenced, bounded). When an upstream comes up or goes down, the federation says its
resources and prompts changed (its tools come and go through the toolbox), and the server tells
every client, both protocol eras. `health()` is what `GET /healthz` answers.

Sessions are long-lived: each upstream is held open (`async with McpUpstream`) by a task of its
own for as long as the gateway runs, watching for drift (list_changed, periodic re-checks).

One upstream does not stop the others:

- **Down at start.** It is reported on stderr, its tools are absent, and it is tried again in the
  background, waiting 0.5 s, then twice as long each time up to `retry_max_s`. When it answers,
  its tools are added to the toolbox; the served toolbox tells the server, which tells
  `subscriptions/listen` streams (2026-07-28) that the tool list changed.
- **Down mid-run.** Only calls to its own tools fail (TEMPORARY_UNAVAILABLE, retryable); its
  session is reopened by a later call once it is back. If the held session itself ends with an
  error, or the upstream leaves two checks `poll_s` apart unanswered (`Federation.watch`), it is
  "down": its tools are taken out, clients are told, and it is retried as at start.

No token passthrough: an upstream receives only its own configured headers and OAuth credential
(`maitre.mcp.upstream_auth`), never the caller's bearer token (the gate hands the tool handler the
validated arguments only).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..tools import Toolbox
from .federation import Federation

if TYPE_CHECKING:
    from ..config.schema import UpstreamConfig
    from .client import McpUpstream
    from .pinning import Lockfile

__all__ = ["Gateway", "RETRY_FIRST_S"]

logger = logging.getLogger("maitre.mcp.gateway")

RETRY_FIRST_S = 0.5
"""How long the gateway waits before trying an unreachable upstream again the first time."""


class Gateway:
    """The upstreams of `upstreams` (namespace → `UpstreamConfig`) imported into `self.toolbox`.

    `async with Gateway(...)` connects to each (concurrently; it returns once each has answered or
    failed its first attempt) and keeps them open until the block ends. `status[name]` says where
    each upstream is: "connecting", "up" or "down: <why>".

    Args:
        upstreams: the `[mcp.upstreams.NAME]` sections; a `private_key_file` must already be
            resolved against the configuration file's folder.
        lockfile: the pins every upstream's tools are held to.
        trust_annotations: namespaces whose annotations may lower policy.
        retry_max_s: the longest wait between two attempts to reach an upstream that is down.
        timeout_s: how long one attempt (and one upstream request) may take.
        token_dir: where OAuth tokens are cached (default: `upstream_auth`'s).
        list_timeout_s: how long one upstream's resource or prompt listing may take before that
            upstream is left out of the answer.
        poll_s: how often a 2025-11-25 upstream's resources and prompts are listed again to see
            whether they changed.
    """

    def __init__(
        self,
        upstreams: Mapping[str, UpstreamConfig],
        *,
        lockfile: Lockfile,
        trust_annotations: Iterable[str] = (),
        retry_max_s: float = 30.0,
        timeout_s: float = 30.0,
        token_dir: str | os.PathLike[str] | None = None,
        list_timeout_s: float = 5.0,
        poll_s: float = 30.0,
    ) -> None:
        self.configs = dict(upstreams)
        self.lockfile = lockfile
        self.trust_annotations = frozenset(trust_annotations)
        unknown = sorted(self.trust_annotations - set(self.configs))
        if unknown:
            from ..exceptions import UserError

            raise UserError(
                f"trust_annotations names {', '.join(unknown)}, which no [mcp.upstreams] section is"
            )
        self.retry_max_s = retry_max_s
        self.timeout_s = timeout_s
        self.token_dir = token_dir
        self.toolbox = Toolbox()
        self.status: dict[str, str] = dict.fromkeys(self.configs, "connecting")
        self.upstreams: dict[str, McpUpstream] = {}
        """The upstreams that are up now, by namespace."""
        self.federation = Federation(
            self.upstreams,
            self.configs,
            toolbox=self.toolbox,
            list_timeout_s=list_timeout_s,
            timeout_s=timeout_s,
            poll_s=poll_s,
        )
        """Their resources and prompts (the served app's source)."""
        self._tg: anyio.abc.TaskGroup | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        first = {name: anyio.Event() for name in self.configs}
        for name in self.configs:
            tg.start_soon(self._keep, name, first[name])
        try:
            for event in first.values():
                await event.wait()
        except BaseException as exc:
            tg.cancel_scope.cancel()
            await tg.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        tg, self._tg = self._tg, None
        if tg is not None:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)

    # -- one upstream ---------------------------------------------------------------------------

    def _upstream(self, name: str) -> McpUpstream:
        """A new `McpUpstream` for `name`: reached, authenticated and overridden as its section says
        (`upstream_options`: headers, OAuth or per-caller token exchange, per-tool policy)."""
        from .client import McpUpstream
        from .upstream_auth import upstream_options

        return McpUpstream(
            self.configs[name].target(),
            namespace=name,
            lockfile=self.lockfile,
            scan="block",
            trust_annotations=name in self.trust_annotations,
            timeout_s=self.timeout_s,
            **upstream_options(name, self.configs[name], token_dir=self.token_dir),
        )

    async def _keep(self, name: str, first: anyio.Event) -> None:
        """Hold `name` open for the gateway's life; while it is down, try again with backoff."""
        delay = RETRY_FIRST_S
        while True:
            try:
                upstream = self._upstream(name)
                async with upstream:  # an unreachable server fails here, within timeout_s
                    await upstream.toolbox(into=self.toolbox)
                    self.upstreams[name] = upstream
                    self.status[name] = "up"
                    imported = upstream.report.imported
                    logger.warning(
                        "upstream %s is up with %d tool(s)%s",
                        name,
                        len(imported),
                        "" if imported else f" (none pinned as offered: maitre mcp pin --namespace {name})",
                    )
                    self.federation.changed(name)
                    first.set()
                    delay = RETRY_FIRST_S
                    await self.federation.watch(name, upstream)  # never returns
            except Exception as exc:
                self._down(name, exc, delay)
            finally:
                was_up = self.upstreams.pop(name, None) is not None
                self._remove_tools(name)
                if was_up:
                    self.federation.changed(name)
            first.set()
            await anyio.sleep(delay)
            delay = min(delay * 2, self.retry_max_s)

    def _down(self, name: str, exc: BaseException, delay: float) -> None:
        why = _reason(exc)
        self.status[name] = f"down: {why}"
        logger.warning("upstream %s is unavailable (%s); trying again in %.1f s", name, why, delay)

    def health(self) -> dict[str, Any]:
        """How many upstreams are up, down or still connecting, and the overall status: "ok" (all
        up), "degraded" (some up: the gateway still serves those) or "down" (none up).

        Counts only: this is answered without authentication, so no name, URL or error text."""
        counts = {"up": 0, "down": 0, "connecting": 0}
        for state in self.status.values():
            counts["up" if state == "up" else "connecting" if state == "connecting" else "down"] += 1
        total = len(self.status)
        status = "ok" if counts["up"] == total else "degraded" if counts["up"] else "down"
        return {"status": status, "upstreams": counts}

    def _remove_tools(self, name: str) -> None:
        for tool in list(self.toolbox):
            if tool.namespace == name:
                self.toolbox.remove(tool.name)


def _reason(exc: BaseException) -> str:
    """One line for why an attempt failed (the innermost exception of a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    cause = exc.__cause__ or exc.__context__
    text = " ".join(str(exc).split())
    if not text and cause is not None:
        text = " ".join(str(cause).split())
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__
