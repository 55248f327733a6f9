"""The client the official conformance suite drives for its (non-auth) client scenarios.

    conformance client --command ".venv/bin/python tests/mcp/conformance/client_runner.py" \\
        --scenario http-custom-headers --spec-version 2026-07-28

The suite starts the scenario's server, appends its URL to the command, and sets
`MCP_CONFORMANCE_SCENARIO`, `MCP_CONFORMANCE_PROTOCOL_VERSION` and (for some scenarios)
`MCP_CONFORMANCE_CONTEXT` (JSON). Everything below goes through maitre's client as a host uses it:
`McpUpstream` imports the server's tools (pinned, scanned, closed schemas) on its shared session,
and each call is `McpUpstream.call` (with the host's elicitation, sampling and roots callbacks).
The suite judges what reached its server; this runner only exits 1 when the session failed.

What a scenario does:

- `toolCalls` in the context (http-custom-headers): exactly those calls, in order;
- sep-2322-client-request-state: every tool, the elicitation answered with `confirmed: true`;
- elicitation-sep1034-client-defaults: the elicitation accepted with no fields, so the schema's
  defaults must be filled in by maitre's client;
- json-schema-2020-12-preservation: the focal tool's schema as maitre holds it, echoed back;
- http-standard-headers: tools, then resources and prompts through the same pooled SDK session
  (maitre imports tools only; the headers are the SDK's, on maitre's session);
- everything else: every imported tool, called with example arguments for its schema.

`auth/*` scenarios are the OAuth client's (`auth_client_runner.py`, beside this file): this runner
hands them over to it unchanged, so one `--command` serves a whole `--requirements` run.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from maitre.mcp.client import McpUpstream
from maitre.tools.examples import MISSING, example_value
from maitre.types import ToolError

logger = logging.getLogger("client_runner")

HERE = Path(__file__).resolve().parent
FOCAL = "json_schema_2020_12_tool"
ECHO = "json_schema_echo"


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The host's user: accepts; confirms when asked to, and otherwise leaves every field empty."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario.startswith("elicitation-"):
        return types.ElicitResult(action="accept", content={})
    schema = getattr(params, "requested_schema", None) or {}
    content = {"confirmed": True} if "confirmed" in (schema.get("properties") or {}) else {}
    return types.ElicitResult(action="accept", content=content)


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="sampled"), model="conformance-host"
    )


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/conformance", name="conformance")])


def _mode() -> str:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    return "auto" if version >= "2026" else "legacy"


async def _call(upstream: McpUpstream, name: str, arguments: dict[str, Any]) -> None:
    try:
        result = await upstream.call(name, arguments)
        logger.info("%s -> %s", name, str(result)[:200])
    except ToolError as exc:  # the suite judges the wire; a tool error is an answer, not a crash
        logger.info("%s -> %s: %s", name, exc.code, exc.message[:200])


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    upstream = McpUpstream(
        url,
        namespace="conformance",
        allow_loopback=True,
        mode=_mode(),
        elicitation_callback=elicit,
        sampling_callback=sample,
        list_roots_callback=roots,
    )
    try:
        box = await upstream.toolbox()
        logger.info("%s", upstream.report.render())
        imported = {tool.base_name: tool for tool in box}
        if context.get("toolCalls"):
            for planned in context["toolCalls"]:
                await _call(upstream, planned["name"], dict(planned.get("arguments") or {}))
        elif scenario == "json-schema-2020-12-preservation":
            held = upstream.definition(FOCAL)
            await _call(upstream, ECHO, {"schema": held["inputSchema"] if held else {}})
        else:
            for name, tool in imported.items():
                arguments = example_value(dict(tool.input_schema))
                await _call(upstream, name, arguments if arguments is not MISSING else {})
        if scenario == "http-standard-headers":
            async with upstream.session() as client:
                for resource in (await client.list_resources()).resources:
                    await client.read_resource(str(resource.uri))
                for prompt in (await client.list_prompts()).prompts:
                    arguments = {a.name: "x" for a in (prompt.arguments or []) if a.required}
                    await client.get_prompt(prompt.name, arguments)
    finally:
        await upstream.aclose()


if __name__ == "__main__":
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario.startswith("auth/"):
        os.execv(sys.executable, [sys.executable, str(HERE / "auth_client_runner.py"), *sys.argv[1:]])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    try:
        anyio.run(main, sys.argv[1])
    except BaseException as exc:  # the suite reads the exit code; say why on stderr
        logger.exception("client failed: %s", exc)
        sys.exit(1)
