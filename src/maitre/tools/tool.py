"""A tool: a function plus the static metadata the gate governs it by.

Metadata (`effect`, `risk`, `trust`, `scopes`, `timeout`, ...) is declared by the developer and
never decided by the model (seed 003: "risk tiers must be codified in static tool metadata").
A tool is built either from a typed Python function (`Tool.from_function`, what `@box.tool` uses)
or from a JSON Schema and an async handler (`Tool.from_schema`, for tools imported over MCP).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ..context import IdempotencyKey, RunContext
from ..exceptions import ToolDefinitionError, UserError
from ..stores.base import Stores
from ..types import Effect, Principal, Risk, Trust
from .docstrings import parse_docstring
from .drafts import normalise_schema, schema_validator
from .names import canonical_name
from .schema import SCHEMA_DIALECT, build_input_model, model_json_schema, strict_schema

__all__ = [
    "COMPENSATION_RESULT",
    "CONTEXT_TYPES",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_RESULT_TOKENS",
    "DEFAULT_TIMEOUT_S",
    "MAX_NAME_LENGTH",
    "OwnershipCheck",
    "Tool",
    "base_name_for",
]

logger = logging.getLogger(__name__)

COMPENSATION_RESULT = "result"
"""The parameter through which a compensation receives the original call's result text."""
DEFAULT_TIMEOUT_S = 30.0
"""Every tool has a finite timeout; 30 s unless the tool says otherwise."""
DEFAULT_MAX_RESULT_TOKENS = 2_000
"""Results longer than this are cut and the rest kept behind a handle (seed 002's oversized result)."""
DEFAULT_MAX_RESULT_BYTES = 4 * 1024 * 1024
"""Bytes of a result kept at all (4 MiB): the rest is dropped before any token work, so a tool that
returns 50 MB costs what 4 MiB costs. What is kept is paged behind the handle."""
DEFAULT_MAX_CONCURRENCY = 8
"""Calls of one sync tool running at once (each holds a worker thread, even past its deadline)."""

