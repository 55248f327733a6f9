"""The orders service: a small MCP server of our own (the official `mcp` SDK, no maitre inside),
one of the two upstreams the example puts behind `maitre gateway`.

    python orders.py                  # Streamable HTTP on http://127.0.0.1:8200/mcp
    python orders.py --port 8201 --refunds other.jsonl

- `get_order` reads an order (`readOnlyHint`).
- `refund_order` moves money back to a customer (`destructiveHint`): the gateway holds it for a
  person's approval. Every refund this server executes is one JSON line in the refunds file, the
  service's own record, so you can count what really reached it.

The server knows nothing about who is calling: the gateway authenticates the caller, decides,
and audits; this process only sees the gateway's requests, never the caller's token.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

ORDERS = {
    "A1042": {"order_id": "A1042", "status": "delivered", "total": "120.00", "customer": "Ana Silva"},
    "A2077": {"order_id": "A2077", "status": "shipped", "total": "800.00", "customer": "Li Wei"},
}

OrderId = Annotated[str, Field(pattern=r"^A\d{4}$", description="The order id, like A1042")]


def orders_server(refunds: Path) -> MCPServer:
    """The two tools over `refunds`, the file each executed refund is appended to."""
    app = MCPServer("orders", version="1.0.0")

    @app.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    def get_order(order_id: OrderId) -> dict[str, str]:
        """Look an order up: status, total and customer. Use it before deciding on a refund."""
        order = ORDERS.get(order_id)
        if order is None:
            raise ValueError(f"no order {order_id}; known orders: {', '.join(ORDERS)}")
        return order

    @app.tool(annotations=ToolAnnotations(destructiveHint=True, idempotentHint=False, openWorldHint=False))
    def refund_order(
        order_id: OrderId,
        amount_cents: Annotated[int, Field(gt=0, le=50_000, description="The refund in cents")],
    ) -> str:
        """Refund part or all of an order to the customer. Use it only when the customer is owed money."""
        if order_id not in ORDERS:
            raise ValueError(f"no order {order_id}")
        record = {"order_id": order_id, "amount_cents": amount_cents, "at": datetime.now(UTC).isoformat()}
        with refunds.open("a") as file:
            file.write(json.dumps(record) + "\n")
        return f"refunded {amount_cents / 100:.2f} on {order_id}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--refunds", type=Path, default=Path("refunds.jsonl"))
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    app = orders_server(args.refunds).streamable_http_app()
    print(f"orders service on http://127.0.0.1:{args.port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
