"""`serve`: load `MODULE_OR_FILE:ATTR` and serve it over MCP on stdio or Streamable HTTP.

The target is an `MCPApp`, a `Toolbox` (served as `MCPApp(box)`), a `GovernedServer`, or a
zero-argument factory returning one of them. On stdio the process prints nothing but protocol on
stdout (messages go to stderr).

Durable state: `--stores URL` (or `[stores] url` in maitre.toml) keeps approvals, idempotency,
audit, handles and runs in a SQLite file or a Postgres schema, and MCP tasks beside them, so
`maitre approvals list|approve --stores URL` in another terminal decides a pending call, the
client's retry runs it once, and a restart keeps everything. Without it the state lives in this
process only, and the command says so. The gate of a `Toolbox` target is built from the
configuration (policy, budgets, approval TTL, audit); an `MCPApp` that brings its own gate keeps
it, moved onto the stores when it had none of its own.

Everything is checked before anything is served: the transport, the path, the port, the JWT
settings (an unknown algorithm, a missing key file, `--jwt-*` over stdio), the target, the stores
(opened and read once) and the address (bound once). "serving on ..." is printed only once the
server listens. A mistake is one line on stderr (exit 2), a failure too (exit 1).

The command lives here, in the MCP door, and both `maitre serve` (the root command line) and
`python -m maitre.mcp serve` mount it: `maitre.cli` imports `maitre.mcp`, never the other way.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from rich.console import Console

from .._extras import MissingExtraError
from .._loader import load_object
from ..exceptions import MaitreError, StoreError, UserError
from ..types import Principal

if TYPE_CHECKING:
    from ..config import Settings
    from ..stores import Stores
    from .server import GovernedServer

__all__ = [
    "ServeError",
    "ServePlan",
    "exit_on_interrupt",
    "gate_for",
    "load_app",
    "plan_serve",
    "run_plan",
    "serve_command",
]

err = Console(stderr=True)
logger = logging.getLogger("maitre.mcp.serve")

_MEMORY_URLS = ("memory://", "memory:", ":memory:")
_ASYMMETRIC = ("RS256", "ES256", "EdDSA")


class ServeError(MaitreError):
    """`maitre serve` could not start: the stores, the address or an extra (exit 1)."""


def _target(spec: str) -> Any:
    """What `spec` names: a Toolbox, an MCPApp or a GovernedServer (a factory is called)."""
    from ..tools import Toolbox
    from .app import MCPApp
    from .server import GovernedServer

    value = load_object(spec)
    if callable(value) and not isinstance(value, MCPApp | Toolbox | GovernedServer):
        value = value()
    if not isinstance(value, MCPApp | Toolbox | GovernedServer):
        raise UserError(
            f"{spec} is a {type(value).__name__}; expected an MCPApp, a Toolbox or a GovernedServer"
        )
    return value


def load_app(spec: str) -> Any:
    """The `MCPApp` or `GovernedServer` that `spec` names (a Toolbox is wrapped in an MCPApp)."""
    from ..tools import Toolbox
    from .app import MCPApp

    value = _target(spec)
    if isinstance(value, Toolbox):
        value = MCPApp(value, name=value.namespace or "maitre")
    return value


@dataclass(kw_only=True)
class ServePlan:
    """What `maitre serve` will do, with the flags, the configuration file and the defaults merged
    and checked. Built before anything is imported, opened or bound."""

    target: str
    transport: str
    host: str
    port: int
    path: str
    principal: Principal
    """Who calls over stdio and unauthenticated HTTP."""
    stores: str | None = None
    """The store URL (from the flag or the file); None keeps the state in this process."""
    rate_limits: str | None = None
    tasks: str | None = None
    """Where MCP tasks live: `--task-db`, else `[stores] tasks`, else the stores' URL."""
    issuer: str | None = None
    audience: str | list[str] | None = None
    key_file: Path | None = None
    jwks_url: str | None = None
    algorithms: list[str] = field(default_factory=list)
    tenant_claim: str = "tenant"
    default_tenant: str | None = None
    jwks_ttl_s: float = 300.0
    resource_url: str | None = None
    stateless_legacy: bool = False
    allow_hosts: list[str] = field(default_factory=list)
    allow_origins: list[str] = field(default_factory=list)
    otlp: str | None = None
    settings: Settings | None = None
    """The configuration file's settings (policy, budgets, approvals, audit)."""
    name: str | None = None
    """The served app's name for a Toolbox target (default: its namespace, else "maitre")."""