CONTEXT_TYPES: tuple[type, ...] = (Principal, RunContext, IdempotencyKey, Stores)
"""Parameter annotations the gate injects instead of taking them from the model."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*(\.[A-Za-z][A-Za-z0-9_\-]*)*$")
MAX_NAME_LENGTH = 128
"""Characters in a canonical tool name, namespace included (MCP's own bound for tool names)."""

OwnershipCheck = Callable[[Principal, dict[str, Any]], Any]
"""`check(principal, arguments) -> bool` (sync or async): does this principal own the resource?

Declared with `@box.tool(owner=check)`; the gate answers PERMISSION_DENIED (with no detail) when it
returns False, before anything executes.
"""


@dataclass(kw_only=True, eq=False)
class Tool:
    """A registered tool. Build it with `Tool.from_function` or `Tool.from_schema`."""

    name: str
    """Canonical name, `namespace.base` when the toolbox has a namespace."""
    description: str
    """What the model reads to decide when to use the tool (and when not to)."""
    input_schema: dict[str, Any]
    """Strict JSON Schema 2020-12 of the arguments."""
    fn: Callable[..., Any] | None = None
    """The Python function (None for schema tools)."""
    handler: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
    """For schema tools: `async handler(arguments) -> result`."""
    input_model: type[BaseModel] | None = None
    """Pydantic model the arguments are validated with (function tools)."""
    output_model: Any = None
    """Type the result is validated against, when declared."""
    output_schema: dict[str, Any] | None = None
    title: str | None = None
    effect: Effect = Effect.READ
    risk: Risk = Risk.LOW
    trust: Trust = Trust.TRUSTED
    """Whether the output may be read as instructions (untrusted output taints the run)."""
    timeout: float = DEFAULT_TIMEOUT_S
    """Seconds before the call is cancelled (async) or abandoned (sync, in a worker thread)."""
    retries: int = 0
    """Extra attempts for retryable failures only (never for deterministic errors)."""
    transient: tuple[type[BaseException], ...] = ()
    """Exception types that mean "try again later" for this tool."""
    max_result_tokens: int = DEFAULT_MAX_RESULT_TOKENS
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """Bytes (UTF-8, or serialised JSON) of a result kept at all; beyond this it is dropped, and said so."""
    max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY
    """Sync tools: calls in worker threads at once, counting threads abandoned at their deadline that
    have not returned yet. Further calls are TEMPORARY_UNAVAILABLE at once. None: only the shared
    pool bounds it. Async tools hold no thread and ignore it."""
    tags: tuple[str, ...] = ()
    scopes: frozenset[str] = frozenset()
    """Scopes the principal must hold to call the tool."""
    open_world: bool = False
    """The tool talks to the outside world (email, web, payments): taint makes it need approval."""
    egress: bool = False
    """A read whose arguments carry data out (fetch a URL, send a query to a third party): after
    untrusted content it is gated like an open-world write (see `maitre.dataflow`)."""
    idempotent: bool | None = None
    """Calling twice with the same arguments has no extra effect (reads are; writes by default are not)."""
    business_key: tuple[str, ...] | None = None
    """Argument fields that identify the real-world operation (seed 003's refund: order_id, amount)."""
    reconcile: Callable[[IdempotencyKey], Any] | None = None
    """`reconcile(key) -> result | None` (sync or async): did the side effect of this idempotency
    key happen? Called when an earlier attempt crashed or timed out, so its outcome is unknown:
    return the result if the effect happened (the call replays it), None if it did not (the call
    executes once). If it raises, the key stays for a human to check."""
    owner: OwnershipCheck | None = None
    requires_approval: bool | None = None
    """Force (True) or waive (False) human approval regardless of the risk matrix."""
    long_running: bool = False
    """Declared long work: MCP serves it as a task."""
    personal: bool = False
    """The arguments and the result are personal data about the calling user (memory tools): the
    gate keeps them in its stores - idempotency records, audit log (every mode), result handles,
    approval requests - only sealed under that user's key or as keyed digests, so
    `Stores.erase_subject` (what `forget` calls) makes every copy unreadable
    (`maitre.gate.personal`)."""
    compensate: Tool | None = field(default=None, repr=False)
    """What undoes this tool's effect when a later step of a saga fails (`maitre.durable.Saga`): a
    governed write taking this tool's arguments (a subset) and, if it declares it, `result`. The
    runtime runs it, never the model: it is in no toolbox. Set with `@box.tool(compensate=fn)` or
    `declare_compensation`."""
    source: str = "local"
    """`local`, or `mcp:<server>` for imported tools."""
    upstream_name: str | None = None
    """For an imported tool, its name on the MCP server, as the server spelled it: what a call sends
    upstream. The canonical `name` is built from it by `base_name_for` (None for local tools)."""
    annotations: dict[str, Any] = field(default_factory=dict)
    """Extra MCP annotations (imported tools keep the server's)."""
    context_params: dict[str, type] = field(default_factory=dict)
    """Parameters injected by the gate, by type."""
    is_async: bool = False
    _validator: Any = field(default=None, repr=False)
    _output_adapter: TypeAdapter[Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or len(self.name) > MAX_NAME_LENGTH:
            raise ToolDefinitionError(
                f"tool name {self.name[:200]!r} is not valid: use letters, digits, _ and -, starting with a "
                f"letter, with '.' only between namespace parts, at most {MAX_NAME_LENGTH} characters "
                "(an imported tool's own name is mapped: Tool.from_schema(name=..., namespace=...))"
            )
        self.effect = Effect(self.effect)
        self.risk = Risk(self.risk)
        self.trust = Trust(self.trust)
        self.scopes = frozenset(self.scopes)
        self.tags = tuple(self.tags)
        self.egress = bool(self.egress)
        self.personal = bool(self.personal)
        if not self.timeout or self.timeout < 0:  # None too: metadata arrives untyped (**metadata)
            raise ToolDefinitionError(f"{self.name}: timeout must be a positive number of seconds")
        if self.retries < 0 or self.retries > 10:
            raise ToolDefinitionError(f"{self.name}: retries must be between 0 and 10")
        if self.max_result_tokens < 16:
            raise ToolDefinitionError(f"{self.name}: max_result_tokens must be at least 16")
        if self.max_result_bytes < 1024:
            raise ToolDefinitionError(f"{self.name}: max_result_bytes must be at least 1024")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ToolDefinitionError(f"{self.name}: max_concurrency must be at least 1 (or None)")
        if self.idempotent is None:
            self.idempotent = self.effect is Effect.READ
        if self.reconcile is not None:
            if not callable(self.reconcile):
                raise ToolDefinitionError(f"{self.name}: reconcile must be a function reconcile(key)")
            if self.effect is Effect.READ or self.idempotent:
                raise ToolDefinitionError(
                    f"{self.name}: reconcile only applies to write and destructive tools that are not idempotent"
                )
        if self.business_key is not None:
            props = self.input_schema.get("properties", {})
            unknown = [key for key in self.business_key if key not in props]
            if unknown:
                raise ToolDefinitionError(f"{self.name}: business_key names unknown arguments {unknown}")
        if self.output_model is not None and self._output_adapter is None:
            self._output_adapter = TypeAdapter(self.output_model)

    @property
    def base_name(self) -> str:
        """The name without its namespace."""
        return self.name.rsplit(".", 1)[-1]

    @property
    def namespace(self) -> str | None:
        return self.name.rsplit(".", 1)[0] if "." in self.name else None

    @property
    def argument_names(self) -> list[str]:
        return list(self.input_schema.get("properties", {}))

    def declare_compensation(self, compensation: Tool) -> Tool:
        """Make `compensation` what undoes this tool (`Tool.compensate`); returns this tool.

        The compensation must be a write (it changes the world back), not this tool itself, and may
        declare only parameters this tool has, plus `result` (the original call's result text)."""
        if self.effect is Effect.READ:
            raise UserError(f"{self.name} is a read: there is nothing to compensate")
        if compensation.effect is Effect.READ:
            raise UserError(f"the compensation {compensation.name} must be a write or destructive tool")
        if compensation is self:
            raise UserError(f"{self.name} cannot compensate itself")
        allowed = set(self.argument_names) | {COMPENSATION_RESULT}
        unknown = [name for name in compensation.argument_names if name not in allowed]
        if unknown:
            raise UserError(
                f"the compensation {compensation.name} takes {unknown}, which {self.name} does not have; "
                f"a compensation takes the original arguments and {COMPENSATION_RESULT!r}"
            )
        self.compensate = compensation
        return self

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        namespace: str | None = None,
        description: str | None = None,
        output: Any = None,
        **metadata: Any,
    ) -> Tool:
        """Build a tool from a typed function: hints and docstring become the schema."""
        if not callable(fn):
            raise ToolDefinitionError(f"{fn!r} is not callable")
        summary, param_docs = parse_docstring(inspect.getdoc(fn))
        base = name or fn.__name__
        canonical = f"{namespace}.{base}" if namespace else base
        model, context = build_input_model(
            fn,
            model_name=_model_name(base),
            param_docs=param_docs,
            context_types=CONTEXT_TYPES,
        )
        output_model = output if output is not None else _output_model_from(fn)
        output_schema = None
        if output_model is not None:
            if isinstance(output_model, type) and issubclass(output_model, BaseModel):
                output_schema = model_json_schema(output_model)
            else:
                output_schema = strict_schema(TypeAdapter(output_model).json_schema())
                output_schema = {"$schema": SCHEMA_DIALECT, **output_schema}
        return cls(
            name=canonical,
            description=description if description is not None else summary,
            input_schema=model_json_schema(model),
            fn=fn,
            input_model=model,
            output_model=output_model,
            output_schema=output_schema,
            context_params=context,
            is_async=inspect.iscoroutinefunction(fn),
            _validator=model,
            **metadata,
        )

    @classmethod
    def from_schema(
        cls,
        *,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        handler: Callable[[dict[str, Any]], Awaitable[Any]],
        namespace: str | None = None,
        **metadata: Any,
    ) -> Tool:
        """Build a tool from a JSON Schema and an async handler (tools imported over MCP).

        The schema may be in any dialect MCP servers send (2020-12, 2019-09, draft-07/06/04, OpenAPI's
        `nullable`): it is normalised to the 2020-12 schema that means the same (`maitre.tools.drafts`)
        and that is what `input_schema` holds and the gate validates with. `input_schema` itself is
        not changed, so an MCP pin of the definition as sent stays as it was. An output schema given
        as `output_schema=` is normalised the same way when it can be, and kept as sent otherwise.

        With `namespace`, `name` is the tool's name on its server: it is kept as `upstream_name`
        and the canonical name is `namespace.` + `base_name_for(name)`, so `repo::search` or
        `files/read` becomes a valid, stable name (`github.repo_search-b5df18ba`) while calls still
        send the server's spelling. Without it, `name` is the canonical name and must be valid.
        """
        if not input_schema:  # None or {}: no arguments described, as before
            input_schema = {"type": "object"}
        label = name if namespace is None else f"{namespace}.{name}"
        try:
            schema = normalise_schema(input_schema)
            validator = schema_validator(schema)
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(f"{label[:200]}: {exc}") from None
        output = metadata.get("output_schema")
        if isinstance(output, dict):
            try:
                normalised = normalise_schema(output)
                schema_validator(normalised)
            except ToolDefinitionError as exc:
                logger.debug("%s: output schema kept as sent: %s", label[:200], exc)
            else:
                metadata["output_schema"] = normalised
        canonical = name
        if namespace is not None:
            metadata.setdefault("upstream_name", name)
            canonical = f"{namespace}.{base_name_for(name, max_length=MAX_NAME_LENGTH - len(namespace) - 1)}"
        return cls(
            name=canonical,
            description=description,
            input_schema=schema,
            handler=handler,
            is_async=True,
            _validator=validator,
            **metadata,
        )

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, effect={self.effect.value}, risk={self.risk.value})"


def base_name_for(name: str, *, max_length: int = 64) -> str:
    """A valid tool base name for a name another server chose, the same every time.

    A name that is already valid (letters, digits, `_` and `-`, starting with a letter, at most
    `max_length` characters) is kept as it is. Any other - `repo::search`, `files/read`,
    `admin.tools.list` (a `.` would read as a namespace), `get weather`, `天气`, `2fa` - becomes a
    readable ASCII slug plus `-` and the first hex digits of the SHA-256 of the name, so two
    different names never share a slug by accident (`a::b` and `a/b` differ) and a name that merely
    looks mapped keeps its own spelling. The mapping is not undone by parsing: the tool keeps the
    original as `Tool.upstream_name`, which is what a call sends.
    """
    return canonical_name(name, max_length=max_length)


def _model_name(base: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_\-.]", base) if part) + "Arguments"


def _output_model_from(fn: Callable[..., Any]) -> Any:
    try:
        hint = inspect.signature(fn).return_annotation
        if isinstance(hint, str):
            import typing

            hint = typing.get_type_hints(fn).get("return", inspect.Signature.empty)
    except Exception:
        return None
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return hint
    return None
