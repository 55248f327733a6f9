"""What an `MCPApp` serves beside its tools: resources, resource templates, prompts, completions.

These are not tools, so they do not go through the gate: a resource reader or a prompt renderer
receives only its URI variables or its arguments, runs with the request's `McpCallContext` set (so
it may ask the client for input over the 2026-07-28 flow, like a tool), and its value becomes the
wire result here. Lists come out in registration order and carry the server's `ttlMs` hint.

The app's sources (`MCPApp.add_source`, the gateway's upstreams) come after its own registrations:
listed after them, and asked for a URI or a prompt name the app does not serve itself.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..jsonutil import compact_json
from .app import MCPApp, call_maybe_async
from .context import _enter, _leave
from .wire import call_context, input_required_result

__all__ = ["ResourceHandlers", "prompt_messages"]

logger = logging.getLogger("maitre.mcp.server")


class ResourceHandlers:
    """The SDK handlers for an app's resources, templates, prompts, completions and subscriptions."""

    def __init__(self, app: MCPApp, *, list_ttl_ms: int) -> None:
        self.app = app
        """Whose resources, prompts and completions are served."""
        self.list_ttl_ms = list_ttl_ms
        """`ttlMs` on list and read results (2026-07-28 caching hints); 0 = always revalidate."""
        self.subscribed: set[str] = set()
        """URIs some client subscribed to."""

    # -- resources ---------------------------------------------------------------------------------

    async def list_resources(self, ctx: Any, _params: Any) -> types.ListResourcesResult:
        """`resources/list`."""
        resources = [
            types.Resource(
                uri=s.uri, name=s.name, title=s.title, description=s.description, mime_type=s.mime_type
            )
            for s in self.app.resources.values()
        ]
        for source in self.app.sources:
            resources += await source.list_resources()
        return types.ListResourcesResult(resources=resources, ttl_ms=self.list_ttl_ms)

    async def list_templates(self, ctx: Any, _params: Any) -> types.ListResourceTemplatesResult:
        """`resources/templates/list`."""
        templates = [
            types.ResourceTemplate(
                uri_template=s.uri,
                name=s.name,
                title=s.title,
                description=s.description,
                mime_type=s.mime_type,
            )
            for s in self.app.templates.values()
        ]
        for source in self.app.sources:
            templates += await source.list_templates()
        return types.ListResourceTemplatesResult(resource_templates=templates, ttl_ms=self.list_ttl_ms)

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> Any:
        """`resources/read`: text, JSON (compact) or a base64 blob; or an `input_required` result."""
        uri = str(params.uri)
        found = self.app.find_resource(uri)
        if found is None:
            for source in self.app.sources:
                read = await source.read_resource(uri)
                if read is not None:
                    return read
            raise MCPError(code=INVALID_PARAMS, message="Resource not found", data={"uri": uri})
        spec, variables = found
        call_ctx = call_context(ctx, params)
        token = _enter(call_ctx)
        try:
            value = await call_maybe_async(spec.fn, **variables)
        except MCPError:
            raise
        except Exception as exc:
            logger.exception("resource %s failed", uri)
            raise MCPError(code=-32603, message="Error reading resource", data={"uri": uri}) from exc
        finally:
            _leave(token)
        if call_ctx.pending_input:
            return input_required_result(call_ctx.pending_input, {"tool": call_ctx.pending_state})
        if isinstance(value, bytes):
            contents: list[Any] = [
                types.BlobResourceContents(
                    uri=uri, blob=base64.b64encode(value).decode(), mime_type=spec.mime_type
                )
            ]
        else:
            text = value if isinstance(value, str) else compact_json(value)
            contents = [types.TextResourceContents(uri=uri, text=text, mime_type=spec.mime_type)]
        return types.ReadResourceResult(contents=contents, ttl_ms=self.list_ttl_ms)

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """`resources/subscribe`."""
        self.subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        """`resources/unsubscribe`."""
        self.subscribed.discard(str(params.uri))
        return types.EmptyResult()

    # -- prompts and completions -----------------------------------------------------------------

    async def list_prompts(self, ctx: Any, _params: Any) -> types.ListPromptsResult:
        """`prompts/list`."""
        prompts = [
            types.Prompt(name=s.name, title=s.title, description=s.description, arguments=s.arguments or None)
            for s in self.app.prompts.values()
        ]
        for source in self.app.sources:
            prompts += await source.list_prompts()
        return types.ListPromptsResult(prompts=prompts, ttl_ms=self.list_ttl_ms)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> Any:
        """`prompts/get`: the rendered messages, after checking the arguments by name."""
        spec = self.app.prompts.get(params.name)
        if spec is None:
            for source in self.app.sources:
                got = await source.get_prompt(params.name, dict(params.arguments or {}))
                if got is not None:
                    return got
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
        arguments = dict(params.arguments or {})
        missing = [a.name for a in spec.arguments if a.required and a.name not in arguments]
        unknown = sorted(set(arguments) - {a.name for a in spec.arguments})
        if missing or unknown:
            raise MCPError(
                code=INVALID_PARAMS, message=f"Prompt {params.name}: missing {missing}, unknown {unknown}"
            )
        call_ctx = call_context(ctx, params)
        token = _enter(call_ctx)
        try:
            value = await call_maybe_async(spec.fn, **arguments)
        finally:
            _leave(token)
        if call_ctx.pending_input:
            return input_required_result(call_ctx.pending_input, {"tool": call_ctx.pending_state})
        return types.GetPromptResult(description=spec.description, messages=prompt_messages(value))

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        """`completion/complete`: the registered completer's values that extend what was typed."""
        ref = params.ref
        key = getattr(ref, "name", None) or getattr(ref, "uri", None) or ""
        fn = self.app.completions.get((str(key), params.argument.name))
        if fn is None:
            for source in self.app.sources:
                completed = await source.complete(params)
                if completed is not None:
                    return completed
        values = [v for v in (fn(params.argument.value) if fn else []) if v.startswith(params.argument.value)]
        return types.CompleteResult(
            completion=types.Completion(values=values[:100], total=len(values), has_more=len(values) > 100)
        )


def prompt_messages(value: Any) -> list[types.PromptMessage]:
    """A prompt function's return value (str, content block, message, dict or a list) as messages."""
    items = value if isinstance(value, list) else [value]
    messages = []
    for item in items:
        if isinstance(item, types.PromptMessage):
            messages.append(item)
        elif isinstance(item, str):
            messages.append(
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=item))
            )
        elif isinstance(item, dict) and "role" in item:
            messages.append(types.PromptMessage.model_validate(item))
        else:
            messages.append(types.PromptMessage(role="user", content=item))
    return messages
