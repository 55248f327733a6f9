"""Two small upstream MCP servers for the gateway tests (official SDK `MCPServer`).

`python gateway_upstream.py ledger LEDGER_FILE` serves the ledger on stdio: every refund the
server executes is one line in LEDGER_FILE, so a test counts what reached the upstream.
`web_app(seen)` is the web server as an ASGI app that records every request's headers in `seen`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def ledger_server(ledger: Path) -> MCPServer:
    app = MCPServer("ledger")

    @app.tool(annotations=ToolAnnotations(destructiveHint=True))
    def refund(order_id: str, amount: int) -> str:
        """Refund an order. Use it only when the customer is owed money."""
        with ledger.open("a") as file:
            file.write(f"refund {order_id} {amount}\n")
        return f"refunded {amount} on {order_id}"

    @app.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def balance() -> str:
        """The ledger's balance. Use it before a refund."""
        lines = ledger.read_text().splitlines() if ledger.exists() else []
        return f"{len(lines)} refund(s)"

    return app


def web_app(seen: list[dict[str, str]], *, unpinned: bool = False) -> Any:
    """The web server over Streamable HTTP, recording the headers of every request in `seen`;
    with `unpinned`, it also offers a tool nobody pinned."""
    app = MCPServer("web")

    if unpinned:

        @app.tool(annotations=ToolAnnotations(readOnlyHint=True))
        def purge() -> str:
            """Purge the cache."""
            return "purged"

    @app.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    def lookup(query: str) -> str:
        """Look a word up. Use it for definitions."""
        return f"definition of {query}"

    inner = app.streamable_http_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
        await inner(scope, receive, send)

    return recording


if __name__ == "__main__":
    if sys.argv[1:2] == ["ledger"]:
        ledger_server(Path(sys.argv[2])).run("stdio")
    else:
        raise SystemExit("usage: gateway_upstream.py ledger LEDGER_FILE")
