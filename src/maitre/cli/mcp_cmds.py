"""`maitre mcp pin|check|scan|login|logout`: the MCP client commands (a typer app the root CLI mounts).

`mcp pin` writes the lockfile that `toolbox_from_mcp(lockfile=...)` enforces; `mcp check` shows
drift against it; `mcp scan` reports what the scanner finds in a server's tool definitions.
TARGET is a URL or a command line; without it, `--namespace NAME` names an upstream of the
configuration file (`[mcp.upstreams.NAME]`, with its headers, address allowances and OAuth).
`mcp login NAME` signs a person in to an upstream with `auth = "authorization_code"` (the URL is
printed to stderr, the browser's redirect comes back to 127.0.0.1 on an ephemeral port) and caches
the tokens (`maitre.mcp.upstream_auth`); `mcp logout NAME` forgets them.
Like `from_mcp`, the three commands refuse loopback, private, link-local and metadata addresses
before connecting unless `--allow-loopback` or `--allow-upstream HOST|CIDR` says otherwise
(`maitre serve --allow-host` is the other direction: the Host headers a served endpoint accepts).
A server that cannot be reached, or does not speak MCP within `--timeout`, is a one-line error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..mcp.serve import serve_command
from .app import App, console, err, settings
from .errors import CommandError, leaf_exception

if TYPE_CHECKING:
    import httpx2

    from ..config.schema import UpstreamConfig
    from ..mcp.pinning import Lockfile

__all__ = [
    "AllowHost",
    "AllowLoopback",
    "Header",
    "LockfileOption",
    "Name",
    "Namespace",
    "Target",
    "Timeout",
    "check_command",
    "login_command",
    "logout_command",
    "mcp_app",
    "pin_command",
    "scan_command",
    "serve_app",
    "serve_command",
]

out = console

mcp_app = App(name="mcp", help="Pin, check and scan other MCP servers' tools.")
serve_app = App(
    name="serve",
    help="Serve a toolbox over MCP, every call through the gate.",
    no_args_is_help=False,
)


serve_app.command("serve")(serve_command)


AllowLoopback = Annotated[bool, typer.Option(help="Allow a server on 127.0.0.0/8 or ::1 (local development)")]
AllowHost = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-upstream",
        help="Let this command connect to this private host, address or CIDR network (repeatable)",
    ),
]
Timeout = Annotated[
    float, typer.Option(min=0.1, help="Seconds to wait for the server's tool list before giving up")
]
Target = Annotated[
    str | None,
    typer.Argument(help="URL or command line of the MCP server (default: the upstream --namespace names)"),
]


@dataclass(kw_only=True)
class _Server:
    """The server a command talks to, with the flags and the configuration file merged."""

    target: str
    namespace: str
    headers: dict[str, str]
    allow_loopback: bool
    allow_host: list[str]
    auth: httpx2.Auth | None = None


def _server(
    target: str | None,
    namespace: str,
    header: list[str] | None,
    allow_loopback: bool,
    allow_host: list[str] | None,
) -> _Server:
    from .._extras import require

    require("mcp", "maitre mcp")
    configured = settings().config.mcp.upstreams.get(namespace)
    headers: dict[str, str] = {}
    if configured is not None:
        headers.update(configured.headers)
    for item in header or ():
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{item!r} is not 'Name: value'", param_hint="--header")
        headers[name.strip()] = value.strip()
    if target is None:
        if configured is None:
            raise typer.BadParameter(
                f"give the server's URL or command line, or configure [mcp.upstreams.{namespace}] "
                "in maitre.toml",
                param_hint="TARGET",
            )
        target = configured.target()
    auth = None
    if configured is not None and configured.auth != "none" and target == configured.url:
        from ..mcp.upstream_auth import upstream_auth

        auth = upstream_auth(namespace, _resolved(configured))
    return _Server(
        target=target,
        namespace=namespace,
        headers={k: os.path.expandvars(v) for k, v in headers.items()},
        allow_loopback=allow_loopback or bool(configured and configured.allow_loopback),
        allow_host=[*(allow_host or ()), *(configured.allowed_hosts if configured else ())],
        auth=auth,
    )


def _resolved(configured: UpstreamConfig) -> UpstreamConfig:
    """The upstream's settings with `private_key_file` relative to the configuration file."""
    if configured.private_key_file is None:
        return configured
    return configured.model_copy(update={"private_key_file": settings().path_of(configured.private_key_file)})


