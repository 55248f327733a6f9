"""Helpers the provider adapters share: optional SDK imports, the SDK client, error mapping,
arguments, call ids and token counts.

The provider SDKs are optional extras, so nothing here imports them at module level: an adapter
(an `SDKModel`) imports its SDK in its constructor, and a missing SDK fails there with the
`pip install` line that fixes it.

Both official SDKs (Anthropic and OpenAI) are generated from the same template: `APIStatusError`
(with `status_code`), `APIConnectionError`, `APITimeoutError` and `APIResponseValidationError`
at the top of the package, and their own retry loop (429, 408, 409 and 5xx; `Retry-After` and
`retry-after-ms` honoured; exponential backoff with jitter otherwise). The adapters let the SDK
retry and convert what is left into one `ModelError` here, with the status and whether trying
again later could help.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from ..jsonutil import canonical_json, compact_json
from ..tools.export import ExportFormat, ToolDefinitions, export_definitions
from ..types import ToolCall
from .base import ModelError

if TYPE_CHECKING:
    from ..tools import Tool

__all__ = [
    "DefinitionsCache",
    "ReplayCache",
    "SDKModel",
    "arguments_json",
    "arguments_object",
    "function_call",
    "import_sdk",
    "mint_call_id",
    "model_error",
    "parse_arguments",
    "token_count",
]

T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({408, 409, 429})


def import_sdk(module: str, extra: str) -> ModuleType:
    """Import a provider SDK, or fail with the install line that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"the {module!r} package is needed for this model adapter; install it with "
            f"`pip install 'maitre[{extra}]'`"
        ) from exc


def model_error(sdk: ModuleType, exc: BaseException, provider: str) -> ModelError | None:
    """The `ModelError` for an SDK failure (after the SDK's own retries), or None if it is not one."""
    status_error = getattr(sdk, "APIStatusError", None)
    connection_error = getattr(sdk, "APIConnectionError", None)
    validation_error = getattr(sdk, "APIResponseValidationError", None)
    if status_error is not None and isinstance(exc, status_error):
        status = int(getattr(exc, "status_code", 0) or 0)
        retryable = status in _RETRYABLE_STATUS or status >= 500
        detail = _error_message(exc)
        response = getattr(exc, "response", None)
        after = response.headers.get("retry-after") if response is not None else None
        hint = f" (retry after {after} s)" if after else ""
        return ModelError(
            f"{provider} answered HTTP {status}: {detail}{hint}", status=status, retryable=retryable
        )
    if validation_error is not None and isinstance(exc, validation_error):
        return ModelError(f"{provider} sent a response that could not be read: {exc}", retryable=False)
    if connection_error is not None and isinstance(exc, connection_error):
        timed_out = "Timeout" in type(exc).__name__
        kind = "did not answer within the request time limit" if timed_out else "could not be reached"
        return ModelError(f"{provider} {kind}: {exc}", retryable=True, timed_out=timed_out)
    return None


class SDKModel:
    """What an adapter on an official SDK does apart from translating messages: import the SDK,
    build its client (or take the one given), close it, and turn what it raises into `ModelError`.

    Subclasses name the SDK (`_sdk_module`, also the maitre extra that installs it), its async
    client class (`_client_class`), the provider as error messages call it (`_provider`) and as
    traces call it (`otel_provider`, the GenAI conventions' `gen_ai.provider.name`).
    """

    _sdk_module: ClassVar[str]
    _client_class: ClassVar[str]
    _provider: ClassVar[str]
    otel_provider: str
    """`gen_ai.provider.name` on this adapter's `chat` spans (see `maitre.models.tracing`)."""

    def __init__(
        self,
        model: str,
        *,
        client: Any,
        api_key: str | None,
        base_url: str | None,
        max_retries: int,
        timeout: float,
        extra: Mapping[str, Any] | None,
    ) -> None:
        self._sdk = import_sdk(self._sdk_module, self._sdk_module)
        self.name = model
        self.model = model
        self._owns_client = client is None
        if client is None:
            options: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout}
            if api_key is not None:
                options["api_key"] = api_key
            if base_url is not None:
                options["base_url"] = base_url
            client = getattr(self._sdk, self._client_class)(**options)
        self.client = client
        self.extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it (a client you passed in stays open)."""
        if self._owns_client:
            await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _send(self, create: Callable[..., Awaitable[T]], params: Mapping[str, Any]) -> T:
        """`await create(**params)`; an SDK failure left after the SDK's retries raises `ModelError`."""
        try:
            return await create(**params)
        except Exception as exc:
            error = model_error(self._sdk, exc, self._provider)
            if error is None:
                raise
            raise error from exc


