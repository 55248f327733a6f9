"""Test doubles for code built on maitre: real objects, no mocks.

A test of an agent should go through the same gate production uses; what it needs replaced is the
model (not deterministic, not free) and, sometimes, the network. This module ships those doubles,
as pydantic-ai ships `TestModel`, httpx `MockTransport` and structlog `capture_logs`:

- `TestModel`: a `Model` that, on its first turn, calls every offered tool once - all in one turn,
  as parallel calls - with arguments generated from the tool's JSON Schema by the generator the
  gate's teaching errors use (`maitre.tools.examples`: patterns, enums, ranges, Decimal strings,
  nested objects; required fields only by default), each checked by the gate's own strict
  validation before it is sent; then it answers with a JSON summary of the results.
- `ScriptedModel` (with `Rule` and `call`): deterministic rules, for a conversation you script.
- `MemoryStores`: every store in process, nothing persisted.
- `capture_calls(gate)`: every call made through a gate while the block runs, with its context,
  result and the audit entry the gate's recorder builds for it.
- `mcp_client(app)`: an SDK `mcp.Client` connected in memory to a `GovernedServer` for an
  `MCPApp` or a `Toolbox` (the MCP SDK is imported only when this is used, so
  `import maitre.testing` works without the `mcp` extra). Real-transport helpers (a server in a
  subprocess, hand-built requests) are in `maitre.mcp.testing`.

```python
model = TestModel()
agent = Agent(model, box)
with capture_calls(agent) as calls:
    run = await agent.run("exercise every tool", Principal(user="ann"))
assert {c.tool for c in calls} == set(box.names()) | {"write_notes", "read_notes"}
assert not [c for c in calls if c.error_code == "INVALID_ARGUMENTS"]
```
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .audit import AuditEntry
from .exceptions import UserError
from .gate import CallContext, Gate
from .gate.record import AuditRecorder
from .gate.validate import validate_arguments
from .models.base import ModelRequest, ModelResponse, Usage
from .models.scripted import Rule, ScriptedModel, call
from .stores import MemoryStores
from .stores.memory import MemoryAuditStore
from .tokens import count_tokens
from .tools import Tool, Toolbox
from .tools.examples import MISSING, example_value
from .types import Principal, ToolCall, ToolResult

if TYPE_CHECKING:
    from mcp import Client

    from .mcp.app import MCPApp
    from .mcp.server import GovernedServer

__all__ = [
    "CapturedCall",
    "MemoryStores",
    "Rule",
    "ScriptedModel",
    "TestModel",
    "call",
    "capture_calls",
    "example_arguments",
    "mcp_client",
]

_MAX_SUMMARY_CHARS = 2000


def example_arguments(
    tool: Tool, *, optional: bool = False, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """Arguments the gate accepts for `tool`, generated from its input schema, or None.

    Required properties only, unless `optional=True` (then every property the generator can fill).
    `overrides` replaces generated values. The result is checked with the gate's own validation
    (`maitre.gate.validate.validate_arguments`: strict JSON mode, patterns, closed objects); None
    means no valid arguments could be generated, never that invalid ones are returned.
    """
    schema = tool.input_schema
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    given = dict(overrides or {})
    arguments: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if name in given:
            arguments[name] = given.pop(name)
            continue
        if name not in required and not optional:
            continue
        value = example_value(prop, defs)
        if value is MISSING:
            if name in required:
                return None
            continue
        arguments[name] = value
    arguments.update(given)
    _, error = validate_arguments(tool, arguments)
    return None if error is not None else arguments


def _input_tokens(request: ModelRequest) -> int:
    """What a real model would read: system, conversation and tool definitions (offline tokenizer)."""
    from .agent.context_manager import conversation_tokens

    definitions = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
    ]
    return (
        count_tokens(request.system or "")
        + conversation_tokens(request.messages)
        + sum(count_tokens(d) for d in definitions)
    )


def _output_tokens(text: str, calls: Sequence[ToolCall]) -> int:
    return count_tokens(text) + sum(
        count_tokens(c.name) + count_tokens(json.dumps(c.arguments, default=str)) for c in calls
    )


def _matches(tool_name: str, wanted: str) -> bool:
    return tool_name == wanted or tool_name.endswith("." + wanted)


class TestModel:
    """A `Model` that calls every offered tool once with valid generated arguments, then answers.

    On a request whose last message is the user's (the first turn of a task), it calls each tool
    offered in that request - all in one turn, so the agent runs them concurrently - with arguments
    from `example_arguments`. On any later request (tool results came back, or a paused run was
    resumed) it answers: `final_text` if given, else a JSON object
    `{"results": {tool: {"ok": ..., "content": ..., "error_code": ...}}, "skipped": {tool: why}}`.
    Usage is measured with the offline tokenizer over what a real model would read and write,
    as `ScriptedModel` does.

    Args:
        call_tools: "all" (default) or the names of the tools to call; a name matches a tool's full
            name or its last dotted part (`get_order` matches `shop.get_order`). Named tools that
            are not offered in a turn are not called.
        final_text: the answer after the tools returned (default: the JSON summary).
        arguments: explicit arguments for some tools, by name (merged over the generated ones),
            for schemas the generator cannot fill.
        optional: fill optional properties too, not only the required ones.

    A tool for which no valid arguments can be generated is not called; it is listed in
    `skipped` (and in the summary), so a test can assert there is none.
    """

    __test__ = False  # not a pytest test class, despite the name

    name = "test"

    otel_provider = "maitre.test"
    """`gen_ai.provider.name` on this model's chat spans."""

    def __init__(
        self,
        *,
        call_tools: Literal["all"] | Sequence[str] = "all",
        final_text: str | None = None,
        arguments: Mapping[str, Mapping[str, Any]] | None = None,
        optional: bool = False,
    ) -> None:
        if isinstance(call_tools, str) and call_tools != "all":
            raise UserError('TestModel(call_tools=...) takes "all" or a list of tool names')
        self.call_tools = call_tools
        self.final_text = final_text
        self.arguments = {k: dict(v) for k, v in (arguments or {}).items()}
        self.optional = optional
        self.requests: list[ModelRequest] = []
        """Every request received (tool definitions offered, messages), for tests to inspect."""
        self.calls: list[ToolCall] = []
        """Every tool call this model proposed, in order."""
        self.skipped: dict[str, str] = {}
        """Tools offered but not called, with why (no valid arguments could be generated)."""
        self._ids = itertools.count(1)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        from .agent.messages import UserMessage

        self.requests.append(request)
        calls: list[ToolCall] = []
        if request.messages and isinstance(request.messages[-1], UserMessage):
            calls = self._calls_for(request.tools)
        text = "" if calls else self._answer(request)
        self.calls.extend(calls)
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=Usage(input_tokens=_input_tokens(request), output_tokens=_output_tokens(text, calls)),
            stop_reason="tool_use" if calls else "end_turn",
            model=self.name,
        )

    def _wanted(self, tool: Tool) -> bool:
        if self.call_tools == "all":
            return True
        return any(_matches(tool.name, name) for name in self.call_tools)

    def _overrides(self, tool: Tool) -> dict[str, Any]:
        for name, given in self.arguments.items():
            if _matches(tool.name, name):
                return given
        return {}

    def _calls_for(self, tools: Sequence[Tool]) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for tool in tools:
            if not self._wanted(tool):
                continue
            arguments = example_arguments(tool, optional=self.optional, overrides=self._overrides(tool))
            if arguments is None:
                self.skipped[tool.name] = (
                    "no valid arguments could be generated from its schema; "
                    f"pass TestModel(arguments={{{tool.name!r}: {{...}}}})"
                )
                continue
            calls.append(ToolCall(id=f"test_call_{next(self._ids)}", name=tool.name, arguments=arguments))
        return calls

    def _answer(self, request: ModelRequest) -> str:
        if self.final_text is not None:
            return self.final_text
        from .agent.messages import AssistantMessage, ToolResultMessage

        names = {
            c.id: c.name for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        results: dict[str, dict[str, Any]] = {}
        for message in request.messages:
            if isinstance(message, ToolResultMessage) and message.call_id in names:
                results[names[message.call_id]] = {
                    "ok": not message.is_error,
                    "content": message.content[:_MAX_SUMMARY_CHARS],
                    "error_code": message.error_code,
                }
        return json.dumps({"results": results, "skipped": self.skipped}, ensure_ascii=False)


# -- capture ------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class CapturedCall:
    """One call a gate handled while `capture_calls` was active."""

    call: ToolCall
    """The call as the gate received it (ids made sendable)."""
    principal: Principal
    """Who asked."""
    tool: str | None
    """The canonical name of the tool it resolved to; None for an unknown tool."""
    decision: str
    """What governance decided, as the audit log records it (`allow`, `approval_required`, `error` ...)."""
    result: ToolResult
    """What the door got back."""
    entry: AuditEntry
    """The audit entry the gate's recorder builds for this call, sealed into the capture's own
    in-memory hash chain (recorded whether or not the gate itself audits)."""
    context: CallContext = field(repr=False)
    """The gate's per-call record, for checks the fields above do not cover."""

    @property
    def error_code(self) -> str | None:
        """The result's error code, or None for a success."""
        return str(self.result.error.code) if self.result.error is not None else None

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The validated arguments as JSON data (the parsed ones when validation refused them)."""
        ctx = self.context
        return ctx.validated_json if ctx.validated_json is not None else ctx.arguments


class _Chain(MemoryAuditStore):
    """The capture's own audit chain; remembers the entry it sealed last (no await in between)."""

    sealed: AuditEntry | None = None

    async def append(self, entry: AuditEntry) -> AuditEntry:
        self.sealed = await super().append(entry)
        return self.sealed


def _gate_of(target: Any) -> Gate:
    if isinstance(target, Gate):
        return target
    gate = getattr(target, "gate", None)
    if isinstance(gate, Gate):
        return gate
    raise UserError(f"capture_calls needs a Gate or an object with a .gate (Agent, MCPApp), not {target!r}")


@contextlib.contextmanager
def capture_calls(
    target: Any, *, arguments: Literal["digest", "redacted"] | None = None
) -> Iterator[list[CapturedCall]]:
    """Collect every call made through a gate while the block runs (like structlog's `capture_logs`).

    `target` is a `Gate` or anything holding one as `.gate` (an `Agent`, an `MCPApp`, a
    `GovernedServer`). A recorder is appended to the gate's `recorders` and removed on exit; each
    call - refused or executed - adds one `CapturedCall`. `arguments` chooses how the captured audit
    entries show arguments (default: as the gate's own audit recorder does, else digests).
    """
    gate = _gate_of(target)
    if arguments is None:
        own = next((r for r in gate.recorders if isinstance(r, AuditRecorder)), None)
        arguments = own.arguments if own is not None else "digest"
    chain = _Chain()
    audit = AuditRecorder(chain, arguments=arguments)
    captured: list[CapturedCall] = []

    async def recorder(ctx: CallContext, result: ToolResult) -> None:
        await audit(ctx, result)
        entry = chain.sealed
        assert entry is not None
        captured.append(
            CapturedCall(
                call=ctx.call,
                principal=ctx.principal,
                tool=ctx.tool.name if ctx.tool is not None else None,
                decision=entry.decision,
                result=result,
                entry=entry,
                context=ctx,
            )
        )

    gate.recorders.append(recorder)
    try:
        yield captured
    finally:
        gate.recorders.remove(recorder)


# -- MCP ----------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def mcp_client(
    target: MCPApp | GovernedServer | Toolbox,
    *,
    principal: Principal | None = None,
    mode: str | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """An SDK `mcp.Client` connected in memory to a `GovernedServer` (no socket, no subprocess).

    `target` is an `MCPApp`, a `Toolbox` (served as `MCPApp(toolbox)` with a default gate), or a
    `GovernedServer` you built. `principal` is who the unauthenticated in-memory client is (default:
    the server's, `local@local`). `mode` is the client's protocol mode (default: the 2026-07-28
    revision, `maitre.mcp.testing.MODERN`; `"legacy"` for 2025-11-25 sessions); other keywords
    go to `mcp.Client` (for example `elicitation_callback=`).

    ```python
    async with mcp_client(MCPApp(box, name="shop")) as client:
        result = await client.call_tool("get_order", {"order_id": "A1042"})
    ```
    """
    try:
        from mcp import Client

        from .mcp.app import MCPApp
        from .mcp.server import GovernedServer, ServerOptions
        from .mcp.testing import MODERN
    except ModuleNotFoundError as exc:  # pragma: no cover - the mcp extra is installed in CI
        raise ImportError("maitre.testing.mcp_client needs the mcp extra: pip install 'maitre[mcp]'") from exc

    if isinstance(target, Toolbox):
        target = MCPApp(target)
    if isinstance(target, MCPApp):
        server = GovernedServer(target, ServerOptions(principal=principal) if principal is not None else None)
    elif isinstance(target, GovernedServer):
        if principal is not None:
            raise UserError(
                "mcp_client: a GovernedServer has its principal already (ServerOptions.principal)"
            )
        server = target
    else:
        raise UserError(f"mcp_client needs an MCPApp, a GovernedServer or a Toolbox, not {target!r}")
    async with Client(server.lowlevel, mode=mode or MODERN, **client_options) as client:
        yield client