def plan_serve(settings: Settings, **flags: Any) -> ServePlan:
    """Merge the flags (None = not given) over the configuration; a usage mistake is a `UserError`."""
    from ..config import check_jwt_algorithms, check_store_url

    file = settings.config
    serve = file.serve

    def pick(name: str, configured: Any) -> Any:
        value = flags.get(name)
        return configured if value is None else value

    target = flags.get("target") or (settings.target(serve.target) if serve.target else None)
    if not target:
        raise UserError(
            "give TARGET (MODULE_OR_FILE:ATTR naming an MCPApp or a Toolbox), or set [serve] target"
        )
    transport = pick("transport", serve.transport)
    if transport not in ("stdio", "http"):
        raise UserError(f"--transport must be stdio or http, not {transport!r}")
    path = pick("path", serve.path)
    if not path.startswith("/"):
        raise UserError(f"--path must start with '/', e.g. --path /{path}")
    jwt_flags = [f"--{name.replace('_', '-')}" for name in _JWT_FLAGS if flags.get(name)]
    if transport == "stdio" and jwt_flags:
        raise UserError(
            f"{', '.join(jwt_flags)}: JWT checks need --transport http; over stdio the caller is the "
            "process that started the server, named with --user/--tenant"
        )
    auth = file.auth
    issuer = pick("jwt_issuer", auth.issuer)
    audience = pick("jwt_audience", auth.audience)
    key_flag: Path | None = flags.get("jwt_key_file")
    jwks_url = pick("jwt_jwks_url", auth.jwks_url)
    key_file = (
        key_flag if key_flag is not None else (settings.path_of(auth.key_file) if auth.key_file else None)
    )
    if key_flag is not None and flags.get("jwt_jwks_url"):
        raise UserError("give --jwt-key-file or --jwt-jwks-url, not both")
    if key_flag is not None:
        jwks_url = None
    elif flags.get("jwt_jwks_url"):
        key_file = None
    algorithms = list(flags.get("jwt_algorithm") or auth.algorithms or ())
    if algorithms:
        try:
            check_jwt_algorithms(algorithms)
        except ValueError as exc:
            raise UserError(f"--jwt-algorithm: {exc}") from None
    if transport == "stdio":
        if issuer:
            logger.warning(
                "the [auth] settings are not used over stdio (only --transport http checks tokens)"
            )
        issuer = None
    if jwt_flags and not issuer:
        raise UserError(
            f"{', '.join(jwt_flags)}: only used with --jwt-issuer (who must have issued the tokens)"
        )
    resource_url = _resource_url(flags.get("resource_url"), serve.resource_url, auth.resource_url)
    if issuer and not audience and resource_url:
        audience = resource_url  # RFC 8707: a token is for the resource it was asked for
    if issuer:
        if not audience:
            raise UserError(
                "--jwt-issuer needs --jwt-audience or --resource-url (this server's identifier in the tokens)"
            )
        if resource_url and not _names(audience, resource_url):
            raise UserError(
                f"the tokens' audience ({audience!r}) does not name this server's resource URL "
                f"({resource_url!r}): clients ask the issuer for a token for the resource URL (RFC 8707), "
                "so the audience checked must be that URL; set [auth] audience to it (or leave it out)"
            )
        if not key_file and not jwks_url:
            raise UserError(
                "--jwt-issuer needs --jwt-key-file or --jwt-jwks-url (where the signing keys are)"
            )
        if key_file is not None and not key_file.is_file():
            what = "a folder" if key_file.is_dir() else "no such file"
            raise UserError(
                f"--jwt-key-file {key_file}: {what}; name the issuer's public key (PEM) or secret file"
            )
    stores_flag = flags.get("stores")
    stores = stores_flag or (settings.store_url(file.stores.url) if file.stores.url else None)
    if stores is not None:
        try:
            check_store_url(stores)
        except ValueError as exc:
            raise UserError(f"--stores: {exc}") from None
        local = _sqlite_path(stores)
        if local is not None and Path(local).is_dir():
            raise UserError(
                f"--stores {local} is a folder: name the database file (it is created if missing)"
            )
    rate_limits = pick("rate_limits", file.stores.rate_limits)
    if rate_limits is not None and not rate_limits.startswith(("redis://", "rediss://", "unix://")):
        raise UserError(f"--rate-limits must be a redis:// URL, not {rate_limits!r}")
    task_db: Path | None = flags.get("task_db")
    tasks = (
        str(task_db)
        if task_db is not None
        else (settings.store_url(file.stores.tasks) if file.stores.tasks else stores)
    )
    if tasks in _MEMORY_URLS:
        tasks = None
    return ServePlan(
        target=target,
        transport=transport,
        host=pick("host", serve.host),
        port=pick("port", serve.port),
        path=path,
        principal=Principal(
            user=pick("user", serve.user),
            tenant=pick("tenant", serve.tenant),
            scopes=frozenset(flags.get("scope") or serve.scopes),
            roles=frozenset(flags.get("role") or serve.roles),
        ),
        stores=stores,
        rate_limits=rate_limits,
        tasks=tasks,
        issuer=issuer,
        audience=audience,
        key_file=key_file if issuer else None,
        jwks_url=jwks_url if issuer else None,
        algorithms=algorithms,
        tenant_claim=auth.tenant_claim,
        default_tenant=auth.default_tenant,
        jwks_ttl_s=auth.jwks_ttl_s,
        resource_url=resource_url,
        stateless_legacy=bool(pick("stateless_legacy", serve.stateless_legacy)),
        allow_hosts=list(flags.get("allow_host") or serve.allow_hosts),
        allow_origins=list(flags.get("allow_origin") or serve.allow_origins),
        otlp=pick("otlp", file.tracing.otlp),
        settings=settings,
    )