def _error_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            kind = error.get("type") or error.get("code")
            return f"{kind}: {error['message']}" if kind else error["message"]
    return str(getattr(exc, "message", None) or exc)


def parse_arguments(raw: Any) -> dict[str, Any] | str:
    """Arguments as the gate wants them: a dict, or the raw text when it is not a JSON object.

    The gate answers broken JSON with a teaching error, so nothing here raises.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return compact_json(raw) if _jsonable(raw) else str(raw)
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # nesting too deep is broken JSON too
        return raw
    return value if isinstance(value, dict) else raw


def _jsonable(value: Any) -> bool:
    try:
        compact_json(value)
    except (TypeError, ValueError):
        return False
    return True


def function_call(
    definitions: ToolDefinitions, *, call_id: str | None, name: str, arguments: Any, turn: int, index: int
) -> ToolCall:
    """A function call as an OpenAI API returns it, as a `ToolCall`: the canonical name, the
    arguments as `parse_arguments` reads them, and, when the provider sent no id, one minted from
    the turn, the call's position, its name and arguments."""
    parsed = parse_arguments(arguments)
    canonical = definitions.to_canonical(name)
    return ToolCall(
        id=call_id or mint_call_id(turn, index, canonical, parsed), name=canonical, arguments=parsed
    )


def token_count(usage: Any, field: str) -> int:
    """A token count from a provider's usage object (0 when the object or the field is missing or null)."""
    return int(getattr(usage, field, 0) or 0)


def arguments_json(arguments: dict[str, Any] | str) -> str:
    """Arguments as the JSON text OpenAI's wire format carries (broken text is sent back as it was)."""
    if isinstance(arguments, str):
        return arguments
    try:
        return compact_json(arguments)
    except (TypeError, ValueError):
        return json.dumps(arguments, default=str, ensure_ascii=False)


def arguments_object(arguments: dict[str, Any] | str) -> dict[str, Any]:
    """Arguments as the JSON object Anthropic's `tool_use.input` must be.

    Text that is not a JSON object (a call another model wrote badly) is kept under
    `_unparsed_arguments`, so the model can see what it sent next to the teaching error.
    """
    if isinstance(arguments, dict):
        return arguments
    parsed = parse_arguments(arguments)
    return parsed if isinstance(parsed, dict) else {"_unparsed_arguments": arguments}


def mint_call_id(*parts: Any, prefix: str = "call_") -> str:
    """A call id derived from its content: the same response always gets the same ids."""
    seed = "\x1f".join(_stable_text(part) for part in parts)
    return prefix + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _stable_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    try:
        return canonical_json(part)
    except (TypeError, ValueError):
        return repr(part)


class DefinitionsCache:
    """Provider-shaped tool definitions for the last tool list seen (it rarely changes in a run).

    The tools themselves are kept, so "the same list" means the same tool objects, never a new
    object that happens to reuse a freed one's id.
    """

    def __init__(self, format: ExportFormat) -> None:
        self._format: ExportFormat = format
        self._tools: tuple[Tool, ...] = ()
        self._definitions: ToolDefinitions | None = None

    def get(self, tools: Sequence[Tool]) -> ToolDefinitions:
        same = len(tools) == len(self._tools) and all(a is b for a, b in zip(tools, self._tools, strict=True))
        if self._definitions is None or not same:
            self._definitions = export_definitions(list(tools), self._format)
            self._tools = tuple(tools)
        return self._definitions


class ReplayCache:
    """Provider items that must travel back with an assistant turn but have no neutral form.

    Reasoning models return signed thinking blocks (Anthropic) or reasoning items (OpenAI
    Responses) that the provider wants back next to the tool calls they led to. The neutral
    `AssistantMessage` has no slot for them, so the adapter keeps them here, keyed by the turn's
    first call id, for as long as the process lives (bounded). A run resumed in another process
    simply sends the turn without them, which the APIs accept for earlier turns.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def put(self, call_id: str, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        self._items[call_id] = items
        self._items.move_to_end(call_id)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def get(self, call_id: str) -> list[dict[str, Any]]:
        return list(self._items.get(call_id, ()))
