"""The MCP client's upstream connections: one long-lived session per upstream and credential."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import httpx2
import pytest

from maitre.mcp.client import McpUpstream, toolbox_from_mcp
from maitre.mcp.testing import serve_process

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shop_url() -> Generator[str]:
    with serve_process("tests/mcp/mcp_testkit.py:shop_box", cwd=str(ROOT), args=["--tenant", "acme"]) as url:
        yield url


class _BearerAuth(httpx2.Auth):
    """An `httpx2.Auth` that signs every request and remembers which MCP methods it signed."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = "Bearer upstream-token"
        self.methods.append(request.headers.get("mcp-method", request.method))
        yield request


async def test_an_auth_flow_given_to_the_upstream_signs_every_request_of_its_http_transport(shop_url):
    """`auth=` reaches the HTTP client: the listing and the call both go through it."""
    auth = _BearerAuth()
    box = await toolbox_from_mcp(shop_url, namespace="shop", allow_loopback=True, auth=auth)
    tool = box.get("shop.get_order")
    assert tool is not None and tool.handler is not None
    assert (await tool.handler({"order_id": "A1042"}))["status"] == "shipped"
    assert "tools/list" in auth.methods and "tools/call" in auth.methods


async def test_an_auth_flow_is_kept_by_the_upstream_for_a_gateway_to_reuse(shop_url):
    """The credential is the upstream's own: `McpUpstream.auth` is what was configured."""
    auth = _BearerAuth()
    upstream = McpUpstream(shop_url, namespace="shop", allow_loopback=True, auth=auth)
    assert upstream.auth is auth
    assert [t["name"] for t in await upstream.definitions()] == ["get_order", "add_note", "delete_order"]
    assert auth.methods
