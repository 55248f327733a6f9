"""`OpenAICompatibleModel`: local and self-hosted servers that speak Chat Completions.

Ollama (`http://localhost:11434/v1`), vLLM (`http://host:8000/v1`) and the llama.cpp server
(`http://host:8080/v1`) answer the OpenAI wire format, so this adapter is `OpenAIChatModel` with
three differences:

- `max_tokens` instead of `max_completion_tokens` (what these servers have long understood);
- the model's name is `openai-compatible:<model>`, which the price table counts as free
  (register a price for it when the server is a paid one);
- tool calls written as plain text are recovered. When a server's tool parser does not match the
  model's chat template (or none is configured), the call arrives in `content`. Recognised:

  - Hermes / Qwen: `<tool_call>{"name": .., "arguments": {..}}</tool_call>` (the closing tag may
    be missing), and Qwen3-Coder's `<function=name><parameter=k>v</parameter></function>`;
  - Mistral: `[TOOL_CALLS] [{"name": .., "arguments": {..}}]` and `[TOOL_CALLS]name[ARGS]{..}`;
  - Llama 3: `<|python_tag|>{"name": .., "parameters": {..}}` and `<function=name>{..}</function>`;
  - a fenced block (```json ... ```) or bare JSON in the text: an object such as
    `{"name": .., "arguments": ..}`, `{"tool": .., "parameters": ..}`,
    `{"function": {"name": .., "arguments": ..}}`, `{"action": .., "action_input": ..}`, a list of
    them, or `{"tool_calls": [...]}`.

  A call is recovered only when its name is one of the offered tools and the object has no keys
  beyond a call's (so a JSON answer that merely has a `name` field stays text). Text inside
  `<think>` blocks is deliberation, never a call. The recovered spans leave the text; what
  remains is the answer's text. Ids are minted from the turn, position, name and arguments, so
  the same answer always yields the same ids.

  A call the text makes explicitly (a `<tool_call>` block, function tags, `[TOOL_CALLS]`, or an
  answer that is nothing but one call-shaped object) to a name no offered tool has is passed on
  all the same: the gate answers UNKNOWN_TOOL with the real names, and the model learns them,
  instead of the run ending with raw JSON as its answer. A bare name that is exactly one
  qualified tool's last part (`get_order` for `orders.get_order`) resolves to it.

Constrained tool calls (`constrained=True`, the default here; off for the hosted adapters): each
step with tools carries the JSON Schema of one answer built from the tools offered
(`maitre.models.constrained`), in the form the server reads (`schema_dialect`), with the tools
described in the system prompt; the answer `{"tool": .., "arguments": ..}` or `{"answer": ..}` is
read back into calls or text. A server that refuses the schema turns it off, said once on stderr.

Some servers cannot take `tools` at all (an Ollama model without tool support answers 400 "does
not support tools"; llama.cpp without `--jinja` answers "tools param requires --jinja flag";
vLLM without a tool parser asks for `--enable-auto-tool-choice`). With `tools_in_prompt="auto"`
(the default) such an error - only such an error - switches the adapter to describing the tools
in the system prompt, Hermes style (`<tools>` with the definitions, answers as `<tool_call>`
blocks), and to sending earlier calls and results as plain text; the recovery above then reads
the calls. `tools_in_prompt=True` starts there; `False` never does. An assistant turn with tool
calls goes out with `""` content, never null (llama-cpp-python's server answers HTTP 500 to null).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..jsonutil import compact_json
from ..messages import AssistantMessage, ToolResultMessage, UserMessage, render_tool_result
from ..tools.export import ToolDefinitions, provider_name
from ..types import ToolCall
from ._http import arguments_object, mint_call_id, parse_arguments
from .base import FinishReason, ModelError, ModelRequest, ModelResponse
from .constrained import (
    SCHEMA_DIALECTS,
    SchemaDialect,
    partial_answer,
    read_step,
    request_fields,
    step_schema,
)
from .openai import OpenAIChatModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["LOCAL_PREFIX", "OpenAICompatibleModel", "RecoveredCall", "recover_tool_calls"]

LOCAL_PREFIX = "openai-compatible:"

logger = logging.getLogger("maitre.models.openai_compat")

T = TypeVar("T")

_TOOLS_REFUSED = re.compile(
    r"(?:does not|doesn't|do not|cannot|can't|not) support(?:s|ed)? (?:tools|tool use|tool calling|function calling)"
    r"|no endpoints found that support tool"
    r"|tools? param(?:eter)?s? requires? --jinja"
    r"|tool choice requires --enable-auto-tool-choice"
    r"|unsupported param(?:eter)?:? ['\"]?tools?\b"
    r"|(?:tools|tool calling|function calling) (?:is|are) not (?:supported|enabled)",
    re.IGNORECASE,
)
"""Error texts that mean "this server or model takes no `tools`" (Ollama: "... does not support tools";
llama.cpp without `--jinja`: "tools param requires --jinja flag"; vLLM without a tool parser:
'"auto" tool choice requires --enable-auto-tool-choice ...'; OpenRouter: "No endpoints found that
support tool use"). Anything else - a template that failed on a message, a context overflow - is the
error it says it is: switching to prompt mode would hide it."""

_CALL_NAME = re.compile(r"[A-Za-z_][\w.\-]{0,127}")
"""A name a model wrote in an explicit call that names no offered tool, passed on to the gate
(which answers UNKNOWN_TOOL with the closest names) when it looks like a tool name at all."""

_TOOL_PROMPT = """You can call tools. The tools are described as JSON inside <tools></tools>:
<tools>
{definitions}
</tools>
To call a tool, answer with one block per call, and nothing else:
<tool_call>
{{"name": "<tool name>", "arguments": {{<the arguments as a JSON object>}}}}
</tool_call>
Several independent calls may go in one answer. Results come back inside <tool_response></tool_response>.
When you have what you need, answer the user in plain text."""


_CONSTRAINED_PROMPT = """You can call tools. The tools are described as JSON inside <tools></tools>:
<tools>
{definitions}
</tools>
Answer with exactly one JSON object and nothing else:
- to call a tool: {{"tool": "<tool name>", "arguments": {{<the arguments>}}}}{parallel}
- to answer the user: {{"answer": "<your answer in plain text>"}}
Call a tool whenever one can look up or do what the user asks: never answer with facts (a status, a price, \
the weather, an amount, an outcome) that no <tool_response> in this conversation gave you.
Results come back inside <tool_response></tool_response>. Never repeat a call whose result you already have; \
after an error, fix the call or tell the user what went wrong. Answer the user once the results hold what \
they need, or when no tool fits."""

_PARALLEL_LINE = '\n- to call several tools at once: {"calls": [{"tool": ..., "arguments": ...}, ...]}'

_SCHEMA_REFUSED = re.compile(
    r"response.?format|json.?schema|grammar|guided.?json|structured.?output|unsupported param\w*:? ['\"]?format",
    re.IGNORECASE,
)
"""Error texts that mean the server will not take the step's schema (then constrained decoding turns off)."""


class OpenAICompatibleModel(OpenAIChatModel):
    """A model served by Ollama, vLLM, llama.cpp or any other OpenAI-compatible server.

    Args:
        base_url: the server's OpenAI endpoint, for example `"http://localhost:11434/v1"`.
        model: the model the server should run, for example `"qwen3:8b"`.
        api_key: most local servers ignore it; the SDK needs a value.
        client: an `openai.AsyncOpenAI` to use as it is.
        max_retries: retries the SDK makes for 429, 5xx and connection errors before giving up.
        timeout: seconds for one HTTP request (local models can be slow to load).
        extra: more keyword arguments for `chat.completions.create` (top_p, stop...).
        recover_text_calls: read tool calls the server left in the text (on by default).
        tools_in_prompt: describe the tools in the system prompt instead of `tools`: `"auto"`
            switches when the server refuses `tools`; True always; False never.
        name: the name used for pricing and logs (default `openai-compatible:<model>`).
        temperature: sampling temperature (None: the server's default, 0.8 on llama.cpp).
        seed: the sampling seed, for runs that repeat.
        max_output_tokens: a cap on each call's output tokens (the agent's per-call limit still
            applies: the smaller one wins).
        constrained: constrained tool calls (on by default for local servers): each step's
            request carries the schema `maitre.models.constrained.step_schema` builds from the
            tools offered, so the answer is a valid call or an answer by construction. A server
            that refuses the schema turns it off (said once on stderr) and the other modes apply.
        schema_dialect: how the schema travels (`maitre.models.constrained.SchemaDialect`):
            `"llama.cpp"` (the default), `"json_schema"`, `"vllm"` or `"ollama"`.
        parallel_calls: let a constrained answer hold several calls (`{"calls": [...]}`).

    Example:
        ```python
        model = OpenAICompatibleModel("http://localhost:11434/v1", "qwen3:8b", temperature=0, seed=7)
        ```
    """

    _token_limit_param = "max_tokens"
    _provider = "OpenAI-compatible server"
    otel_provider = "openai_compatible"
    """Not `openai`: the conventions' provider name selects the OpenAI flavour of attributes, and a
    local server is not OpenAI. Set it on an instance (`model.otel_provider = "ollama"`) to name yours."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "not-needed",
        client: AsyncOpenAI | None = None,
        max_retries: int = 2,
        timeout: float = 300.0,
        extra: Mapping[str, Any] | None = None,
        recover_text_calls: bool = True,
        tools_in_prompt: bool | Literal["auto"] = "auto",
        name: str | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        max_output_tokens: int | None = None,
        constrained: bool = True,
        schema_dialect: SchemaDialect = "llama.cpp",
        parallel_calls: bool = False,
    ) -> None:
        options = dict(extra or {})
        if temperature is not None:
            options["temperature"] = temperature
        if seed is not None:
            options["seed"] = seed
        super().__init__(
            model,
            client=client,
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            extra=options,
        )
        if schema_dialect not in SCHEMA_DIALECTS:
            raise ValueError(
                f"schema_dialect must be one of {', '.join(SCHEMA_DIALECTS)}, not {schema_dialect!r}"
            )
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError("max_output_tokens must be at least 1")
        self.base_url = base_url
        self.name = name or f"{LOCAL_PREFIX}{model}"
        self.recover_text_calls = recover_text_calls
        self.tools_in_prompt = tools_in_prompt
        self.max_output_tokens = max_output_tokens
        self.constrained = constrained
        self.schema_dialect: SchemaDialect = schema_dialect
        self.parallel_calls = parallel_calls
        self._prompt_mode = tools_in_prompt is True
        self._schema_refused = False

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel({self.base_url!r}, {self.model!r})"

    @property
    def prompt_mode(self) -> bool:
        """True when the tools travel in the system prompt rather than in `tools`."""
        return self._prompt_mode

    @property
    def constrained_mode(self) -> bool:
        """True while steps with tools carry the step's schema (on, and not refused by the server)."""
        return self.constrained and not self._schema_refused

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            return await super().complete(request)
        except ModelError as exc:
            if not request.tools or exc.status not in (400, 422, 500, 501):
                raise
            if self.constrained_mode and _SCHEMA_REFUSED.search(str(exc)):
                _say(f"{self.name} refused the step's JSON schema ({exc}); constrained tool calls are off")
                self._schema_refused = True
                return await self.complete(request)
            refused = _TOOLS_REFUSED.search(str(exc))
            if self.tools_in_prompt != "auto" or self._prompt_mode or self.constrained_mode or not refused:
                raise
            _say(f"{self.name} takes no native tools ({exc}); describing them in the prompt from now on")
            self._prompt_mode = True
            return await super().complete(request)

    def _output_limit(self, request: ModelRequest) -> int:
        if self.max_output_tokens is None:
            return request.max_output_tokens
        return min(request.max_output_tokens, self.max_output_tokens)

    def _params(self, request: ModelRequest, definitions: ToolDefinitions) -> dict[str, Any]:
        limit = self._output_limit(request)
        if definitions and self.constrained_mode:
            schema = step_schema(request.tools, parallel=self.parallel_calls)
            return {
                "model": self.model,
                "messages": self.constrained_messages(request),
                self._token_limit_param: limit,
                **self.extra,
                **request_fields(schema, self.schema_dialect),
            }
        if definitions and self._prompt_mode:
            return {
                "model": self.model,
                "messages": self.prompt_messages(request, definitions),
                self._token_limit_param: limit,
                **self.extra,
            }
        params = super()._params(request, definitions)
        params[self._token_limit_param] = limit
        return params

    async def _send(self, create: Callable[..., Awaitable[T]], params: Mapping[str, Any]) -> T:
        # The SDK sends fields it does not know (guided_json, format) only in `extra_body`.
        known = {key: value for key, value in params.items() if key not in _EXTRA_BODY_FIELDS}
        body = {key: value for key, value in params.items() if key in _EXTRA_BODY_FIELDS}
        if body:
            known["extra_body"] = {**dict(known.get("extra_body") or {}), **body}
        return await super()._send(create, known)

    def to_messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """As `OpenAIChatModel.to_messages`, with `""` rather than null content beside tool calls:
        llama-cpp-python's server renders the chat template with the message as sent and answers
        HTTP 500 for a null content (see tests/models/fixtures/README.md)."""
        messages = super().to_messages(request)
        for message in messages:
            if message["role"] == "assistant" and message.get("content") is None:
                message["content"] = ""
        return messages

    def prompt_messages(self, request: ModelRequest, definitions: ToolDefinitions) -> list[dict[str, Any]]:
        """The conversation with tools described in the system prompt and calls/results as text."""
        tool_prompt = _TOOL_PROMPT.format(definitions="\n".join(compact_json(item) for item in definitions))

        def block(call: ToolCall) -> str:
            payload = {"name": provider_name(call.name), "arguments": arguments_object(call.arguments)}
            return f"<tool_call>\n{compact_json(payload)}\n</tool_call>"

        return self._text_conversation(request, tool_prompt, lambda calls: "\n".join(block(c) for c in calls))

    def constrained_messages(self, request: ModelRequest) -> list[dict[str, Any]]:
        """The conversation for a constrained step: the tools described in the system prompt, the
        model's earlier calls as the JSON its schema asks for, results as `<tool_response>` text."""
        definitions = "\n".join(
            compact_json(
                {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
            )
            for tool in request.tools
        )
        prompt = _CONSTRAINED_PROMPT.format(
            definitions=definitions, parallel=_PARALLEL_LINE if self.parallel_calls else ""
        )

        def calls_text(calls: list[ToolCall]) -> str:
            items = [{"tool": call.name, "arguments": arguments_object(call.arguments)} for call in calls]
            if len(items) == 1:
                return compact_json(items[0])
            if self.parallel_calls:
                return compact_json({"calls": items})
            return "\n".join(compact_json(item) for item in items)

        return self._text_conversation(request, prompt, calls_text, answers_as_json=True)

    def _text_conversation(
        self,
        request: ModelRequest,
        tool_prompt: str,
        calls_text: Callable[[list[ToolCall]], str],
        *,
        answers_as_json: bool = False,
    ) -> list[dict[str, Any]]:
        # a constrained step names tools canonically (its schema's consts); the Hermes prompt, safely
        shown = (lambda name: name) if answers_as_json else provider_name
        system = f"{request.system}\n\n{tool_prompt}" if request.system else tool_prompt
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for message in request.messages:
            if isinstance(message, UserMessage):
                messages.append({"role": "user", "content": message.content})
            elif isinstance(message, AssistantMessage):
                if message.tool_calls:
                    text = calls_text(message.tool_calls)
                    if message.text and not answers_as_json:
                        text = f"{message.text}\n{text}"
                elif answers_as_json:
                    text = compact_json({"answer": message.text})
                else:
                    text = message.text
                messages.append({"role": "assistant", "content": text})
            elif isinstance(message, ToolResultMessage):
                error = ' is_error="true"' if message.is_error else ""
                block = (
                    f'<tool_response id="{message.call_id}" name="{shown(message.name)}"{error}>\n'
                    f"{render_tool_result(message)}\n</tool_response>"
                )
                previous = messages[-1]
                if previous["role"] == "user" and previous["content"].startswith("<tool_response"):
                    previous["content"] += "\n" + block
                else:
                    messages.append({"role": "user", "content": block})
        return messages

    def _answered_by(self, completion: Any) -> str:
        return self.name

    def _finish(
        self,
        request: ModelRequest,
        definitions: ToolDefinitions,
        text: str,
        calls: list[ToolCall],
        stop_reason: FinishReason,
    ) -> tuple[str, list[ToolCall], FinishReason]:
        if not request.tools:
            return text, calls, stop_reason
        offered = {tool.name for tool in request.tools}
        turn = len(request.messages)

        def known(name: str) -> str | None:
            canonical = definitions.to_canonical(name)
            return canonical if canonical in offered else _bare_name(canonical, offered)

        if calls:  # native calls: a bare name that is one qualified tool's resolves to it
            for call in calls:
                call.name = known(call.name) or call.name
            return text, calls, stop_reason
        if definitions and self.constrained_mode:
            reading = read_step(text)
            if reading is not None:
                if not reading.calls:
                    return reading.text, [], stop_reason
                minted = [
                    ToolCall(
                        id=mint_call_id(turn, index, known(name) or name, arguments),
                        name=known(name) or name,
                        arguments=arguments,
                    )
                    for index, (name, arguments) in enumerate(reading.calls)
                ]
                return "", minted, ("max_tokens" if stop_reason == "max_tokens" else "tool_use")
            cut_short = partial_answer(text) if stop_reason == "max_tokens" else None
            if cut_short is not None:  # the answer ran into the token limit: keep what it said
                return cut_short, [], stop_reason
        if not self.recover_text_calls or not text:
            return text, calls, stop_reason
        recovered, remaining = recover_tool_calls(text, known, unknown=_unknown_name)
        if not recovered:
            return text, calls, stop_reason
        calls = [
            ToolCall(
                id=found.id or mint_call_id(turn, index, found.name, found.arguments),
                name=found.name,
                arguments=found.arguments,
            )
            for index, found in enumerate(recovered)
        ]
        return remaining, calls, ("max_tokens" if stop_reason == "max_tokens" else "tool_use")


_EXTRA_BODY_FIELDS = frozenset({"guided_json", "format"})


def _say(message: str) -> None:
    """A mode switch, on stderr (a logger's warning reaches stderr by default). Each switch happens
    once in a model's life, so each is said once."""
    logger.warning("%s", message)


def _bare_name(name: str, offered: set[str]) -> str | None:
    """The one offered tool whose last part is `name` (`get_order` for `orders.get_order`), or None."""
    if "." in name:
        return None
    matches = [tool for tool in offered if tool.rsplit(".", 1)[-1] == name]
    return matches[0] if len(matches) == 1 else None


def _unknown_name(name: str) -> str | None:
    """A name an explicit call wrote that names no offered tool: the gate answers it (UNKNOWN_TOOL)."""
    return name if _CALL_NAME.fullmatch(name) else None


# -- recovering calls from text ---------------------------------------------------------------


@dataclass(kw_only=True)
class RecoveredCall:
    """A tool call found in a model's text."""

    name: str
    """The canonical name of an offered tool."""
    arguments: dict[str, Any] | str
    """A dict, or raw text when the arguments were not a JSON object."""
    id: str | None = None
    """The id the text gave the call, if any."""


_NAME_KEYS = ("name", "tool", "tool_name", "function", "action", "recipient_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "tool_input", "action_input", "params")
_OTHER_KEYS = frozenset({"id", "type", "call_id", "tool_call_id", "index"})

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([\w.\-]+)>\s*(.*?)\s*(?:</function>|\Z)", re.DOTALL)
_PARAMETER_TAG = re.compile(r"<parameter=([\w.\-]+)>\s*(.*?)\s*</parameter>", re.DOTALL)
_MISTRAL = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_ARGS = re.compile(r"\s*([\w.\-]+)(?:\[CALL_ID\]\s*([\w\-]+))?\s*\[ARGS\]")
_PYTHON_TAG = re.compile(r"<\|python_tag\|>")
_FENCE = re.compile(r"```[ \t]*([\w\-]*)[ \t]*\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
_MAX_JSON_ATTEMPTS = 2000
"""Bare-JSON candidates tried per answer: bounds the work a hostile answer full of brackets causes."""


def recover_tool_calls(
    text: str,
    known: Callable[[str], str | None],
    *,
    unknown: Callable[[str], str | None] | None = None,
) -> tuple[list[RecoveredCall], str]:
    """Find tool calls written as text.

    Args:
        text: the model's answer.
        known: maps a name the model wrote to the canonical name of an offered tool, or None.
        unknown: for a name `known` does not map, in a call the text makes explicitly (a
            `<tool_call>` block, function tags, `[TOOL_CALLS]`, `<|python_tag|>`, or an answer that
            is nothing but one call-shaped object with its arguments), the name to pass on anyway
            (so the gate answers UNKNOWN_TOOL and the model learns the real names), or None.
            JSON inside prose naming no offered tool stays text whatever this says.

    Returns:
        The calls in the order they appear, and the text with them taken out.
    """
    explicit = known if unknown is None else (lambda name: known(name) or unknown(name))
    masked = _mask(text, [match.span() for match in _THINK.finditer(text)])
    found: list[tuple[int, int, list[RecoveredCall]]] = []

    def take(start: int, end: int, calls: list[RecoveredCall]) -> None:
        nonlocal masked
        found.append((start, end, calls))
        masked = _mask(masked, [(start, end)])

    for match in _HERMES.finditer(masked):
        calls = _from_function_tags(match.group(1), explicit) or _from_json_text(match.group(1), explicit)
        if calls:
            take(match.start(), match.end(), calls)
    for match in _FUNCTION_TAG.finditer(masked):
        calls = _from_function_tags(match.group(0), explicit)
        if calls:
            take(match.start(), match.end(), calls)
    for match in _MISTRAL.finditer(masked):
        span_calls = _from_mistral(masked, match.end(), explicit)
        if span_calls:
            end, calls = span_calls
            take(match.start(), end, calls)
    for match in _PYTHON_TAG.finditer(masked):
        end, calls = _json_sequence(masked, match.end(), explicit, separators=";")
        if calls:
            take(match.start(), end, calls)
    if not found and unknown is not None:
        whole = _whole_answer_call(masked, explicit)
        if whole:
            take(0, len(masked), whole)
    for match in _FENCE.finditer(masked):
        calls = _from_json_text(match.group(2), known)
        if calls:
            take(match.start(), match.end(), calls)
    index = 0
    attempts = 0
    while index < len(masked) and attempts < _MAX_JSON_ATTEMPTS:
        start = _next_json_start(masked, index)
        if start < 0:
            break
        attempts += 1
        try:
            value, end = _DECODER.raw_decode(masked, start)
        except ValueError:
            index = start + 1
            continue
        except RecursionError:  # hostile nesting: skip the whole run of brackets at once
            index = start + len(masked[start:]) - len(masked[start:].lstrip("[{ \t\r\n"))
            continue
        calls = _calls_from_value(value, known)
        if calls:
            take(start, end, calls)
        index = end  # a JSON value that is not a call is data: nothing inside it is a call either

    found.sort(key=lambda item: item[0])
    calls = [call for _, _, group in found for call in group]
    remaining = text
    for start, end, _ in sorted(found, key=lambda item: item[0], reverse=True):
        remaining = remaining[:start] + remaining[end:]
    return calls, _tidy(remaining) if calls else text


def _whole_answer_call(text: str, known: Callable[[str], str | None]) -> list[RecoveredCall]:
    """The calls of an answer that is nothing but call-shaped JSON (bare or fenced) whose objects
    each carry a name and an arguments key: what a model that means to call writes."""
    body = text.strip()
    fence = _FENCE.fullmatch(body)
    if fence:
        body = fence.group(2).strip()
    if not body.startswith(("{", "[")):
        return []
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return []
    items = value if isinstance(value, list) else [value]
    if not items or not all(
        isinstance(item, dict)
        and any(isinstance(item.get(key), str) for key in _NAME_KEYS)
        and any(key in item for key in _ARGUMENT_KEYS)
        for item in items
    ):
        return []
    return _calls_from_value(value, known)


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """Blank out spans while keeping every index in place."""
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        for at in range(start, end):
            if chars[at] != "\n":
                chars[at] = " "
    return "".join(chars)


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _next_json_start(text: str, index: int) -> int:
    braces = [at for at in (text.find("{", index), text.find("[", index)) if at >= 0]
    return min(braces) if braces else -1


def _from_json_text(body: str, known: Callable[[str], str | None]) -> list[RecoveredCall]:
    """Calls from text that should be JSON: one value, or several one after another."""
    body = body.strip()
    if not body:
        return []
    end, calls = _json_sequence(body, 0, known, separators=",;")
    return calls if calls and not body[end:].strip() else []


def _json_sequence(
    text: str, index: int, known: Callable[[str], str | None], *, separators: str
) -> tuple[int, list[RecoveredCall]]:
    """JSON values from `index` on, separated by whitespace or `separators`; stop at anything else."""
    calls: list[RecoveredCall] = []
    end = index
    while True:
        at = end
        while at < len(text) and (text[at].isspace() or (calls and text[at] in separators)):
            at += 1
        if at >= len(text) or text[at] not in "{[":
            return end, calls
        try:
            value, after = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):  # nesting too deep is broken JSON too
            return end, calls
        more = _calls_from_value(value, known)
        if not more:
            return end, calls
        calls.extend(more)
        end = after


def _from_mistral(
    text: str, index: int, known: Callable[[str], str | None]
) -> tuple[int, list[RecoveredCall]] | None:
    end, calls = _json_sequence(text, index, known, separators=",")
    if calls:
        return end, calls
    match = _MISTRAL_ARGS.match(text, index)
    if not match:
        return None
    canonical = known(match.group(1))
    if canonical is None:
        return None
    try:
        value, after = _DECODER.raw_decode(text, match.end() + _skip_space(text, match.end()))
    except (ValueError, RecursionError):  # nesting too deep is broken JSON too
        return None
    arguments = value if isinstance(value, dict) else json.dumps(value)
    return after, [RecoveredCall(name=canonical, arguments=arguments, id=match.group(2))]


def _skip_space(text: str, index: int) -> int:
    at = index
    while at < len(text) and text[at].isspace():
        at += 1
    return at - index


def _from_function_tags(body: str, known: Callable[[str], str | None]) -> list[RecoveredCall]:
    """Llama 3's `<function=name>{json}</function>` and Qwen3-Coder's parameter tags."""
    calls: list[RecoveredCall] = []
    for match in _FUNCTION_TAG.finditer(body):
        canonical = known(match.group(1))
        if canonical is None:
            return []
        inner = match.group(2).strip()
        parameters = _PARAMETER_TAG.findall(inner)
        if parameters:
            arguments: dict[str, Any] | str = {key: _parameter_value(value) for key, value in parameters}
        elif inner:
            arguments = parse_arguments(inner)
        else:
            arguments = {}
        calls.append(RecoveredCall(name=canonical, arguments=arguments))
    return calls


def _parameter_value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nesting too deep is broken JSON too
        return text


def _calls_from_value(value: Any, known: Callable[[str], str | None]) -> list[RecoveredCall]:
    """Calls from a parsed JSON value: one call, a list of calls (all of them), or a wrapper."""
    if isinstance(value, list):
        calls = [_call_from_object(item, known) for item in value]
        return [call for call in calls if call is not None] if value and all(calls) else []
    if isinstance(value, dict):
        if set(value) == {"tool_calls"} and isinstance(value["tool_calls"], list):
            return _calls_from_value(value["tool_calls"], known)
        call = _call_from_object(value, known)
        return [call] if call is not None else []
    return []


def _call_from_object(value: Any, known: Callable[[str], str | None]) -> RecoveredCall | None:
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict):
        extra = set(value) - {"function"} - _OTHER_KEYS
        if extra:
            return None
        inner = _call_from_object(function, known)
        if inner is not None and inner.id is None and isinstance(value.get("id"), str) and value["id"]:
            inner.id = value["id"]
        return inner
    name_keys = [key for key in _NAME_KEYS if isinstance(value.get(key), str)]
    if len(name_keys) != 1:
        return None
    argument_keys = [key for key in _ARGUMENT_KEYS if key in value]
    if len(argument_keys) > 1:
        return None
    if set(value) - {name_keys[0], *argument_keys} - _OTHER_KEYS:
        return None
    canonical = known(value[name_keys[0]])
    if canonical is None:
        return None
    raw = value[argument_keys[0]] if argument_keys else {}
    if isinstance(raw, dict):
        arguments: dict[str, Any] | str = raw
    elif isinstance(raw, str):
        arguments = parse_arguments(raw)
    elif raw is None:
        arguments = {}
    else:
        arguments = json.dumps(raw, ensure_ascii=False)
    call_id = value.get("id") or value.get("call_id")
    return RecoveredCall(
        name=canonical, arguments=arguments, id=call_id if isinstance(call_id, str) and call_id else None
    )
