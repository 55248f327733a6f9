"""Seed 003's support server: read-only status, a draft only after confirmation, a policy resource."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import mcp_types as types
import pytest

from maitre.mcp.server import GovernedServer, ServerOptions
from maitre.types import Principal
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("support_server_example", Path(__file__).parent / "server.py")
assert _spec is not None and _spec.loader is not None
support = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = support
_spec.loader.exec_module(support)


def _governed(tenant: str = "acme") -> GovernedServer:
    return GovernedServer(support.app, ServerOptions(principal=Principal(user="alice", tenant=tenant)))


async def test_ticket_status_is_read_only_and_scoped_to_the_callers_tenant():
    """acme reads its ticket; globex's ticket is NOT_FOUND for acme; a bad id teaches the pattern."""
    async with Client(_governed().lowlevel, mode="2026-07-28") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["get_ticket_status"].annotations.read_only_hint
        assert "principal" not in tools["get_ticket_status"].input_schema["properties"]
        ok = await client.call_tool("get_ticket_status", {"ticket_id": "T-000123"})
        other = await client.call_tool("get_ticket_status", {"ticket_id": "T-000900"})
        bad = await client.call_tool("get_ticket_status", {"ticket_id": "123"})
    assert ok.structured_content == {
        "ticket_id": "T-000123",
        "status": "open",
        "updated_at": "2026-07-22T10:00:00Z",
    }
    assert other.meta["io.maitre/error"]["code"] == "NOT_FOUND"
    assert bad.meta["io.maitre/error"]["code"] == "INVALID_ARGUMENTS" and "T-" in bad.content[0].text


@pytest.mark.parametrize("confirm", [True, False])
async def test_a_draft_is_created_only_after_the_user_confirms(confirm):
    """The user is asked with the exact title; a decline creates nothing."""
    before = len(support.DRAFTS)
    asked: list[str] = []

    async def user(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": confirm})

    # Each case asks for its own draft: the same principal sending the same draft again within the
    # gate's dedupe window would (rightly) get the first draft replayed, not a second question.
    title = "Charged twice" if confirm else "Charged twice, declined"
    async with Client(_governed().lowlevel, mode="2026-07-28", elicitation_callback=user) as client:
        result = await client.call_tool("create_ticket_draft", {"title": title, "category": "billing"})
    assert len(asked) == 1 and "Charged twice" in asked[0]
    if confirm:
        assert result.structured_content["status"] == "draft" and len(support.DRAFTS) == before + 1
    else:
        assert result.is_error and len(support.DRAFTS) == before


async def test_the_policy_is_a_resource_and_stdio_stays_clean():
    """Over stdio (a subprocess) the policy resource reads back; logs went to stderr, not stdout."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "maitre.mcp",
            "serve",
            "examples/support_server/server.py:app",
            "--transport",
            "stdio",
            "--tenant",
            "acme",
        ],
        cwd=str(ROOT),
    )
    async with Client(params, mode="legacy") as client:
        resources = (await client.list_resources()).resources
        assert [r.uri for r in resources] == ["support://policy"]
        text = (await client.read_resource("support://policy")).contents[0].text
        status = await client.call_tool("get_ticket_status", {"ticket_id": "T-000124"})
    assert text.startswith("# Support policy")
    assert status.structured_content["status"] == "resolved"
