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

Submodules are imported on use, so `import maitre` does not pay for the SDK.
"""

__all__: list[str] = []
