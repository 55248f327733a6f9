"""An MCP client for the example's gateway: the official `mcp` SDK client, with a bearer token.

    python client.py list
    python client.py call orders.get_order '{"order_id": "A1042"}'
    python client.py call orders.refund_order '{"order_id": "A1042", "amount_cents": 3000}'
    python client.py call orders.refund_order '{...the same...}' --approval apr_...

Any MCP client that can send `Authorization: Bearer <token>` does the same (Claude Desktop via a
remote-server entry, an IDE, an agent). The token is read from `--token-file` (default
`alice.jwt`, what `mint_token.py alice > alice.jwt` writes). A call the gate holds prints the
error code and the approval id; the same call again with `--approval ID`, once a person has
approved it, runs it. Exit status 1 when the result is an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client

from mcp import Client

APPROVAL_META_KEY = "io.maitre/approvalId"  # where a retry names the approval it runs under
ERROR_META_KEY = "io.maitre/error"  # the gate's structured error on an isError result


@asynccontextmanager
async def bearer_transport(url: str, token: str) -> AsyncIterator[Any]:
    """Streamable HTTP that sends the token on every request."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def client(url: str, token: str) -> Client:
    return Client(bearer_transport(url, token), mode="2026-07-28")


async def list_tools(url: str, token: str) -> int:
    async with client(url, token) as session:
        for tool in (await session.list_tools()).tools:
            summary = (tool.description or "").split("\n")[0][:80]
            print(f"{tool.name:32} {summary}")
    return 0


async def call_tool(url: str, token: str, name: str, arguments: dict[str, Any], approval: str | None) -> int:
    meta = {APPROVAL_META_KEY: approval} if approval else None
    async with client(url, token) as session:
        result = await session.call_tool(name, arguments, meta=meta)
    for block in result.content:
        print(getattr(block, "text", f"[{block.type}]"))
    error = (result.meta or {}).get(ERROR_META_KEY)
    if error:
        print(f"error: {error['code']}")
        approval_id = (error.get("details") or {}).get("approval_id")
        if approval_id:
            print(f"approval id: {approval_id}")
    if (result.meta or {}).get("io.maitre/replayed"):
        print("(replayed: this call already ran once; nothing ran again)")
    return 1 if result.is_error else 0


def main() -> None:
    parser = argparse.ArgumentParser(description="Call the example gateway with the official MCP SDK client.")
    parser.add_argument("--url", default="http://127.0.0.1:8100/mcp")
    parser.add_argument("--token-file", type=Path, default=Path("alice.jwt"))
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the gateway's tools")
    call = commands.add_parser("call", help="call one tool")
    call.add_argument("name")
    call.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object")
    call.add_argument("--approval", help="the approval id to run the call under, once approved")
    args = parser.parse_args()
    token = args.token_file.read_text().strip()
    if args.command == "list":
        code = anyio.run(list_tools, args.url, token)
    else:
        code = anyio.run(call_tool, args.url, token, args.name, json.loads(args.arguments), args.approval)
    sys.exit(code)


if __name__ == "__main__":
    main()
