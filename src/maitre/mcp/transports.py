"""Run a `GovernedServer` on stdio or Streamable HTTP (one endpoint, both protocol eras).

HTTP is assembled from the SDK's own pieces - `StreamableHTTPSessionManager` (2026-07-28
requests are served statelessly; 2025-11-25 clients get sessions unless `stateless_legacy`),
its DNS-rebinding protection for loopback hosts, and its bearer-auth middleware fed by our
`BearerVerifier` - so the wire behaviour is the SDK's and only the principal mapping is ours.

Nothing here writes to stdout: on stdio that stream carries the protocol, and uvicorn's logs go
to stderr through `logging`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Route

from .auth import BearerVerifier, SdkTokenVerifier
from .server import GovernedServer

__all__ = ["http_app", "running_http", "serve_http", "serve_stdio"]

logger = logging.getLogger("maitre.mcp")

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _security(host: str) -> TransportSecuritySettings | None:
    if host in _LOOPBACK:
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return None


def http_app(
    server: GovernedServer,
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    verifier: BearerVerifier | None = None,
    resource_url: str | None = None,
    issuer_url: str | None = None,
    required_scopes: list[str] | None = None,
    json_response: bool = False,
    stateless_legacy: bool = False,
) -> Starlette:
    """The ASGI app serving `server` at `path`.

    Args:
        verifier: when set, every request needs a valid bearer token (401 otherwise) and the
            principal comes from it.
        resource_url, issuer_url: publish OAuth protected-resource metadata (RFC 9728) naming
            this server and its authorization server.
        json_response: always answer plain JSON. The default (False) still answers JSON when a call
            emits nothing, and switches to SSE only when it streams progress or logs.
        stateless_legacy: serve 2025-11-25 clients without sessions too (no server→client requests,
            so no inline elicitation); for fleets behind a load balancer.
    """
    manager = StreamableHTTPSessionManager(
        app=server.lowlevel,
        json_response=json_response,
        stateless=stateless_legacy,
        security_settings=_security(host),
    )
    asgi: Any = StreamableHTTPASGIApp(manager)
    middleware: list[Middleware] = []
    routes: list[BaseRoute] = []
    if verifier is not None:
        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(SdkTokenVerifier(verifier))),
            Middleware(AuthContextMiddleware),
        ]
        metadata_url = build_resource_metadata_url(AnyHttpUrl(resource_url)) if resource_url else None
        asgi = RequireAuthMiddleware(asgi, required_scopes or [], metadata_url)
        if resource_url and issuer_url:
            routes += create_protected_resource_routes(
                resource_url=AnyHttpUrl(resource_url),
                authorization_servers=[AnyHttpUrl(issuer_url)],
                scopes_supported=required_scopes,
            )
    routes.insert(0, Route(path, endpoint=asgi))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


async def serve_http(
    server: GovernedServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: anyio.Event | None = None,
    **options: Any,
) -> None:
    """Serve over Streamable HTTP with uvicorn until cancelled."""
    import uvicorn

    app = http_app(server, host=host, **options)
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
    server: GovernedServer, *, path: str = "/mcp", wrap: Any = None, **options: Any
) -> AsyncIterator[str]:
    """Serve on 127.0.0.1 at an ephemeral port for the duration of the block; yields the URL.

    For tests and embedding: the server runs in the caller's event loop and stops on exit.
    `wrap(asgi_app) -> asgi_app` puts an ASGI layer around the app (to observe requests).
    """
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app: Any = http_app(server, host="127.0.0.1", path=path, **options)
    if wrap is not None:
        app = wrap(app)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    userver = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: userver.serve(sockets=[sock]))
        while not userver.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}{path}"
        finally:
            userver.should_exit = True
    sock.close()
