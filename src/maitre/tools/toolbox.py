"""`Toolbox`: a named set of tools, composable, exportable to every provider's format.

```python
box = Toolbox("orders")

@box.tool(effect="read")
def get_order(order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")]) -> dict:
    '''Look up one order by its id. Use it for status or delivery questions.
    Do not use it to search by customer name.'''
```

The decorator is thin sugar over `add_tool()` and returns the function unchanged. A namespace gives
canonical names like `orders.get_order`; `Toolbox()` keeps bare names. `include(other)` composes
toolboxes, and later changes to an included toolbox reach the includer's subscribers (tool search
keeps its index current that way).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, overload

from ..exceptions import DuplicateToolError, ToolDefinitionError, UserError
from .export import ExportFormat, ToolDefinitions, export_definitions, provider_name
from .tool import Tool

__all__ = ["Listener", "Toolbox"]

Listener = Callable[[Literal["added", "removed"], Tool], None]
"""Called with ("added" | "removed", tool) for every change after subscription."""

_NAMESPACE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*(\.[A-Za-z][A-Za-z0-9_\-]*)*$")


class Toolbox:
    """A set of tools with unique canonical names."""

    def __init__(self, namespace: str | None = None, *, tools: list[Tool] | None = None) -> None:
        if namespace is not None and not _NAMESPACE.match(namespace):
            raise UserError(
                f"namespace {namespace!r} must be letters, digits, _ or -, starting with a letter"
            )
        self.namespace = namespace
        self._tools: dict[str, Tool] = {}
        self._aliases: dict[str, str] = {}
        self._listeners: list[Listener] = []
        self._included: list[Toolbox] = []
        for tool in tools or ():
            self.add(tool)

    # -- registration ---------------------------------------------------------------------------

    @overload
    def tool(self, fn: Callable[..., Any], /) -> Callable[..., Any]: ...

    @overload
    def tool(
        self, fn: None = None, /, **options: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register a function as a tool; usable as `@box.tool` or `@box.tool(effect="write", ...)`.

        Options: name, description, output, effect ("read" | "write" | "destructive"), risk ("low" |
        "medium" | "high" | "critical"), timeout (s), retries, transient (exception types),
        max_result_tokens, max_result_bytes, max_concurrency (sync tools), trust ("trusted" |
        "untrusted"), tags, scopes, open_world, egress (a read that sends its arguments out: gated
        like an open-world write after untrusted content), idempotent, business_key, reconcile
        (`reconcile(key) -> result | None`, for an in-doubt write), owner, requires_approval,
        long_running, personal (arguments and result are the calling user's personal data: the
        gate's stores keep them only sealed under that user's key, see `Tool.personal`),
        compensate (what undoes it in a saga, run by the runtime only: `Tool.compensate`).
        """
        if fn is not None:
            if options:
                raise UserError("use @box.tool or @box.tool(...), not both")
            self.add_tool(fn)
            return fn

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            if not callable(func):
                raise UserError(
                    "The @tool decorator was used incorrectly: @box.tool(...) takes keyword options only"
                )
            self.add_tool(func, **options)
            return func

        return decorator

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> Tool:
        """Register a function as a tool and return the `Tool`.

        `compensate=` (a function or a `Tool`) declares what undoes it in a saga: a function becomes
        a governed write of this box's namespace that is *not* added to the box, so the model can
        neither call nor skip it (`Tool.compensate`, `maitre.durable.Saga`)."""
        compensate = options.pop("compensate", None)
        tool = Tool.from_function(fn, namespace=self.namespace, **options)
        if compensate is not None:
            compensation = (
                compensate
                if isinstance(compensate, Tool)
                else Tool.from_function(compensate, namespace=self.namespace, effect="write")
            )
            tool.declare_compensation(compensation)
        self.add(tool)
        return tool

    def add(self, tool: Tool) -> Tool:
        """Add a prebuilt tool (for example one imported from an MCP server)."""
        if not isinstance(tool, Tool):
            raise UserError(
                f"Toolbox.add takes a Tool, got {type(tool).__name__}; use add_tool for functions"
            )
        if tool.name in self._tools:
            raise DuplicateToolError(f"a tool named {tool.name!r} is already in this toolbox")
        alias = provider_name(tool.name)
        if alias in self._aliases and self._aliases[alias] != tool.name:
            raise DuplicateToolError(
                f"{tool.name!r} and {self._aliases[alias]!r} map to the same provider name {alias!r}"
            )
        self._tools[tool.name] = tool
        if alias != tool.name:
            self._aliases[alias] = tool.name
        self._emit("added", tool)
        return tool

    def remove(self, name: str) -> Tool:
        """Remove a tool by canonical name; returns it."""
        tool = self._tools.pop(name, None)
        if tool is None:
            raise KeyError(name)
        self._aliases.pop(provider_name(name), None)
        self._emit("removed", tool)
        return tool

    def include(self, other: Toolbox) -> Toolbox:
        """Add every tool of `other` (keeping its canonical names) and follow its later changes."""
        if other is self:
            raise UserError("a toolbox cannot include itself")
        for tool in other:
            self.add(tool)
        other.subscribe(self._follow)
        self._included.append(other)
        return self

    def _follow(self, event: Literal["added", "removed"], tool: Tool) -> None:
        if event == "added":
            self.add(tool)
        elif tool.name in self._tools:
            self.remove(tool.name)

    # -- lookup -----------------------------------------------------------------------------------

    def get(self, name: str) -> Tool | None:
        """Find a tool by canonical name or by the provider-safe alias (`orders__get_order`)."""
        tool = self._tools.get(name)
        if tool is None:
            canonical = self._aliases.get(name)
            if canonical is not None:
                tool = self._tools.get(canonical)
        return tool

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __repr__(self) -> str:
        return f"Toolbox({self.namespace!r}, tools={len(self)})"

    # -- change notification ------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event, tool)` on every later change; returns an unsubscribe function."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, event: Literal["added", "removed"], tool: Tool) -> None:
        for listener in list(self._listeners):
            listener(event, tool)

    # -- export -------------------------------------------------------------------------------------

    def definitions(
        self, format: ExportFormat = "anthropic", *, names: list[str] | None = None
    ) -> ToolDefinitions:
        """Tool definitions in a provider's format, with token costs and a reversible name map.

        `names` restricts the export (for example to the tools revealed by tool search).
        """
        tools = self.tools() if names is None else [self._require(n) for n in names]
        return export_definitions(tools, format)

    def _require(self, name: str) -> Tool:
        tool = self.get(name)
        if tool is None:
            raise ToolDefinitionError(f"no tool named {name!r} in {self!r}")
        return tool

    @staticmethod
    async def from_mcp(target: Any, *, namespace: str, **options: Any) -> Toolbox:
        """Import another MCP server's tools as untrusted, pinned, scanned tools (see maitre.mcp.client).

        Options that hold the import to its pin (all keyword, see `McpUpstream`): `lockfile`,
        `trust_annotations=False` (the server's hints cannot lower policy unless True),
        `allow_loopback=False` and `allowed_hosts=()` (private, loopback, link-local and
        metadata addresses are refused before connecting), `max_response_bytes` (4 MiB) and
        `recheck_interval_s` (300 s; a drifted tool is withdrawn).

        The implementation is the MCP door's `maitre.mcp.client.toolbox_from_mcp`; this name stays
        for the callers that had it. The import runs only when this is called, so importing
        `maitre.tools` never loads `maitre.mcp` (the one outward import the layer test allows).
        """
        from ..mcp.client import toolbox_from_mcp  # layer exception: see tests/test_layers.py

        return await toolbox_from_mcp(target, namespace=namespace, **options)