def _lockfile(path: Path | None) -> Lockfile:
    """The lockfile (the flag, else `[mcp] lockfile`); a file that is not one is a usage error."""
    from ..mcp.pinning import Lockfile

    config = settings()
    chosen = path if path is not None else config.path_of(config.config.mcp.lockfile)
    if chosen.is_dir():
        raise CommandError(f"--lockfile {chosen} is a folder: name the lockfile inside it", code=2)
    try:
        return Lockfile.load(chosen)
    except ValueError as exc:  # broken JSON, or JSON that is not a lockfile
        detail = str(exc) if str(exc).startswith(str(chosen)) else f"{chosen}: not valid JSON ({exc})"
        raise CommandError(f"{detail}; fix it, or pin again into a new file", code=2) from None


async def _definitions(server: _Server, timeout_s: float) -> list[dict[str, Any]]:
    """The server's tool definitions, or a one-line reason why there are none."""
    import anyio
    from mcp.client.auth import OAuthFlowError
    from mcp.shared.exceptions import MCPError

    from ..mcp.client import McpUpstream

    upstream = McpUpstream(
        server.target,
        namespace=server.namespace,
        headers=server.headers,
        allow_loopback=server.allow_loopback,
        allowed_hosts=server.allow_host,
        timeout_s=timeout_s,
        auth=server.auth,
    )
    try:
        with anyio.fail_after(timeout_s):
            return list(await upstream.definitions())
    except Exception as exc:
        leaf = leaf_exception(exc)
        if isinstance(leaf, TimeoutError):
            raise CommandError(
                f"{server.target} gave no MCP tool list within {timeout_s:g} s: is it an MCP server? "
                "(raise --timeout for a slow one)"
            ) from None
        if isinstance(leaf, MCPError):
            raise CommandError(
                f"{server.target} did not answer as an MCP server ({leaf}): check the URL or command"
            ) from None
        if isinstance(leaf, OAuthFlowError):
            raise CommandError(f"{server.target}: {leaf}") from None
        if isinstance(leaf, FileNotFoundError):
            name = leaf.filename or server.target
            raise CommandError(f"cannot start {name!r}: no such command (check the command line)") from None
        raise


def _run(main: Any) -> None:
    """Run an async command; an address the guard refuses is a clear error (exit 2)."""
    import anyio

    from ..mcp.egress import AddressRefused

    try:
        code = anyio.run(main)
    except AddressRefused as exc:
        raise CommandError(str(exc), code=2) from None
    raise typer.Exit(code)


Namespace = Annotated[str, typer.Option(help="Namespace (and lockfile key) of the server")]
LockfileOption = Annotated[
    Path | None, typer.Option(help="The lockfile (default: [mcp] lockfile, else maitre.mcp.lock.json)")
]
Header = Annotated[list[str] | None, typer.Option(help="'Name: value' for this server ($VARS expand)")]


@mcp_app.command("pin")
def pin_command(
    namespace: Namespace,
    target: Target = None,
    lockfile: LockfileOption = None,
    header: Header = None,
    force: Annotated[bool, typer.Option(help="Pin even tools with high-severity scanner findings")] = False,
    allow_loopback: AllowLoopback = False,
    allow_host: AllowHost = None,
    timeout: Timeout = 30.0,
) -> None:
    """Pin every tool the server offers now (after scanning them)."""
    from ..mcp.scanner import scan_servers

    server = _server(target, namespace, header, allow_loopback, allow_host)
    lock = _lockfile(lockfile)

    async def main() -> int:
        offered = await _definitions(server, timeout)
        findings = scan_servers({namespace: offered})
        for finding in findings:
            err.print(finding.render(), markup=False)
        high = sorted({f.tool for f in findings if f.severity == "high"})
        if high and not force:
            err.print(
                f"[red]not pinned: high-severity findings in {', '.join(high)} (review, then --force)[/red]"
            )
            return 1
        lock.pin(namespace, offered, source=server.target)
        lock.save()
        out.print(f"pinned {len(offered)} tool(s) of {namespace} in {lock.path}", soft_wrap=True)
        return 0

    _run(main)


