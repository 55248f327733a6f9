"""`MCPApp`: what a maitre MCP server serves - a toolbox, plus resources and prompts.

Tools come from the `Toolbox` (and run through the gate); resources and prompts are not tools, so
they are registered here, with decorators that are thin sugar over `add_resource` / `add_prompt`
and return the function unchanged:

```python
app = MCPApp(box, name="support")

@app.resource("support://policy", description="The support policy", mime_type="text/markdown")
def policy() -> str: ...

@app.resource("tickets://{ticket_id}/summary")          # a template: variables = parameters
def ticket_summary(ticket_id: str) -> str: ...

@app.prompt(description="Triage one ticket")
def triage(ticket_id: str) -> str: ...                  # str → one user message
```

Listing order is registration order, so `*/list` answers are stable (2026-07-28 asks for a
deterministic order). Resource readers and prompt renderers may be sync or async; they receive
only their URI variables or arguments. (When `Toolbox` grows resources and prompts, this is the
part that should move there; the server would then read them from the toolbox.)

Beside its own registrations an app may serve **sources** (`add_source`): resources and prompts that
live elsewhere, such as the gateway's upstream servers (`maitre.mcp.federation`). A source owns its
names (prompt names, resource URIs) by a rule of its own; the app's registrations are looked up
first, then each source in the order added. A source tells the server when its lists changed
(`on_change`), and the server tells its clients. `health`, when set, is what `GET /healthz` answers
(`maitre.mcp.transports`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio.to_thread
import mcp_types as types
from mcp.shared.uri_template import UriTemplate

from ..exceptions import UserError
from ..gate import Gate
from ..tools import Toolbox

__all__ = ["ContentSource", "ListKind", "MCPApp", "PromptSpec", "ResourceSpec", "call_maybe_async"]

ListKind = Literal["tools", "resources", "prompts"]
"""Which list changed (the three `*/list_changed` notifications)."""


class ContentSource(Protocol):
    """Resources and prompts an app serves from elsewhere (the gateway's upstreams).

    `read_resource`, `get_prompt` and `complete` return None for a URI or name the source does not
    own (the next source, or "not found", answers); for one it owns but cannot serve, they raise
    `MCPError`. Lists leave out what cannot be listed now (an upstream that is down or slow).
    """

    async def list_resources(self) -> list[types.Resource]: ...

    async def list_templates(self) -> list[types.ResourceTemplate]: ...

    async def read_resource(self, uri: str) -> types.ReadResourceResult | None: ...

    async def list_prompts(self) -> list[types.Prompt]: ...

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult | None: ...

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult | None: ...

    def on_change(self, listener: Callable[[frozenset[ListKind]], None]) -> None:
        """Call `listener` (synchronously, on the event loop) with the lists that changed."""
        ...


@dataclass(kw_only=True)
class ResourceSpec:
    """A resource (fixed URI) or a resource template (URI with `{variables}`)."""

    uri: str
    """The URI, or the RFC 6570 template."""
    name: str
    description: str
    mime_type: str = "text/plain"
    fn: Callable[..., Any]
    """Returns `str` (text) or `bytes` (binary); a template's function takes its variables."""
    template: UriTemplate | None = None
    """Set for templates."""
    title: str | None = None


@dataclass(kw_only=True)
class PromptSpec:
    """A prompt: a function of string arguments that returns messages."""

    name: str
    description: str
    fn: Callable[..., Any]
    """Returns `str`, a content block, a `PromptMessage`, a dict, or a list of those."""
    arguments: list[types.PromptArgument] = field(default_factory=list)
    title: str | None = None


async def call_maybe_async(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    """Await an async function, or run a sync one in a worker thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    result = await anyio.to_thread.run_sync(lambda: fn(**kwargs))
    if inspect.isawaitable(result):
        return await result
    return result


class MCPApp:
    """A toolbox served over MCP through its gate, with resources and prompts.

    Args:
        toolbox: the tools (every call goes through `gate`).
        name: the server name clients see (and the audience of sealed request state).
        version: the server version.
        instructions: what the server tells clients about itself.
        gate: the gate to call through; default `Gate(toolbox)`.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        *,
        name: str = "maitre",
        version: str = "",
        instructions: str | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.toolbox = toolbox
        self.name = name
        self.version = version
        self.instructions = instructions
        self.gate = gate if gate is not None else Gate(toolbox)
        if self.gate.toolbox is not toolbox:
            raise UserError("MCPApp: the gate must govern the same toolbox that is served")
        self.resources: dict[str, ResourceSpec] = {}
        self.templates: dict[str, ResourceSpec] = {}
        self.prompts: dict[str, PromptSpec] = {}
        self.completions: dict[tuple[str, str], Callable[[str], list[str]]] = {}
        self.sources: list[ContentSource] = []
        """Resources and prompts served from elsewhere (`add_source`), after the app's own."""
        self.health: Callable[[], Mapping[str, Any]] | None = None
        """When set, `GET /healthz` answers its value as JSON (no authentication, so it must not
        carry secrets); HTTP 503 when its `status` is "down", else 200."""

    def add_source(self, source: ContentSource) -> None:
        """Serve `source`'s resources and prompts beside the app's own."""
        self.sources.append(source)

    # -- resources ----------------------------------------------------------------------------------

    def add_resource(
        self,
        uri: str,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str = "text/plain",
        title: str | None = None,
    ) -> ResourceSpec:
        """Register a resource or, when `uri` has `{variables}`, a resource template."""
        template = UriTemplate.parse(uri)
        variables = set(template.variable_names)
        params = {p for p in inspect.signature(fn).parameters}
        if variables != params:
            raise UserError(
                f"resource {uri!r}: URI variables {sorted(variables)} must match parameters {sorted(params)}"
            )
        spec = ResourceSpec(
            uri=uri,
            name=name or fn.__name__,
            description=description
            if description is not None
            else (inspect.getdoc(fn) or "").split("\n\n")[0],
            mime_type=mime_type,
            fn=fn,
            template=template if variables else None,
            title=title,
        )
        registry = self.templates if variables else self.resources
        if uri in registry:
            raise UserError(f"a resource {uri!r} is already registered")
        registry[uri] = spec
        return spec

    def resource(self, uri: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of `add_resource`."""
        if callable(uri):
            raise UserError('use @app.resource("uri://..."), with the URI')

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_resource(uri, fn, **options)
            return fn

        return decorator

    def find_resource(self, uri: str) -> tuple[ResourceSpec, dict[str, Any]] | None:
        """The resource serving `uri` and the template variables it matched."""
        spec = self.resources.get(uri)
        if spec is not None:
            return spec, {}
        for spec in self.templates.values():
            assert spec.template is not None
            matched = spec.template.match(uri)
            if matched is not None:
                return spec, dict(matched)
        return None

    # -- prompts ------------------------------------------------------------------------------------

    def add_prompt(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
    ) -> PromptSpec:
        """Register a prompt; its parameters become the prompt's (string) arguments."""
        arguments = []
        for param in inspect.signature(fn).parameters.values():
            arguments.append(
                types.PromptArgument(name=param.name, required=param.default is inspect.Parameter.empty)
            )
        spec = PromptSpec(
            name=name or fn.__name__,
            description=description
            if description is not None
            else (inspect.getdoc(fn) or "").split("\n\n")[0],
            fn=fn,
            arguments=arguments,
            title=title,
        )
        if spec.name in self.prompts:
            raise UserError(f"a prompt {spec.name!r} is already registered")
        self.prompts[spec.name] = spec
        return spec

    def prompt(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Decorator form of `add_prompt`: `@app.prompt` or `@app.prompt(name=..., description=...)`."""
        if fn is not None:
            self.add_prompt(fn)
            return fn

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            self.add_prompt(func, **options)
            return func

        return decorator

    def completion(self, ref_name: str, argument: str, fn: Callable[[str], list[str]]) -> None:
        """Completions for one argument of a prompt (or one variable of a template)."""
        self.completions[(ref_name, argument)] = fn
