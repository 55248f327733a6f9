"""The conformance fixture: the tools, resources and prompts the MCP conformance scenarios call,
served by maitre - every tool call goes through the gate like any other.

Serve it with `python -m maitre.mcp serve tests/mcp/conformance/fixture.py:app --transport http`.
Tools that need more than text (images, progress, logs, client input) use `current_call()`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from maitre import Toolbox, ToolError
from maitre.mcp.app import MCPApp
from maitre.mcp.context import McpCallContext, current_call
from maitre.mcp.server import TASK_REQUIRED_TAG, GovernedServer

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=")

box = Toolbox()


def _ctx() -> McpCallContext:
    ctx = current_call()
    if ctx is None:
        raise ToolError("INVALID_STATE", "this tool only works over MCP")
    return ctx


def _image() -> types.ImageContent:
    return types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")


@box.tool
def test_simple_text() -> str:
    """Returns simple text."""
    return "This is a simple text response for testing."


@box.tool
def test_image_content() -> str:
    """Returns a 1x1 PNG image."""
    _ctx().set_content([_image()])
    return "image/png, 1x1"


@box.tool
def test_audio_content() -> str:
    """Returns a tiny WAV file."""
    audio = types.AudioContent(type="audio", data=base64.b64encode(WAV).decode(), mime_type="audio/wav")
    _ctx().set_content([audio])
    return "audio/wav"


@box.tool
def test_embedded_resource() -> str:
    """Returns an embedded text resource."""
    resource = types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    _ctx().set_content([types.EmbeddedResource(type="resource", resource=resource)])
    return "This is an embedded resource content."


@box.tool
def test_multiple_content_types() -> str:
    """Returns text, an image and an embedded resource."""
    resource = types.TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    _ctx().set_content(
        [
            types.TextContent(type="text", text="Multiple content types test:"),
            _image(),
            types.EmbeddedResource(type="resource", resource=resource),
        ]
    )
    return "Multiple content types test"


@box.tool
async def test_tool_with_logging() -> str:
    """Sends three log messages while it runs."""
    ctx = _ctx()
    await ctx.log("info", "Tool execution started")
    await anyio.sleep(0.05)
    await ctx.log("info", "Tool processing data")
    await anyio.sleep(0.05)
    await ctx.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


@box.tool
def test_error_handling() -> str:
    """Always fails."""
    raise ToolError("INVALID_STATE", "This tool intentionally returns an error for testing")


@box.tool
async def test_tool_with_progress() -> str:
    """Reports progress 0, 50, 100 of 100."""
    ctx = _ctx()
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        if step < 100:
            await anyio.sleep(0.05)
    return "Tool with progress executed successfully"


@box.tool
async def test_sampling(prompt: str) -> str:
    """Asks the client's model."""
    ctx = _ctx()
    if not ctx.supports("sampling") or not ctx.can_ask:
        raise ToolError("INVALID_STATE", "the client does not support sampling")
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    result = await ctx.sample([message], max_tokens=100)
    text = getattr(result.content, "text", str(result.content))
    return f"LLM response: {text}"


async def _elicit(message: str, schema: dict[str, Any]) -> str:
    ctx = _ctx()
    if not ctx.supports("elicitation") or not ctx.can_ask:
        raise ToolError("INVALID_STATE", "the client does not support elicitation")
    result = await ctx.elicit(message, schema)
    return f"action={result.action}, content={json.dumps(result.content)}"


@box.tool
async def test_elicitation(message: str) -> str:
    """Asks the user for a username and an email."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return "User response: " + await _elicit(message, schema)


@box.tool
async def test_elicitation_sep1034_defaults() -> str:
    """Elicitation with defaults for every primitive type."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    return "Elicitation completed: " + await _elicit("Please review your information", schema)


@box.tool
async def test_elicitation_sep1330_enums() -> str:
    """Elicitation with the five enum shapes."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    return "Elicitation completed: " + await _elicit("Please select options", schema)


@box.tool
def test_missing_capability() -> str:
    """Needs the client's sampling capability (2026-07-28 per-request capabilities)."""
    ctx = _ctx()
    if not ctx.supports("sampling"):
        ctx.reject(
            MCPError(
                code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="Missing required client capability: sampling",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        )
        return "rejected"
    return "sampling declared"


# -- 2026-07-28 multi-round-trip (input_required) tools -------------------------------------------


def _elicit_request(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]},
        },
    }


def _sampling_request(text: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        },
    }


_ROOTS = {"method": "roots/list", "params": {}}


def _answer(ctx: McpCallContext, key: str) -> dict[str, Any] | None:
    value = ctx.input_responses.get(key)
    if value is None:
        return None
    return value.model_dump(by_alias=True, mode="json") if hasattr(value, "model_dump") else dict(value)


def _text_of(answer: dict[str, Any]) -> str:
    content = answer.get("content")
    if isinstance(content, dict):
        return str(content.get("text") or next(iter(content.values()), ""))
    return str(content)


@box.tool
def test_input_required_result_elicitation() -> Any:
    """Asks for the user's name over input_required."""
    ctx = _ctx()
    answer = _answer(ctx, "user_name")
    if answer is None or not isinstance(answer.get("content"), dict):
        return ctx.input_required({"user_name": _elicit_request("What is your name?", "name")})
    return f"Hello, {answer['content'].get('name', 'stranger')}!"


@box.tool
def test_input_required_result_sampling() -> Any:
    """Asks the client's model a question over input_required."""
    ctx = _ctx()
    answer = _answer(ctx, "capital_question")
    if answer is None:
        return ctx.input_required(
            {"capital_question": _sampling_request("What is the capital of France?", 100)}
        )
    return f"The model said: {_text_of(answer)}"