def _resource_url(flag: str | None, served: str | None, configured: str | None) -> str | None:
    """This server's resource URL: the flag, else `[serve] resource_url`, else `[auth] resource_url`
    (the gateway's place); the two sections may not disagree."""
    if flag:
        return flag
    if served and configured and served.rstrip("/") != configured.rstrip("/"):
        raise UserError(
            f"[serve] resource_url ({served!r}) and [auth] resource_url ({configured!r}) differ: keep one"
        )
    return served or configured


def _names(audience: str | list[str], resource_url: str) -> bool:
    """Whether the audience names the resource URL (a trailing slash aside)."""
    wanted = resource_url.rstrip("/")
    return any(a.rstrip("/") == wanted for a in ([audience] if isinstance(audience, str) else audience))


_JWT_FLAGS = ("jwt_issuer", "jwt_audience", "jwt_key_file", "jwt_jwks_url", "jwt_algorithm")


def _require_extras() -> None:
    """Check the mcp extra now, so a missing one is one line before anything starts."""
    from .._extras import require

    require("mcp", "maitre serve")


def _verifier(plan: ServePlan) -> Any:
    """The bearer-token verifier the plan asks for (None without an issuer)."""
    if not plan.issuer:
        return None
    from .auth import JWKSKeys, JWTVerifier

    key: Any
    if plan.jwks_url:
        key = JWKSKeys(url=plan.jwks_url, ttl_s=plan.jwks_ttl_s)
        algorithms = plan.algorithms or list(_ASYMMETRIC)
    else:
        assert plan.key_file is not None
        try:
            key = plan.key_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--jwt-key-file {plan.key_file}: cannot read it ({exc})") from None
        algorithms = plan.algorithms or (["HS256"] if "BEGIN" not in key else list(_ASYMMETRIC))
    assert plan.audience is not None
    try:
        return JWTVerifier(
            key=key,
            issuer=plan.issuer,
            audience=plan.audience,
            algorithms=algorithms,
            tenant_claim=plan.tenant_claim,
            default_tenant=plan.default_tenant,
        )
    except UserError as exc:
        where = plan.key_file or plan.jwks_url
        raise UserError(f"{where}: {exc}") from None


def _configure_tracing(url: str | None) -> None:
    """Export traces over OTLP/HTTP to `url` (`maitre.tracing.configure_otlp`)."""
    if not url:
        return
    from .._extras import require
    from ..tracing import configure_otlp

    require("otel", "--otlp (exporting traces)")
    configure_otlp(url)


