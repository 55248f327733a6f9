"""Run a `GovernedServer` on stdio or Streamable HTTP (one endpoint, both protocol eras).

HTTP is assembled from the SDK's own pieces - `StreamableHTTPSessionManager` (2026-07-28
requests are served statelessly; 2025-11-25 clients get sessions unless `stateless_legacy`),
its Host/Origin checks, and its bearer-auth backend fed by our `BearerVerifier` - so the wire
behaviour is the SDK's; ours are the principal mapping and the scope challenge (`scope_check`).

DNS-rebinding protection (a MUST of the transport spec) is on for every bind, checked before
authentication on every route; a refused Host is HTTP 421, a refused Origin 403. Defaults:

- loopback bind (127.0.0.1, localhost, ::1): Host and Origin may name any loopback name and port.
- any other address or name (127.0.0.2, a LAN address, a DNS name): only Host `ADDR:PORT` and
  Origin `http://ADDR:PORT` - the bind itself.
- wildcard bind (0.0.0.0, ::): only the loopback names at the port. The addresses and names the
  server is really reached by are not knowable, and guessing them is what rebinding exploits, so
  every other Host is refused until it is listed (`allowed_hosts`, `maitre serve --allow-host`).

`allowed_hosts` / `allowed_origins` (`--allow-host` / `--allow-origin`, repeatable) add to the
defaults: `host`, `host:port` or `host:*` (any port); origins as `https://app.example.com` or
`http://host:*`. A request without an Origin header (a non-browser client) is not refused for
that; `Origin: null` is.

`GET /healthz` (and HEAD), served when the app has a `health` callable (the gateway's), answers
its small JSON body - `{"status": "ok"|"degraded"|"down", "upstreams": {"up": n, "down": n,
"connecting": n}}` - with 200, or 503 when the status is "down" (nothing to serve), so a load
balancer's check (HAProxy `option httpchk GET /healthz`) keeps a replica that can still serve some
upstreams. It needs no token and is answered whatever the Host header says: a probe names the
backend by its address, or sends no Host at all, and DNS rebinding, which the Host check is
against, gains nothing from a body of counts (no names, URLs or errors). Every other route keeps
both checks.

Nothing here writes to stdout: on stdio that stream carries the protocol, and uvicorn's logs go
to stderr through `logging`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .auth import BearerVerifier, SdkTokenVerifier
from .quiet_calls import QuietModernCalls
from .remembered_tokens import remembered
from .scope_check import ScopeChallenge, declared_scopes
from .server import GovernedServer

__all__ = ["HEALTH_PATH", "http_app", "running_http", "serve_http", "serve_stdio", "transport_security"]

logger = logging.getLogger("maitre.mcp")

HEALTH_PATH = "/healthz"
"""Where the health check answers (module docstring)."""
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_WILDCARD = ("0.0.0.0", "::", "")
_CHECKED_BY_GUARD = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The session manager's settings: Host and Origin are checked once, by `_HostOriginGuard`, in
front of every route; the manager still checks a POST's Content-Type."""


def _authority(host: str, port: int | str | None) -> str:
    name = f"[{host}]" if ":" in host else host
    return name if port is None else f"{name}:{port}"


def transport_security(
    host: str,
    port: int | None = None,
    *,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> TransportSecuritySettings:
    """The Host/Origin allow-lists for a server bound to `host:port` (see the module docstring).

    `port=None` (the port is not known yet) allows any port of the bound names.
    """
    if host in _LOOPBACK:
        hosts = [_authority(h, "*") for h in _LOOPBACK] + [_authority(h, None) for h in _LOOPBACK]
        origins = [f"http://{_authority(h, '*')}" for h in _LOOPBACK]
    else:
        names = _LOOPBACK if host in _WILDCARD else (host,)
        hosts = [_authority(h, "*" if port is None else port) for h in names]
        if port in (None, 80):
            hosts += [_authority(h, None) for h in names]
        origins = [f"http://{a}" for a in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *allowed_hosts],
        allowed_origins=[*origins, *allowed_origins],
    )


