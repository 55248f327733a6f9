"""`maitre serve` and `maitre mcp pin|check|scan`: the MCP commands (typer apps the root CLI mounts).

`serve` loads `MODULE_OR_FILE:ATTR` - an `MCPApp`, a `Toolbox` (served as `MCPApp(box)`), or a
zero-argument factory returning either - and serves it on stdio or Streamable HTTP. On stdio the
process prints nothing but protocol on stdout (messages go to stderr). `mcp pin` writes the
lockfile that `toolbox_from_mcp(lockfile=...)` enforces; `mcp check` shows drift against it.
Like `from_mcp`, the three `mcp` commands refuse loopback, private, link-local and metadata
addresses before connecting unless `--allow-loopback` or `--allow-upstream HOST|CIDR` says otherwise
(`maitre serve --allow-host` is the other direction: the Host headers a served endpoint accepts).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console

from ..mcp.serve import serve_command

__all__ = [
    "AllowHost",
    "AllowLoopback",
    "check_command",
    "mcp_app",
    "pin_command",
    "scan_command",
    "serve_app",
    "serve_command",
]

err = Console(stderr=True)
out = Console()

mcp_app = typer.Typer(
    name="mcp",
    help="Pin, check and scan other MCP servers' tools.",
    no_args_is_help=True,
    add_completion=False,
)
serve_app = typer.Typer(
    name="serve", help="Serve a toolbox over MCP, every call through the gate.", add_completion=False
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


def _upstream(
    target: str,
    namespace: str,
    header: list[str] | None,
    allow_loopback: bool = False,
    allow_host: list[str] | None = None,
    **kw: Any,
) -> Any:
    from ..mcp.client import McpUpstream

    headers = {}
    for item in header or ():
        name, _, value = item.partition(":")
        headers[name.strip()] = os.path.expandvars(value.strip())
    return McpUpstream(
        target,
        namespace=namespace,
        headers=headers,
        allow_loopback=allow_loopback,
        allowed_hosts=allow_host or (),
        **kw,
    )


def _run(main: Any) -> None:
    """Run an async command; an address the guard refuses is a clear error (exit 2)."""
    from ..mcp.egress import AddressRefused

    try:
        code = anyio.run(main)
    except AddressRefused as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


@mcp_app.command("pin")
def pin_command(
    target: Annotated[str, typer.Argument(help="URL or command line of the MCP server")],
    namespace: Annotated[str, typer.Option(help="Namespace (and lockfile key) of the server")],
    lockfile: Annotated[Path, typer.Option(help="Lockfile to write")] = Path("maitre.mcp.lock.json"),
    header: Annotated[
        list[str] | None, typer.Option(help="'Name: value' for this server ($VARS expand)")
    ] = None,
    force: Annotated[bool, typer.Option(help="Pin even tools with high-severity scanner findings")] = False,
    allow_loopback: AllowLoopback = False,
    allow_host: AllowHost = None,
) -> None:
    """Pin every tool the server offers now (after scanning them)."""
    from ..mcp.pinning import Lockfile
    from ..mcp.scanner import scan_servers

    async def main() -> int:
        upstream = _upstream(target, namespace, header, allow_loopback, allow_host)
        offered = await upstream.definitions()
        findings = scan_servers({namespace: offered})
        for finding in findings:
            err.print(finding.render(), markup=False)
        high = sorted({f.tool for f in findings if f.severity == "high"})
        if high and not force:
            err.print(
                f"[red]not pinned: high-severity findings in {', '.join(high)} (review, then --force)[/red]"
            )
            return 1
        lock = Lockfile.load(lockfile)
        lock.pin(namespace, offered, source=target)
        lock.save()
        out.print(f"pinned {len(offered)} tool(s) of {namespace} in {lockfile}")
        return 0

    _run(main)


@mcp_app.command("check")
def check_command(
    target: Annotated[str, typer.Argument(help="URL or command line of the MCP server")],
    namespace: Annotated[str, typer.Option(help="Namespace (and lockfile key) of the server")],
    lockfile: Annotated[Path, typer.Option(help="Lockfile to compare with")] = Path("maitre.mcp.lock.json"),
    header: Annotated[list[str] | None, typer.Option(help="'Name: value' for this server")] = None,
    allow_loopback: AllowLoopback = False,
    allow_host: AllowHost = None,
) -> None:
    """Show drift between what the server offers and the lockfile (exit 1 on drift)."""
    from ..mcp.pinning import Lockfile, check_drift

    async def main() -> int:
        offered = await _upstream(target, namespace, header, allow_loopback, allow_host).definitions()
        report = check_drift(namespace, offered, Lockfile.load(lockfile))
        out.print(report.render(), markup=False, highlight=False)
        return 0 if report.clean else 1

    _run(main)


@mcp_app.command("scan")
def scan_command(
    target: Annotated[str, typer.Argument(help="URL or command line of the MCP server")],
    namespace: Annotated[str, typer.Option(help="Namespace of the server")] = "upstream",
    header: Annotated[list[str] | None, typer.Option(help="'Name: value' for this server")] = None,
    allow_loopback: AllowLoopback = False,
    allow_host: AllowHost = None,
) -> None:
    """Scan the server's tool definitions (exit 1 on a high-severity finding)."""
    from ..mcp.scanner import scan_servers

    async def main() -> int:
        upstream = _upstream(target, namespace, header, allow_loopback, allow_host)
        findings = scan_servers({namespace: await upstream.definitions()})
        for finding in findings:
            out.print(finding.render(), markup=False, highlight=False)
        if not findings:
            out.print("no findings")
        return 1 if any(f.severity == "high" for f in findings) else 0

    _run(main)
