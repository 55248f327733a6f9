"""Helpers for the MCP tests: a raw 2026-07-28 POST (for attacks the SDK client would never send)
and a tiny shop toolbox. Real transports only: servers run on 127.0.0.1 at an ephemeral port."""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
from pydantic import BaseModel, Field

from maitre import Principal, Toolbox

MODERN = "2026-07-28"


def envelope(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
    }


async def rpc(
    url: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    headers: dict[str, str] | None = None,
    meta: bool = True,
    capabilities: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 request; returns (HTTP status, JSON-RPC response)."""
    body_params = dict(params or {})
    if meta:
        body_params["_meta"] = envelope(capabilities)
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        sent["Mcp-Name"] = name
    sent.update(headers or {})
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": body_params}, headers=sent
        )
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        frames = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
        text = json.dumps([f for f in frames if "id" in f][-1])
    return response.status_code, json.loads(text) if text else {}


class Order(BaseModel):
    order_id: str
    status: str
    tenant: str


def shop_box() -> Toolbox:
    box = Toolbox()

    @box.tool
    def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")], principal: Principal) -> Order:
        """Look up one order by its id. Use it for status questions; not for refunds."""
        return Order(order_id=order_id, status="shipped", tenant=principal.tenant)

    @box.tool(effect="write", risk="medium")
    def add_note(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")], note: str) -> str:
        """Add a note to an order. Use it to record what the customer said."""
        return f"noted on {order_id}"

    @box.tool(effect="destructive", risk="high", open_world=True)
    def delete_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> str:
        """Delete an order for good. Use it only when the customer asks to erase it."""
        return f"deleted {order_id}"

    return box