class _HostOriginGuard:
    """Refuse a foreign Host (421) or Origin (403) on every route, before authentication runs.

    The one place Host and Origin are checked (the session manager is given the same settings
    with the check switched off, so the MCP route does not pay for it twice). The allow-lists are
    read the SDK's way - an exact entry, or `name:*` for any port - from the raw ASGI headers;
    only a request that fails that test is handed to the SDK's own check, which writes the
    refusal (the same status, body and log line as before), so the fast test can never accept
    what the SDK would refuse.
    """

    def __init__(
        self, app: ASGIApp, settings: TransportSecuritySettings, exempt: frozenset[str] = frozenset()
    ) -> None:
        self.app = app
        self.settings = settings
        self.exempt = exempt
        """Paths answered whatever Host and Origin say (the health check)."""
        self.check = TransportSecurityMiddleware(settings)
        self._snapshot: tuple[list[str], list[str]] | None = None
        self._hosts: frozenset[str] = frozenset()
        self._host_prefixes: tuple[str, ...] = ()
        self._origins: frozenset[str] = frozenset()
        self._origin_prefixes: tuple[str, ...] = ()

    def _lists(self) -> None:
        """(Re)build the lookup sets when the settings' lists differ from the last ones read."""
        hosts, origins = list(self.settings.allowed_hosts), list(self.settings.allowed_origins)
        self._hosts = frozenset(hosts)
        self._host_prefixes = tuple(h[:-1] for h in hosts if h.endswith(":*"))
        self._origins = frozenset(origins)
        self._origin_prefixes = tuple(o[:-1] for o in origins if o.endswith(":*"))
        self._snapshot = (hosts, origins)

    def _accepts(self, scope: Scope) -> bool:
        settings = self.settings
        if not settings.enable_dns_rebinding_protection:
            return True
        snapshot = self._snapshot
        if (
            snapshot is None
            or snapshot[0] != settings.allowed_hosts
            or snapshot[1] != settings.allowed_origins
        ):
            self._lists()
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                if host is None:
                    host = value.decode("latin-1")
            elif name == b"origin" and origin is None:
                origin = value.decode("latin-1")
        if not host or not (host in self._hosts or host.startswith(self._host_prefixes)):
            return False
        return not origin or origin in self._origins or origin.startswith(self._origin_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._accepts(scope) and scope["path"] not in self.exempt:
            refused = await self.check.validate_request(Request(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _resource_metadata_route(
    server: GovernedServer, resource_url: str, issuer_url: str, required_scopes: Sequence[str]
) -> Route:
    """RFC 9728 protected-resource metadata at the SDK's well-known path, with the SDK's model,
    handler and CORS, but `scopes_supported` read from the toolbox on every request: a gateway's
    upstream that comes up later (or drops out) changes the scopes its tools declare."""
    metadata = ProtectedResourceMetadata(
        resource=AnyHttpUrl(resource_url), authorization_servers=[AnyHttpUrl(issuer_url)]
    )
    path = urlsplit(str(build_resource_metadata_url(AnyHttpUrl(resource_url)))).path

    async def endpoint(request: Request) -> Response:
        scopes = declared_scopes(server.app.toolbox, required_scopes) or None
        handler = ProtectedResourceMetadataHandler(metadata.model_copy(update={"scopes_supported": scopes}))
        response = await handler.handle(request)
        response.headers["Cache-Control"] = f"public, max-age={_METADATA_MAX_AGE_S}"
        return response

    return Route(path, endpoint=cors_middleware(endpoint, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"])


_METADATA_MAX_AGE_S = 60
"""How long a client may cache the metadata (the SDK says an hour; the scopes can change sooner)."""


def http_app(
    server: GovernedServer,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    path: str = "/mcp",
    verifier: BearerVerifier | None = None,
    resource_url: str | None = None,
    issuer_url: str | None = None,
    required_scopes: list[str] | None = None,
    json_response: bool = False,
    stateless_legacy: bool = False,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> Starlette:
    """The ASGI app serving `server` at `path`.

    Args:
        host, port: where it is bound; they set the default Host/Origin allow-lists, which
            `allowed_hosts` / `allowed_origins` extend (module docstring). The settings in force
            are `app.state.transport_security`.
        verifier: when set, every request needs a valid bearer token (401 otherwise) and the
            principal comes from it; a `tools/call` whose tool needs scopes the token lacks is a
            403 `insufficient_scope` (`scope_check`).
        required_scopes: scopes every request needs, named in the 401 challenge.
        resource_url, issuer_url: publish OAuth protected-resource metadata (RFC 9728) naming
            this server and its authorization server.
        json_response: always answer plain JSON. The default (False) still answers JSON when a call
            emits nothing, and switches to SSE only when it streams progress or logs.
        stateless_legacy: serve 2025-11-25 clients without sessions too (no server→client requests,
            so no inline elicitation); for fleets behind a load balancer.
    """
    security = transport_security(host, port, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    manager = StreamableHTTPSessionManager(
        app=server.lowlevel,
        json_response=json_response,
        stateless=stateless_legacy,
        security_settings=_CHECKED_BY_GUARD,
    )
    # A 2026-07-28 request that can emit nothing skips the SDK's per-request stream (quiet_calls).
    asgi: Any = QuietModernCalls(StreamableHTTPASGIApp(manager), manager)
    health = server.app.health if path != HEALTH_PATH else None
    exempt = frozenset({HEALTH_PATH}) if health is not None else frozenset()
    middleware = [Middleware(_HostOriginGuard, settings=security, exempt=exempt)]
    routes: list[BaseRoute] = []
    if health is not None:
        routes.append(Route(HEALTH_PATH, endpoint=_health_endpoint(health), methods=["GET", "HEAD"]))
    if verifier is not None:
        middleware += [
            Middleware(
                AuthenticationMiddleware,
                # A token already verified is remembered until its exp (at most 60 s): remembered_tokens.
                backend=BearerAuthBackend(SdkTokenVerifier(remembered(verifier))),
            ),
            Middleware(AuthContextMiddleware),
        ]
        metadata_url = build_resource_metadata_url(AnyHttpUrl(resource_url)) if resource_url else None
        asgi = ScopeChallenge(
            asgi,
            toolbox=server.app.toolbox,
            required_scopes=required_scopes or (),
            resource_metadata_url=str(metadata_url) if metadata_url else None,
        )
        if resource_url and issuer_url:
            routes.append(_resource_metadata_route(server, resource_url, issuer_url, required_scopes or ()))
    routes.insert(0, Route(path, endpoint=asgi))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.transport_security = security
    return app


def _health_endpoint(health: Callable[[], Mapping[str, Any]]) -> Callable[[Request], Awaitable[Response]]:
    """`GET /healthz`: `health()` as JSON; 503 when its status is "down", else 200."""

    async def endpoint(_request: Request) -> Response:
        try:
            body = dict(health())
        except Exception:
            logger.exception("the health check failed")
            body = {"status": "down"}
        status = 503 if body.get("status") == "down" else 200
        return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})

    return endpoint


async def serve_http(
    server: GovernedServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: anyio.Event | None = None,
    **options: Any,
) -> None:
    """Serve over Streamable HTTP with uvicorn until cancelled (`options` go to `http_app`)."""
    import uvicorn

    app = http_app(server, host=host, port=port, **options)
    if host in _WILDCARD and not options.get("allowed_hosts"):
        logger.warning(
            "bound to %s: only loopback Host headers are accepted; list the public host name(s) "
            "with allowed_hosts (maitre serve --allow-host)",
            host or "all interfaces",
        )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    userver = uvicorn.Server(config)
    if ready is not None:

        async def _signal() -> None:
            while not userver.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
                await anyio.sleep(0.01)
            ready.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(_signal)
            await userver.serve()
    else:
        await userver.serve()


async def serve_stdio(server: GovernedServer) -> None:
    """Serve one client over stdin/stdout (protocol only on stdout)."""
    lowlevel = server.lowlevel
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


@contextlib.asynccontextmanager
async def running_http(
    server: GovernedServer,
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    wrap: Any = None,
    **options: Any,
) -> AsyncIterator[str]:
    """Serve on `host` at an ephemeral port for the duration of the block; yields the URL.

    For tests and embedding: the server runs in the caller's event loop and stops on exit.
    `wrap(asgi_app) -> asgi_app` puts an ASGI layer around the app (to observe requests);
    `options` go to `http_app`.
    """
    import socket

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket says it is TCP; without it each keep-alive request waits ~40 ms on Nagle + delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    app: Any = http_app(server, host=host, port=port, path=path, **options)
    if wrap is not None:
        app = wrap(app)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    userver = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: userver.serve(sockets=[sock]))
        while not userver.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await anyio.sleep(0.01)
        try:
            yield f"http://{_authority(host, port)}{path}"
        finally:
            userver.should_exit = True
    sock.close()
