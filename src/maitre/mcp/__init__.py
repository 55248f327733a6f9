"""MCP for maitre: serve a toolbox through the gate, and import other servers' tools safely.

Both sides are built on the official SDK (`mcp==2.3.0`): the 2026-07-28 stateless revision and
2025-11-25 sessions on one endpoint.

- `maitre.mcp.server` / `maitre.mcp.app`: `MCPApp` (a toolbox plus resources and prompts) served
  with every `tools/call` going through `Gate.call`.
- `maitre.mcp.client`: `toolbox_from_mcp(...)` imports tools as namespaced, untrusted tools.
- `maitre.mcp.pinning` / `maitre.mcp.scanner`: lockfile pins and definition scanning.
- `maitre.mcp.handles`, `maitre.mcp.tasks`, `maitre.mcp.auth`: signed handles, the Tasks
  extension, bearer-token principals.
- `maitre.mcp.context`: what a tool may ask of the MCP request (progress, media, input).
- `maitre.mcp.transports` / `maitre.mcp.testing`: stdio and HTTP serving; real-transport test helpers.

Submodules are imported on use, so `import maitre` does not pay for the SDK; the names below are
the ones most programs need, each loaded from its submodule on first access (`maitre.mcp.MCPApp`
is `maitre.mcp.app.MCPApp`).

Layer: a door. It imports the core (the gate, tools, stores) and never `maitre.cli`: the `serve`
command lives here (`maitre.mcp.serve`) and the root command line mounts it. See `maitre` for
the layer rules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._extras import MissingExtraError, missing_modules

if TYPE_CHECKING:
    from .app import MCPApp
    from .auth import JWTVerifier, StaticTokens
    from .client import McpUpstream, aclose_upstreams, toolbox_from_mcp
    from .context import McpCallContext, current_call
    from .pinning import Lockfile
    from .scanner import scan_servers
    from .server import GovernedServer, ServerOptions, build_server
    from .transports import http_app, running_http, serve_http, serve_stdio
    from .upstream_session import UpstreamCredential

__all__ = [
    "GovernedServer",
    "JWTVerifier",
    "Lockfile",
    "MCPApp",
    "McpCallContext",
    "McpUpstream",
    "ServerOptions",
    "StaticTokens",
    "UpstreamCredential",
    "aclose_upstreams",
    "build_server",
    "current_call",
    "http_app",
    "running_http",
    "scan_servers",
    "serve_http",
    "serve_stdio",
    "toolbox_from_mcp",
]

_LAZY = {
    "GovernedServer": "server",
    "JWTVerifier": "auth",
    "Lockfile": "pinning",
    "MCPApp": "app",
    "McpCallContext": "context",
    "McpUpstream": "client",
    "ServerOptions": "server",
    "StaticTokens": "auth",
    "UpstreamCredential": "upstream_session",
    "aclose_upstreams": "client",
    "build_server": "server",
    "current_call": "context",
    "http_app": "transports",
    "running_http": "transports",
    "scan_servers": "scanner",
    "serve_http": "transports",
    "serve_stdio": "transports",
    "toolbox_from_mcp": "client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'maitre.mcp' has no attribute {name!r}")
    try:
        loaded = importlib.import_module(f"{__name__}.{module}")
    except ImportError:
        missing = missing_modules("mcp")
        if missing:  # the SDK is not installed: say which pip install brings it
            raise MissingExtraError("mcp", f"maitre.mcp.{name}", missing) from None
        raise
    value = getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
