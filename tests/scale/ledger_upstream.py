"""The upstream behind the replica-kill test and the gateway benchmark: one small MCP server.

`python ledger_upstream.py PORT LEDGER_FILE` serves Streamable HTTP on 127.0.0.1:PORT (stateless,
JSON responses, the official SDK's `MCPServer`) with three tools:

- `record(write_id)`: a write. Every execution appends one line `write_id` to LEDGER_FILE with a
  single `write(2)` on an O_APPEND descriptor, before it answers, so the file is the ground truth
  of what reached the upstream: a test counts each id's lines. The gateway replicas die in the
  test; this process does not, so the kernel's page cache is durable enough for the count.
- `lookup(write_id)`: a read; how many times `record` ran for that id (from memory).
- `echo(text)`: the benchmark's call, the text back unchanged.

The annotations say what the tools do (the gateway is told to trust them): `record` is a write
that is neither destructive nor open-world, so the default policy lets it run without a person,
as the load of the test needs; its idempotency is still the gate's business.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def ledger_server(ledger_path: str) -> MCPServer:
    app = MCPServer("ledger", log_level="WARNING")
    fd = os.open(ledger_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    executed: Counter[str] = Counter()

    @app.tool(
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        )
    )
    def record(write_id: str) -> str:
        """Record one write in the ledger. Use it once per payment."""
        os.write(fd, f"{write_id}\n".encode())
        executed[write_id] += 1
        return f"recorded {write_id}"

    @app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def lookup(write_id: str) -> int:
        """How many times a write was recorded. Use it to check a write."""
        return executed[write_id]

    @app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return app


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: ledger_upstream.py PORT LEDGER_FILE")
    import uvicorn

    asgi = ledger_server(sys.argv[2]).streamable_http_app(stateless_http=True, json_response=True)
    # No access log: one line per request would cost the benchmark's direct row more than its call.
    uvicorn.run(asgi, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
