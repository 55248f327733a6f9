"""The client the official conformance suite drives for its `auth/*` scenarios.

`conformance client --command ".venv/bin/python tests/mcp/conformance/auth_client_runner.py"`
starts a scenario's authorization server and MCP server, appends the MCP URL to the command, and
sets `MCP_CONFORMANCE_SCENARIO` (and `MCP_CONFORMANCE_CONTEXT`, JSON, for credentials it issued).

Everything OAuth here is maitre's `maitre.mcp.upstream_auth`, as `maitre mcp login` and a
configured upstream use it:

- `auth/client-credentials-basic` / `-jwt`: `client_credentials_auth` with the suite's client id
  and secret, or its private key (`private_key_jwt`);
- `auth/pre-registration`: `authorization_code_auth` with the suite's pre-registered client;
- every other `auth/*` scenario: `authorization_code_auth` registering itself (or with the CIMD
  URL the suite expects), a real `LoopbackRedirect` on 127.0.0.1, and a "browser" that opens the
  authorization URL and follows its redirect to that listener, as a person's browser would.

Tokens go to a `FileTokenStorage` in a temporary folder. Then the MCP session: list the tools,
call `test-tool` if offered. Exit 0 when the session completed, 1 otherwise (the suite judges).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2

from maitre.mcp.client import McpUpstream
from maitre.mcp.upstream_auth import (
    FileTokenStorage,
    LoopbackRedirect,
    authorization_code_auth,
    client_credentials_auth,
)

CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The client metadata document URL the suite's `auth/basic-cimd` expects as the client id."""

logger = logging.getLogger("auth_client_runner")


async def browser(url: str) -> None:
    """What a person's browser does: open the authorization URL, follow redirects to the listener."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
        response = await http.get(url)
        logger.info("browser ended at %s (%s)", response.url.copy_with(query=None), response.status_code)


async def session(url: str, auth: httpx2.Auth) -> None:
    """An MCP session through `auth`: list the tools, call `test-tool` if there is one."""
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    mode = "2026-07-28" if version >= "2026" else "legacy"
    upstream = McpUpstream(url, namespace="conformance", auth=auth, allow_loopback=True, mode=mode)
    async with upstream.session() as client:
        await _exercise(client)


async def _exercise(client: Any) -> None:
    tools = (await client.list_tools()).tools
    logger.info("tools: %s", [tool.name for tool in tools])
    if any(tool.name == "test-tool" for tool in tools):
        result = await client.call_tool("test-tool", {})
        logger.info("test-tool: is_error=%s", result.is_error)


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as folder:
        storage = FileTokenStorage(Path(folder) / "conformance.json", resource=url)
        if scenario.startswith("auth/client-credentials"):
            auth = client_credentials_auth(
                url,
                client_id=context["client_id"],
                client_secret=context.get("client_secret"),
                private_key=context.get("private_key_pem"),
                storage=storage,
            )
            await session(url, auth)
            return
        with LoopbackRedirect(browser, timeout_s=20) as redirect:
            auth = authorization_code_auth(
                url,
                storage=storage,
                redirect=redirect,
                client_id=context.get("client_id"),
                client_secret=context.get("client_secret"),
                client_metadata_url=None if "client_id" in context else CIMD_URL,
                client_name="maitre-conformance",
            )
            await session(url, auth)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    try:
        anyio.run(main, sys.argv[1])
    except BaseException as exc:  # the suite reads the exit code; say why on stderr
        logger.exception("client failed: %s", exc)
        sys.exit(1)
