"""`maitre gateway`: every configured upstream MCP server behind one governed endpoint.

The upstreams are the `[mcp.upstreams.NAME]` sections (NAME is the namespace of its tools), held
to the pins of `[mcp] lockfile` (`maitre mcp pin --namespace NAME` writes them) and served over
Streamable HTTP through one gate (`maitre.mcp.gateway.Gateway`, `maitre.mcp.serve.run_plan`):
the stores come from `--stores` or `[stores]`, JWT checks from `[auth]`, policy, budgets,
approvals and audit from their sections; `[gateway]` gives host, port, path, trust_annotations
and retry_max_s. An upstream that is down at start does not stop the gateway: it is reported and
tried again in the background.

The upstreams' resources and prompts are served too (`maitre.mcp.federation`); each read and
prompt fetch is logged on stderr (who, which upstream, which URI or prompt, how many bytes).
`GET /healthz` answers, without a token, how many upstreams are up and down (`maitre.mcp.transports`).

Speed: with uvloop installed the gateway runs on uvloop's event loop (`--loop auto`, the default;
`--loop asyncio` keeps the standard one), and uvicorn parses HTTP with httptools when that is
installed (its own `http="auto"`). Both are optional (`pip install uvloop httptools`); measured by
benchmarks/gateway_profile.py (`--variants base,httptools+uvloop`): ~10-15% less CPU per call.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .app import settings, use_config
from .errors import CommandError
from .mcp_cmds import _resolved

if TYPE_CHECKING:
    from ..mcp.pinning import Lockfile

__all__ = ["gateway_command", "use_event_loop"]

logger = logging.getLogger("maitre.cli.gateway")


def use_event_loop(choice: str) -> str:
    """Make the event loops this process creates from now on uvloop's (`choice` "auto": when it is
    installed; "uvloop": or fail) or leave asyncio's ("asyncio"); returns which one it is.

    It sets the asyncio event-loop policy, which `anyio.run` (`serve.run_plan`) creates its loop
    from; only the gateway's own process is affected (the CLI runs one command)."""
    if choice == "asyncio":
        return "asyncio"
    try:
        # Imported by name: optional, and without type information for mypy to check against.
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if choice == "uvloop":
            raise CommandError(
                "--loop uvloop: uvloop is not installed (pip install uvloop)", code=2
            ) from None
        return "asyncio"
    import asyncio

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    logger.info("event loop: uvloop %s", getattr(uvloop, "__version__", ""))
    return "uvloop"


def gateway_command(
    config: Annotated[
        Path | None, typer.Option("--config", help="The configuration file (default: maitre.toml, searched)")
    ] = None,
    host: Annotated[str | None, typer.Option(help="HTTP bind address  [default: 127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="HTTP port  [default: 8100]")] = None,
    path: Annotated[str | None, typer.Option(help="HTTP endpoint path  [default: /mcp]")] = None,
    stores: Annotated[
        str | None,
        typer.Option(help="Keep approvals, idempotency and audit here (a SQLite file or postgresql://...)"),
    ] = None,
    loop: Annotated[
        str,
        typer.Option(help="Event loop: auto (uvloop when installed), uvloop (required) or asyncio"),
    ] = "auto",
) -> None:
    """Serve every [mcp.upstreams.NAME] server's pinned tools on one endpoint, each call through the gate."""
    from .._extras import MissingExtraError, require
    from ..mcp.serve import ServeError, exit_on_interrupt, gate_for, plan_serve, run_plan

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if config is not None:
        if not config.is_file():
            raise CommandError(f"--config {config}: no such file", code=2)
        use_config(config)
    require("mcp", "maitre gateway")
    if loop not in ("auto", "uvloop", "asyncio"):
        raise CommandError(f"--loop {loop}: choose auto, uvloop or asyncio", code=2)
    use_event_loop(loop)
    loaded = settings()
    file = loaded.config
    if not file.mcp.upstreams:
        raise CommandError(
            "no upstreams: configure at least one [mcp.upstreams.NAME] (url or command) in maitre.toml",
            code=2,
        )
    lock = _lockfile()
    gateway_config = file.gateway
    plan = plan_serve(
        loaded,
        target="gateway",
        transport="http",
        host=host if host is not None else gateway_config.host,
        port=port if port is not None else gateway_config.port,
        path=path if path is not None else gateway_config.path,
        stores=stores,
    )
    plan.name = "maitre-gateway"
    upstreams = {name: _resolved(upstream) for name, upstream in file.mcp.upstreams.items()}

    from ..mcp.app import MCPApp
    from ..mcp.gateway import Gateway

    gateway = Gateway(
        upstreams,
        lockfile=lock,
        trust_annotations=gateway_config.trust_annotations,
        retry_max_s=gateway_config.retry_max_s,
        poll_s=gateway_config.poll_s,
        list_timeout_s=gateway_config.list_timeout_s,
    )
    logging.getLogger("maitre.mcp.federation").setLevel(logging.INFO)  # every read, as an access log

    def served() -> MCPApp:
        # The gate from the file, as `maitre serve` builds one; with --stores / [stores] run_plan
        # moves it onto them.
        gate = gate_for(gateway.toolbox, None, plan)
        app = MCPApp(gateway.toolbox, name=plan.name or "maitre-gateway", gate=gate)
        app.add_source(gateway.federation)
        app.health = gateway.health
        return app

    try:
        with exit_on_interrupt():
            run_plan(plan, served, around=lambda: gateway)
    except MissingExtraError as exc:
        raise CommandError(str(exc)) from None
    except ServeError as exc:
        raise CommandError(str(exc)) from None


def _lockfile() -> Lockfile:
    from ..mcp.pinning import Lockfile

    config = settings()
    chosen = config.path_of(config.config.mcp.lockfile)
    if not chosen.is_file():
        raise CommandError(
            f"no lockfile at {chosen}: pin each upstream first (maitre mcp pin --namespace NAME); "
            "the gateway serves pinned tools only",
            code=2,
        )
    try:
        return Lockfile.load(chosen)
    except ValueError as exc:
        raise CommandError(f"{chosen}: not a lockfile ({exc}); pin again into a new file", code=2) from None
