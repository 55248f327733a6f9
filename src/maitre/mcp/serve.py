"""`serve`: load `MODULE_OR_FILE:ATTR` and serve it over MCP on stdio or Streamable HTTP.

The target is an `MCPApp`, a `Toolbox` (served as `MCPApp(box)`), a `GovernedServer`, or a
zero-argument factory returning one of them. On stdio the process prints nothing but protocol on
stdout (messages go to stderr).

The command lives here, in the MCP door, and both `maitre serve` (the root command line) and
`python -m maitre.mcp serve` mount it: `maitre.cli` imports `maitre.mcp`, never the other way.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console

from .._loader import load_object
from ..exceptions import UserError
from ..types import Principal

__all__ = ["load_app", "serve_command"]

err = Console(stderr=True)


def load_app(spec: str) -> Any:
    """The `MCPApp` or `GovernedServer` that `spec` names (a Toolbox is wrapped in an MCPApp)."""
    from ..tools import Toolbox
    from .app import MCPApp
    from .server import GovernedServer

    value = load_object(spec)
    if callable(value) and not isinstance(value, MCPApp | Toolbox | GovernedServer):
        value = value()
    if isinstance(value, Toolbox):
        value = MCPApp(value, name=value.namespace or "maitre")
    if not isinstance(value, MCPApp | GovernedServer):
        raise UserError(
            f"{spec} is a {type(value).__name__}; expected an MCPApp, a Toolbox or a GovernedServer"
        )
    return value


def serve_command(
    target: Annotated[str, typer.Argument(help="MODULE_OR_FILE:ATTR naming an MCPApp or a Toolbox")],
    transport: Annotated[str, typer.Option(help="stdio or http")] = "stdio",
    host: Annotated[str, typer.Option(help="HTTP bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port")] = 8000,
    path: Annotated[str, typer.Option(help="HTTP endpoint path")] = "/mcp",
    user: Annotated[str, typer.Option(help="Principal for stdio / unauthenticated HTTP")] = "local",
    tenant: Annotated[str, typer.Option(help="Tenant of that principal")] = "local",
    scope: Annotated[list[str] | None, typer.Option(help="Scope of that principal (repeatable)")] = None,
    role: Annotated[list[str] | None, typer.Option(help="Role of that principal (repeatable)")] = None,
    jwt_issuer: Annotated[str | None, typer.Option(help="Require JWT bearer tokens from this issuer")] = None,
    jwt_audience: Annotated[str | None, typer.Option(help="This server's audience for JWTs")] = None,
    jwt_key_file: Annotated[
        Path | None, typer.Option(help="Issuer public key (PEM) or HS256 secret file")
    ] = None,
    jwt_algorithm: Annotated[
        list[str] | None, typer.Option(help="Accepted JWT algorithm (repeatable)")
    ] = None,
    resource_url: Annotated[
        str | None, typer.Option(help="Public URL of this server (RFC 9728 metadata)")
    ] = None,
    task_db: Annotated[
        Path | None, typer.Option(help="SQLite file for task state shared by processes")
    ] = None,
    stateless_legacy: Annotated[bool, typer.Option(help="No sessions for 2025-11-25 clients either")] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Host header to accept besides the bind address (host, host:port, host:*; repeatable)"
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(help="Browser Origin to accept, e.g. https://app.example.com (repeatable)"),
    ] = None,
) -> None:
    """Serve TARGET over MCP (2026-07-28 and 2025-11-25 on one endpoint).

    Host/Origin headers are checked on every bind (DNS rebinding); a 0.0.0.0 bind accepts only
    loopback Host headers until --allow-host names the public ones. HMAC secrets (an HS* key file,
    MAITRE_MCP_SECRET) under 32 bytes are refused.
    """
    from .auth import JWTVerifier
    from .server import GovernedServer, ServerOptions
    from .tasks import SQLiteTaskStore
    from .transports import serve_http, serve_stdio

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        loaded = load_app(target)
        if isinstance(loaded, GovernedServer):
            server = loaded
        else:
            options = ServerOptions(
                principal=Principal(
                    user=user, tenant=tenant, scopes=frozenset(scope or ()), roles=frozenset(role or ())
                ),
                task_store=SQLiteTaskStore(task_db) if task_db else None,
            )
            server = GovernedServer(loaded, options)
    except UserError as exc:
        err.print(str(exc), style="red", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if transport == "stdio":
        anyio.run(serve_stdio, server)
        return
    if transport != "http":
        err.print(f"[red]--transport must be stdio or http, not {transport!r}[/red]")
        raise typer.Exit(2)
    verifier = None
    if jwt_issuer:
        if not jwt_audience or not jwt_key_file:
            err.print("[red]--jwt-issuer needs --jwt-audience and --jwt-key-file[/red]")
            raise typer.Exit(2)
        key_text = jwt_key_file.read_text().strip()
        algorithms = jwt_algorithm or (["HS256"] if "BEGIN" not in key_text else ["RS256", "ES256", "EdDSA"])
        try:
            verifier = JWTVerifier(
                key=key_text, issuer=jwt_issuer, audience=jwt_audience, algorithms=algorithms
            )
        except UserError as exc:
            err.print(f"{jwt_key_file}: {exc}", style="red", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
    err.print(f"serving {server.app.name} on http://{host}:{port}{path} (MCP 2026-07-28 + 2025-11-25)")

    async def main() -> None:
        await serve_http(
            server,
            host=host,
            port=port,
            path=path,
            verifier=verifier,
            resource_url=resource_url,
            issuer_url=jwt_issuer,
            stateless_legacy=stateless_legacy,
            allowed_hosts=allow_host or (),
            allowed_origins=allow_origin or (),
        )

    anyio.run(main)