def _check_bind(host: str, port: int) -> None:
    """Bind the address once, so a port in use or a foreign address is one line before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(host or None, port, family if ":" in host else 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror} (check --host)") from None
    family, kind, proto, _, address = infos[0]
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
    except OSError as exc:
        in_use = exc.errno == errno.EADDRINUSE
        hint = "another process uses it; pick another --port" if in_use else "check --host and --port"
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc} ({hint})") from None
    finally:
        probe.close()


async def _open_stores(plan: ServePlan) -> Stores:
    """Open the stores and read them once, so a bad file or a database that is down fails now."""
    from ..config import mask_url
    from ..stores import open_stores

    assert plan.stores is not None
    try:
        stores = await open_stores(plan.stores, rate_limits_url=plan.rate_limits)
    except Exception as exc:
        raise ServeError(f"cannot open the stores at {mask_url(plan.stores)}: {_one_line(exc)}") from None
    try:
        await stores.audit.last()
    except Exception as exc:
        await stores.close()
        raise ServeError(f"cannot use the stores at {mask_url(plan.stores)}: {_one_line(exc)}") from None
    return stores


def _sqlite_path(url: str) -> str | None:
    if url.startswith(("postgresql://", "postgres://")) or url in _MEMORY_URLS:
        return None
    if url.startswith("sqlite://"):
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        return parts.netloc + parts.path
    return url


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, StoreError | UserError):
        return " ".join(str(exc).split())
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def gate_for(toolbox: Any, stores: Stores | None, plan: ServePlan, previous: Any = None) -> Any:
    """A gate for `toolbox` on `stores`, from the plan's configuration (policy, budgets, approval
    TTL, audit); settings the file does not give are taken from `previous` (the gate an MCPApp
    brought), if any. `maitre serve` and `maitre gateway` build their gates here, so the two doors
    read the file the same way."""
    from ..gate import Gate
    from ..gate.record import AuditRecorder

    settings = plan.settings
    assert settings is not None
    config = settings.config

    def configured(section: str) -> bool:
        return any(key.startswith(section + ".") for key in settings.given)

    keep = previous is not None
    return Gate(
        toolbox,
        stores=stores,
        policy=previous.policy if keep and not configured("policy") else config.policy.build(),
        budgets=previous.budgets if keep and not configured("budgets") else config.budgets.build(),
        limits=previous.limits if keep else None,
        approval_ttl_s=(
            previous.approval_ttl_s if keep and not configured("approvals") else config.approvals.ttl_s
        ),
        audit=config.audit.enabled if stores is not None else None,
        audit_arguments=config.audit.arguments,
        stages=list(previous.stages) if keep else None,
        recorders=[r for r in previous.recorders if not isinstance(r, AuditRecorder)] if keep else (),
    )


def _governed(loaded: Any, stores: Stores | None, plan: ServePlan) -> GovernedServer:
    """The server for the loaded target, its gate on `stores` (see the module docstring)."""
    from ..stores import MemoryStores
    from ..tools import Toolbox
    from .app import MCPApp
    from .server import GovernedServer, ServerOptions
    from .tasks import open_task_store

    if isinstance(loaded, GovernedServer):
        if plan.stores is not None:
            raise UserError(
                f"{plan.target} is a GovernedServer with its own gate: serve its MCPApp or Toolbox "
                "to use --stores (or [stores] url), or drop them"
            )
        return loaded
    if isinstance(loaded, Toolbox):
        name = plan.name or loaded.namespace or "maitre"
        app = MCPApp(loaded, name=name, gate=gate_for(loaded, stores, plan))
    else:
        app = loaded
        if stores is not None:
            if not isinstance(app.gate.stores, MemoryStores):
                raise UserError(
                    f"{plan.target}'s gate already has its own stores ({type(app.gate.stores).__name__}); "
                    "drop --stores (or [stores] url), or build the gate without stores="
                )
            app.gate = gate_for(app.toolbox, stores, plan, previous=app.gate)
    task_store = open_task_store(plan.tasks) if plan.tasks else None
    if task_store is not None:
        # Tasks may live in a database of their own: seal their results under the gate's subject
        # keys, so forgetting a user (`Stores.erase_subject`) reaches a personal tool's tasks too.
        task_store.subject_keys = app.gate.stores.subject_keys
    return GovernedServer(app, ServerOptions(principal=plan.principal, task_store=task_store))


def _warn_about_state(server: GovernedServer) -> None:
    from ..stores import MemoryStores

    if isinstance(server.gate.stores, MemoryStores):
        err.print(
            "[yellow]note:[/yellow] no --stores: approvals, idempotency and audit live in this process "
            "only (maitre approvals cannot reach them; a restart forgets them). Use --stores maitre.db.",
            highlight=False,
            soft_wrap=True,
        )
    elif not os.environ.get("MAITRE_MCP_SECRET"):
        err.print(
            "[yellow]note:[/yellow] MAITRE_MCP_SECRET is not set: handles and requestState are sealed "
            "with a key of this process only, so they do not survive a restart (approvals and results "
            "in the stores do).",
            highlight=False,
            soft_wrap=True,
        )


async def _serve(plan: ServePlan, loaded: Any, verifier: Any) -> None:
    from .transports import serve_http, serve_stdio

    stores = await _open_stores(plan) if plan.stores and plan.stores not in _MEMORY_URLS else None
    if stores is None and plan.stores in _MEMORY_URLS:
        from ..stores import MemoryStores

        stores = MemoryStores()
    server: GovernedServer | None = None
    try:
        server = _governed(loaded, stores, plan)
        _warn_about_state(server)
        if plan.transport == "stdio":
            await serve_stdio(server)
            return
        ready = anyio.Event()

        async def announce() -> None:
            await ready.wait()
            assert server is not None
            err.print(
                f"serving {server.app.name} on http://{plan.host}:{plan.port}{plan.path} "
                "(MCP 2026-07-28 + 2025-11-25)",
                highlight=False,
                soft_wrap=True,
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            try:
                await serve_http(
                    server,
                    host=plan.host,
                    port=plan.port,
                    ready=ready,
                    path=plan.path,
                    verifier=verifier,
                    resource_url=plan.resource_url,
                    issuer_url=plan.issuer,
                    stateless_legacy=plan.stateless_legacy,
                    allowed_hosts=plan.allow_hosts,
                    allowed_origins=plan.allow_origins,
                )
            except SystemExit:  # uvicorn exits when it cannot bind (another process took the port)
                raise ServeError(f"cannot listen on {plan.host}:{plan.port} (see the line above)") from None
            finally:
                tg.cancel_scope.cancel()
    finally:
        tasks = server.tasks if server is not None else None
        close = getattr(tasks, "close", None)
        if close is not None:
            await close()
        if stores is not None:
            await stores.close()


def serve_command(
    target: Annotated[
        str | None,
        typer.Argument(help="MODULE_OR_FILE:ATTR naming an MCPApp or a Toolbox (default: [serve] target)"),
    ] = None,
    transport: Annotated[str | None, typer.Option(help="stdio or http  [default: stdio]")] = None,
    host: Annotated[str | None, typer.Option(help="HTTP bind address  [default: 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="HTTP port  [default: 8000]")] = None,
    path: Annotated[str | None, typer.Option(help="HTTP endpoint path  [default: /mcp]")] = None,
    user: Annotated[
        str | None, typer.Option(help="Principal for stdio / unauthenticated HTTP  [default: local]")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant of that principal  [default: local]")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="Scope of that principal (repeatable)")] = None,
    role: Annotated[list[str] | None, typer.Option(help="Role of that principal (repeatable)")] = None,
    stores: Annotated[
        str | None,
        typer.Option(
            help="Keep approvals, idempotency, audit, handles, runs and tasks here: a SQLite file "
            "(created if missing), sqlite:///path.db or postgresql://...?schema=NAME"
        ),
    ] = None,
    rate_limits: Annotated[
        str | None, typer.Option(help="redis://host:6379/0 to keep rate limits in Redis")
    ] = None,
    jwt_issuer: Annotated[str | None, typer.Option(help="Require JWT bearer tokens from this issuer")] = None,
    jwt_audience: Annotated[str | None, typer.Option(help="This server's audience for JWTs")] = None,
    jwt_key_file: Annotated[
        Path | None, typer.Option(help="Issuer public key (PEM) or HS256 secret file")
    ] = None,
    jwt_jwks_url: Annotated[
        str | None, typer.Option(help="Issuer's JWKS URL (cached; fetched again for a new key id)")
    ] = None,
    jwt_algorithm: Annotated[
        list[str] | None, typer.Option(help="Accepted JWT algorithm (repeatable)")
    ] = None,
    resource_url: Annotated[
        str | None, typer.Option(help="Public URL of this server (RFC 9728 metadata)")
    ] = None,
    task_db: Annotated[
        Path | None, typer.Option(help="SQLite file for task state (default: the --stores database)")
    ] = None,
    stateless_legacy: Annotated[
        bool | None, typer.Option(help="No sessions for 2025-11-25 clients either")
    ] = None,
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
    otlp: Annotated[
        str | None, typer.Option(help="Export traces over OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318")
    ] = None,
) -> None:
    """Serve TARGET over MCP (2026-07-28 and 2025-11-25 on one endpoint).

    Flags override maitre.toml ([serve], [stores], [auth], [policy], [budgets], [approvals],
    [audit], [tracing]). Host/Origin headers are checked on every bind (DNS rebinding); a 0.0.0.0
    bind accepts only loopback Host headers until --allow-host names the public ones. HMAC secrets
    (an HS* key file, MAITRE_MCP_SECRET) under 32 bytes are refused.
    """
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    flags = {
        "target": target, "transport": transport, "host": host, "port": port, "path": path,
        "user": user, "tenant": tenant, "scope": scope, "role": role, "stores": stores,
        "rate_limits": rate_limits, "jwt_issuer": jwt_issuer, "jwt_audience": jwt_audience,
        "jwt_key_file": jwt_key_file, "jwt_jwks_url": jwt_jwks_url, "jwt_algorithm": jwt_algorithm,
        "resource_url": resource_url, "task_db": task_db, "stateless_legacy": stateless_legacy,
        "allow_host": allow_host, "allow_origin": allow_origin, "otlp": otlp,
    }  # fmt: skip
    try:
        from ..config import load_settings

        plan = plan_serve(load_settings(), **flags)
        _require_extras()
        with exit_on_interrupt():
            run_plan(plan, lambda: _target(plan.target))
    except MissingExtraError as exc:
        _fail(str(exc), 1)
    except UserError as exc:
        _fail(str(exc), 2)
    except ServeError as exc:
        _fail(str(exc), 1)


@contextlib.contextmanager
def exit_on_interrupt() -> Iterator[None]:
    """Ctrl-C (or the stop signal) ends a serving command with exit 0: a `KeyboardInterrupt`
    alone, or one raised inside the server's task groups; any other error goes on."""
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    except BaseExceptionGroup as group:
        _, other = group.split(KeyboardInterrupt)
        if other is not None:
            raise
        raise typer.Exit(0) from None