@box.tool
def test_input_required_result_list_roots() -> Any:
    """Asks for the client's roots over input_required."""
    ctx = _ctx()
    answer = _answer(ctx, "client_roots")
    if answer is None:
        return ctx.input_required({"client_roots": _ROOTS})
    roots = [r.get("uri") for r in answer.get("roots", [])]
    return f"Client roots: {', '.join(map(str, roots))}"


@box.tool
def test_input_required_result_request_state() -> Any:
    """Round-trips request state."""
    ctx = _ctx()
    if _answer(ctx, "confirm") is None or ctx.request_state != "round-1":
        return ctx.input_required(
            {"confirm": _elicit_request("Please confirm", "ok", "boolean")}, state="round-1"
        )
    return "state-ok: the request state came back intact"


@box.tool
def test_input_required_result_multiple_inputs() -> Any:
    """Asks for three inputs at once."""
    ctx = _ctx()
    keys = ("user_name", "greeting", "client_roots")
    if any(_answer(ctx, k) is None for k in keys) or ctx.request_state != "multi":
        requests = {
            "user_name": _elicit_request("What is your name?", "name"),
            "greeting": _sampling_request("Generate a greeting", 50),
            "client_roots": _ROOTS,
        }
        return ctx.input_required(requests, state="multi")
    return "All three inputs received"


@box.tool
def test_input_required_result_multi_round() -> Any:
    """Two rounds of questions, then an answer."""
    ctx = _ctx()
    if ctx.request_state == "round-2" and _answer(ctx, "step2") is not None:
        color = (_answer(ctx, "step2") or {}).get("content", {}).get("color")
        return f"Done: favourite colour {color}"
    if ctx.request_state == "round-1" and _answer(ctx, "step1") is not None:
        return ctx.input_required(
            {"step2": _elicit_request("Step 2: What is your favorite color?", "color")}, state="round-2"
        )
    return ctx.input_required(
        {"step1": _elicit_request("Step 1: What is your name?", "name")}, state="round-1"
    )


@box.tool
def test_input_required_result_tampered_state() -> Any:
    """Integrity-protected state (the server's sealing refuses a tampered one)."""
    ctx = _ctx()
    if ctx.request_state != "untampered" or _answer(ctx, "confirm") is None:
        return ctx.input_required(
            {"confirm": _elicit_request("Please confirm", "ok", "boolean")}, state="untampered"
        )
    return "state verified"


@box.tool
def test_input_required_result_capabilities() -> Any:
    """Only asks for what the client declared."""
    ctx = _ctx()
    wanted = {
        "elicitation": ("user_name", _elicit_request("What is your name?", "name")),
        "sampling": ("greeting", _sampling_request("Generate a greeting", 50)),
        "roots": ("client_roots", _ROOTS),
    }
    requests = {
        key: req for cap, (key, req) in wanted.items() if ctx.supports(cap) and _answer(ctx, key) is None
    }
    if requests:
        return ctx.input_required(requests, state="caps")
    return "capabilities respected"


# -- Tasks extension fixtures ----------------------------------------------------------------------


@box.tool
def greet(name: str) -> str:
    """Greets someone."""
    return f"Hello, {name}!"


@box.tool(long_running=True, timeout=120)
async def slow_compute(seconds: float = 0, label: str = "") -> str:
    """Sleeps `seconds`, then answers (served as a task)."""
    await anyio.sleep(seconds)
    return f"computed {label} after {seconds}s"


@box.tool(long_running=True, tags=(TASK_REQUIRED_TAG,))
async def failing_job() -> str:
    """Fails after a moment (served as a task only)."""
    await anyio.sleep(1)
    raise ToolError("INVALID_STATE", "the job failed")


@box.tool(long_running=True)
def protocol_error_job() -> str:
    """Ends in a JSON-RPC error (served as a task)."""
    return _ctx().reject(MCPError(code=-32603, message="the job hit a protocol error"))


@box.tool
async def test_trigger_tool_change() -> str:
    """Adds (or removes) a tool, so list-changed notifications fire."""
    if "temporary_tool" in box:
        box.remove("temporary_tool")
        return "removed temporary_tool"
    box.add_tool(_temporary_tool)
    return "added temporary_tool"


@box.tool
async def test_trigger_prompt_change() -> str:
    """Announces a prompt list change."""
    await server.notify_lists_changed()
    return "prompts changed"


def _temporary_tool() -> str:
    """A tool that comes and goes."""
    return "here"


app = MCPApp(box, name="maitre-conformance-fixture", version="0.1.0")
server = GovernedServer(app)


@app.resource("test://static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@app.resource("test://static-binary", description="A static binary resource", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@app.resource("test://watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched() -> str:
    return "watched"


@app.resource("test://template/{id}/data", description="Data by id", mime_type="application/json")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@app.prompt(description="A simple prompt")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@app.prompt(description="A prompt with arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt(description="A prompt with an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    resource = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


@app.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
        },
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


@app.prompt(description="A prompt that needs input first")
def test_input_required_result_prompt() -> Any:
    ctx = _ctx()
    answer = _answer(ctx, "user_context")
    if answer is None:
        return ctx.input_required(
            {"user_context": _elicit_request("What context should the prompt use?", "context")}
        )
    return f"Use this context: {answer.get('content', {}).get('context')}"


app.completion("test_prompt_with_arguments", "arg1", lambda value: ["paris", "park", "party"])
