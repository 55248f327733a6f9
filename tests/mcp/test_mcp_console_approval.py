"""An approval an MCP caller raised, decided by a person in the console, then retried by the client.

The MCP door and the console share one SQLite store. The caller has no agent run: the console's
request page says so. After the decision the client retries the call (twice, as a plain client
retrying a timeout would): the write runs once; the second retry replays it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated

import httpx
import pytest
from pydantic import Field

from maitre import Gate, Principal, Toolbox
from maitre.console.accounts import Account, account_store, hash_password
from maitre.console.app import create_app
from maitre.mcp.app import MCPApp
from maitre.mcp.server import APPROVAL_META_KEY, GovernedServer, ServerOptions
from maitre.policy import DefaultPolicy
from maitre.stores import open_stores
from mcp import Client

pytestmark = pytest.mark.anyio
PASSWORD = "correct horse battery staple"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


async def test_an_mcp_callers_approval_decided_in_the_console_runs_once_when_the_client_retries(
    tmp_path: Path,
) -> None:
    refunds: list[str] = []
    box = Toolbox()

    @box.tool(effect="write", risk="high")
    def issue_refund(
        order_id: str, amount: Annotated[Decimal, Field(gt=0, le=5000, decimal_places=2)]
    ) -> str:
        """Refund an order."""
        refunds.append(f"{order_id}:{amount}")
        return f"refunded {amount} on {order_id}"

    async with await open_stores(str(tmp_path / "shared.db")) as stores:
        gate = Gate(box, stores=stores, policy=DefaultPolicy(allow_self_approval=False))
        caller = Principal(user="mcp-client", tenant="acme")
        server = GovernedServer(MCPApp(box, name="shop", gate=gate), ServerOptions(principal=caller))
        await account_store(stores).put(
            Account(
                name="bob",
                tenant="acme",
                roles=frozenset({"approver"}),
                password_hash=hash_password(PASSWORD),
            )
        )
        console = create_app(stores, secret="a-test-secret-of-enough-length", toolbox=box)

        async with Client(server.lowlevel, mode="2026-07-28") as client:
            arguments = {"order_id": "A1042", "amount": "120.00"}
            waiting = await client.call_tool("issue_refund", arguments)
            assert waiting.is_error and refunds == []
            approval_id = waiting.meta["io.maitre/error"]["details"]["approval_id"]

            web = httpx.AsyncClient(transport=httpx.ASGITransport(app=console), base_url="http://testserver")
            async with web:
                form = await web.get("/sign-in")
                await web.post(
                    "/sign-in", data={"csrf": csrf_of(form.text), "name": "bob", "password": PASSWORD}
                )
                page = await web.get(f"/approvals/{approval_id}")
                assert page.status_code == 200
                assert "No agent run" in page.text  # an MCP caller has no run: said, not an empty goal
                decided = await web.post(
                    f"/approvals/{approval_id}/approve", data={"csrf": csrf_of(page.text)}
                )
                assert decided.status_code == 200 and "bob (via=console)" in decided.text

            done = await client.call_tool("issue_refund", arguments, meta={APPROVAL_META_KEY: approval_id})
            again = await client.call_tool("issue_refund", arguments, meta={APPROVAL_META_KEY: approval_id})
        assert not done.is_error and done.content[0].text == "refunded 120.00 on A1042"
        assert again.meta["io.maitre/replayed"] is True
        assert refunds == ["A1042:120.00"]
        request = await stores.approvals.get(approval_id)
        assert request is not None and request.status == "used" and request.approver == "bob (via=console)"