@mcp_app.command("check")
def check_command(
    namespace: Namespace,
    target: Target = None,
    lockfile: LockfileOption = None,
    header: Header = None,
    allow_loopback: AllowLoopback = False,
    allow_host: AllowHost = None,
    timeout: Timeout = 30.0,
) -> None:
    """Show drift between what the server offers and the lockfile (exit 1 on drift)."""
    from ..mcp.pinning import check_drift

    server = _server(target, namespace, header, allow_loopback, allow_host)
    lock = _lockfile(lockfile)

    async def main() -> int:
        report = check_drift(namespace, await _definitions(server, timeout), lock)
        out.print(report.render(), markup=False, highlight=False)
        return 0 if report.clean else 1

    _run(main)


@mcp_app.command("scan")
def scan_command(
    target: Target = None,
    namespace: Annotated[str, typer.Option(help="Namespace of the server")] = "upstream",
    header: Header = None,
    allow_loopback: AllowLoopback = False,
    allow_host: AllowHost = None,
    timeout: Timeout = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON")] = False,
) -> None:
    """Scan the server's tool definitions (exit 1 on a high-severity finding)."""
    from ..mcp.scanner import scan_servers

    server = _server(target, namespace, header, allow_loopback, allow_host)

    async def main() -> int:
        findings = scan_servers({namespace: await _definitions(server, timeout)})
        if as_json:
            import json

            typer.echo(json.dumps([f.__dict__ for f in findings], indent=2, default=str))
        else:
            for finding in findings:
                out.print(finding.render(), markup=False, highlight=False)
            if not findings:
                out.print("no findings")
        return 1 if any(f.severity == "high" for f in findings) else 0

    _run(main)


Name = Annotated[str, typer.Argument(help="The upstream: [mcp.upstreams.NAME] in maitre.toml")]


def _oauth_upstream(name: str) -> UpstreamConfig:
    from .._extras import require

    require("mcp", "maitre mcp")
    configured = settings().config.mcp.upstreams.get(name)
    if configured is None or configured.auth != "authorization_code":
        raise CommandError(
            f'configure [mcp.upstreams.{name}] with url and auth = "authorization_code" in maitre.toml first',
            code=2,
        )
    return _resolved(configured)


def _has_display() -> bool:
    """Whether a graphical browser can open: without one, `webbrowser` would start a text browser
    (lynx, w3m) in this terminal, so the printed URL is the way (open it on any machine)."""
    import sys

    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


@mcp_app.command("login")
def login_command(
    name: Name,
    browser: Annotated[
        bool, typer.Option(help="Also open the URL in the default browser (when there is a display)")
    ] = True,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for the sign-in")] = 300.0,
) -> None:
    """Sign in to an OAuth upstream (authorization code + PKCE) and cache its tokens (mode 0600)."""
    from mcp.client.auth import OAuthFlowError

    from ..mcp.upstream_auth import sign_in

    configured = _oauth_upstream(name)

    async def show(url: str) -> None:
        err.print(f"Sign in to {name} here (waiting up to {timeout:g} s):", highlight=False)
        err.print(url, markup=False, highlight=False, soft_wrap=True)
        if browser and _has_display():
            import webbrowser

            import anyio.to_thread

            await anyio.to_thread.run_sync(webbrowser.open, url)

    async def main() -> int:
        try:
            storage = await sign_in(name, configured, open_url=show, timeout_s=timeout)
        except Exception as exc:
            leaf = leaf_exception(exc)
            if isinstance(leaf, OAuthFlowError):
                raise CommandError(f"sign-in to {name} failed: {leaf}") from None
            raise
        err.print(f"signed in to {name}; tokens kept in {storage.path}", markup=False, highlight=False)
        return 0

    _run(main)


@mcp_app.command("logout")
def logout_command(name: Name) -> None:
    """Forget the tokens `maitre mcp login NAME` cached."""
    from ..mcp.upstream_auth import FileTokenStorage, token_file

    configured = _oauth_upstream(name)
    storage = FileTokenStorage(token_file(name), resource=str(configured.url))
    forgot = storage.clear()
    err.print(f"{'forgot the tokens of' if forgot else 'no tokens kept for'} {name}", highlight=False)