def run_plan(
    plan: ServePlan,
    load: Callable[[], Any],
    *,
    around: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None,
) -> None:
    """Check the plan's JWT settings, tracing, target (`load()`) and address, then serve it until stopped.

    `around`, when given, is entered inside the event loop before serving and left after it (what
    must live as long as the server, such as the gateway's upstream sessions). Raises `UserError`,
    `ServeError` or `MissingExtraError` for one line; Ctrl-C and SIGTERM raise KeyboardInterrupt.
    """
    verifier = _verifier(plan)
    _configure_tracing(plan.otlp)
    loaded = load()
    if plan.transport == "http":
        _check_bind(plan.host, plan.port)

    async def main() -> None:
        if around is None:
            await _serve(plan, loaded, verifier)
            return
        async with around():
            await _serve(plan, loaded, verifier)

    with _stop_on_sigterm():
        anyio.run(main)


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM stops the server as Ctrl-C does, so the stores are closed and the traces flushed.

    uvicorn shuts down gracefully on SIGTERM and then raises the signal again with the handler it
    found; the default one would kill the process before any `finally` or exit hook ran.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail(message: str, code: int) -> None:
    err.print(
        f"error: {' '.join(message.split())}", style="red", markup=False, highlight=False, soft_wrap=True
    )
    raise typer.Exit(code)
