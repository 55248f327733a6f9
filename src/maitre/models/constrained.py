"""Constrained tool calls: the step's answer as one JSON document a schema allows (seed 002).

A tool call is a schema-constrained string by nature, and local servers can enforce a JSON Schema
while the model writes (llama.cpp turns it into a grammar; vLLM has guided decoding; Ollama takes
`format`). `step_schema` builds, from the tools offered at this step, the schema of one answer:

- `{"tool": <const name>, "arguments": <that tool's input schema>}` - one call;
- `{"answer": <string>}` - the reply to the user;
- with `parallel=True`, also `{"calls": [<a call>, ...]}` - several independent calls at once.

So a tool's name, the types, patterns, enums and required fields of its arguments are enforced
token by token; what a schema cannot say (an order that does not exist, a business rule, a
denial) still comes back from the gate as a teaching error.

`request_fields` says how each server takes the schema (`SchemaDialect`), and `read_step`
turns the constrained answer back into calls or text; an answer that is not the schema's shape
(a server that ignored it) is left to the adapter's other readings.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..jsonutil import compact_json

if TYPE_CHECKING:
    from ..tools import Tool

__all__ = [
    "MAX_GRAMMAR_REPEAT",
    "SCHEMA_DIALECTS",
    "SchemaDialect",
    "StepReading",
    "grammar_safe_pattern",
    "grammar_safe_schema",
    "partial_answer",
    "read_step",
    "request_fields",
    "step_schema",
]

SchemaDialect = Literal["llama.cpp", "json_schema", "vllm", "ollama"]
"""How the schema travels in a Chat Completions request:

- `"llama.cpp"`: `response_format: {"type": "json_object", "schema": S}` - what llama-cpp-python's
  server reads (`_grammar_for_response_format`), and llama.cpp's `llama-server` accepts too;
- `"json_schema"`: OpenAI's `response_format: {"type": "json_schema", "json_schema": {...}}` -
  llama-server, vLLM, Ollama's `/v1`, LM Studio;
- `"vllm"`: `guided_json: S` (vLLM's guided decoding parameter);
- `"ollama"`: `format: S` (Ollama's own structured-output field).
"""

SCHEMA_DIALECTS: tuple[SchemaDialect, ...] = ("llama.cpp", "json_schema", "vllm", "ollama")


def step_schema(tools: Sequence[Tool], *, parallel: bool = False) -> dict[str, Any]:
    """The JSON Schema of one step's answer: a call to one of `tools`, or an answer (see the module)."""
    defs: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        arguments = _hoisted(tool.input_schema, f"t{index}_", defs)
        calls.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool.name}, "arguments": arguments},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    options: list[dict[str, Any]] = list(calls)
    if parallel and calls:
        options.append(
            {
                "type": "object",
                "properties": {"calls": {"type": "array", "items": {"oneOf": calls}, "minItems": 1}},
                "required": ["calls"],
                "additionalProperties": False,
            }
        )
    options.append(
        {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        }
    )
    schema: dict[str, Any] = {"oneOf": options}
    if defs:
        schema["$defs"] = defs
    return schema


def _hoisted(schema: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema with its `$defs` moved to the top level under `prefix` names, so the
    schemas of several tools live in one document without their definitions colliding."""
    body = copy.deepcopy(schema)
    own = body.pop("$defs", None) or {}
    body.pop("$schema", None)
    renamed = {name: f"{prefix}{name}" for name in own}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = ref.removeprefix("#/$defs/")
                node = {**node, "$ref": f"#/$defs/{renamed.get(target, target)}"}
            return {key: rewrite(value) for key, value in node.items()}
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    for name, definition in own.items():
        defs[renamed[name]] = rewrite(definition)
    result = rewrite(body)
    return result if isinstance(result, dict) else {"type": "object"}


def request_fields(schema: dict[str, Any], dialect: SchemaDialect) -> dict[str, Any]:
    """The request fields that carry `schema` for a server of this dialect (for `"llama.cpp"`, with
    its patterns made safe for llama-cpp-python's grammar converter: `grammar_safe_schema`)."""
    if dialect == "llama.cpp":
        return {"response_format": {"type": "json_object", "schema": grammar_safe_schema(schema)}}
    if dialect == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "maitre_step", "schema": schema, "strict": True},
            }
        }
    if dialect == "vllm":
        return {"guided_json": schema}
    return {"format": schema}


def grammar_safe_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every `pattern` rewritten by `grammar_safe_pattern`, or dropped where it cannot be.

    llama-cpp-python's JSON-Schema-to-GBNF converter (0.3.36, `SchemaConverter._visit_pattern`)
    copies a regex escape such as `\\d`, `\\s` or `\\.` into the grammar as it is; GBNF has no
    such escapes, the grammar fails to parse ("unknown escape at \\d"), and the server then
    crashes while generating (recorded 2026-12-02 with a `Decimal` amount's `^\\d{1,8}(\\.\\d{1,2})?$`).
    A dropped pattern loosens only the decoding: the gate still validates the call against the
    tool's own schema and teaches when the value is wrong."""
    result = _safe(copy.deepcopy(schema))
    return result if isinstance(result, dict) else schema


def _safe(node: Any) -> Any:
    if isinstance(node, list):
        return [_safe(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "pattern" and isinstance(value, str):
            safe = grammar_safe_pattern(value)
            if safe is not None:
                out[key] = safe
        elif key in _COUNTS and isinstance(value, int) and value > MAX_GRAMMAR_REPEAT:
            continue  # the grammar would repeat a rule thousands of times: the parser refuses it
        elif key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _safe(item) for name, item in value.items()}  # names, not keywords
        else:
            out[key] = _safe(value)
    return out


MAX_GRAMMAR_REPEAT = 256
"""Counts above this (`maxLength: 2000`, `{1,1000}`) are loosened or dropped for llama.cpp: the
converter writes them as that many nested rules and llama.cpp refuses the grammar ("number of
rules that are going to be repeated ... exceeds sane defaults"), with the crash above."""

_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
_QUANTIFIER = re.compile(r"\{(\d*)(,?)(\d*)\}")

_CLASS_SHORTHANDS = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\r"}
_NEGATED_SHORTHANDS = {"D": "0-9", "W": "A-Za-z0-9_", "S": " \\t\\n\\r"}
_GBNF_ESCAPES = frozenset("tnr")


def grammar_safe_pattern(pattern: str) -> str | None:
    """The same regular expression written so llama-cpp-python's converter yields valid GBNF, or
    None when it cannot be (unanchored, lookarounds, groups with `?`, backreferences, `\\b`...).

    `\\d` / `\\w` become `[0-9]` / `[A-Za-z0-9_]`, `\\s` space, tab, newline and carriage return;
    an escaped punctuation character becomes a one-character class by its code (`\\.` is
    `[\\x2E]`); `\\t` `\\n` `\\r` stay (GBNF has them). A quantifier's upper bound above
    `MAX_GRAMMAR_REPEAT` is dropped (`{1,1000}` becomes `{1,}`); otherwise the result matches
    the strings the pattern matches (in ASCII)."""
    if (
        len(pattern) < 2
        or not pattern.startswith("^")
        or not pattern.endswith("$")
        or pattern.endswith("\\$")
    ):
        return None
    body = pattern[1:-1]
    out: list[str] = []
    index = 0
    in_class = False
    while index < len(body):
        char = body[index]
        if char == "\\":
            if index + 1 >= len(body):
                return None
            escaped = body[index + 1]
            index += 2
            if escaped in _CLASS_SHORTHANDS:
                out.append(_CLASS_SHORTHANDS[escaped] if in_class else f"[{_CLASS_SHORTHANDS[escaped]}]")
            elif escaped in _NEGATED_SHORTHANDS:
                if in_class:
                    return None  # [^...] inside a class cannot be written
                out.append(f"[^{_NEGATED_SHORTHANDS[escaped]}]")
            elif escaped in _GBNF_ESCAPES:
                out.append("\\" + escaped)
            elif escaped.isalnum() or not escaped.isascii():
                return None  # \b, \1, \p{..}, \u...: nothing GBNF can say here
            elif in_class:
                out.append(f"\\x{ord(escaped):02X}")
            else:
                out.append(f"[\\x{ord(escaped):02X}]")
            continue
        if in_class:
            if char == "]":
                in_class = False
            elif char == "[":
                return None  # nested classes ([[:alpha:]]) are not regular GBNF
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
            if body.startswith("^", index + 1):
                out.append("^")
                index += 1
            if body.startswith("]", index + 1):
                return None  # a leading literal ] reads differently in GBNF
        elif char in "^$":
            return None  # anchors inside the pattern
        elif char == "(" and body.startswith("?", index + 1):
            return None  # (?:...), lookarounds, named groups: the converter refuses them
        elif char == '"':
            out.append("[\\x22]")
        elif char == "{":
            quantifier = _QUANTIFIER.match(body, index)
            if quantifier is None:
                return None
            low, comma, high = quantifier.groups()
            if low and int(low) > MAX_GRAMMAR_REPEAT:
                return None
            if high and int(high) > MAX_GRAMMAR_REPEAT:  # looser while decoding; the gate checks
                high = ""
            out.append(f"{{{low or 0}{comma}{high}}}")
            index = quantifier.end()
            continue
        else:
            out.append(char)
        index += 1
    if in_class:
        return None
    return f"^{''.join(out)}$"


@dataclass(kw_only=True)
class StepReading:
    """A constrained answer, read: the answer's text, or the calls it makes."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any] | str]]
    """(name as written, arguments) in order; arguments that are not an object stay JSON text."""


def read_step(text: str) -> StepReading | None:
    """The constrained answer in `text`, or None when `text` is not one (the server ignored the schema)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    if set(value) == {"answer"} and isinstance(value["answer"], str):
        return StepReading(text=value["answer"], calls=[])
    if set(value) == {"calls"} and isinstance(value["calls"], list) and value["calls"]:
        calls = [_call(item) for item in value["calls"]]
        if all(call is not None for call in calls):
            return StepReading(calls=[call for call in calls if call is not None])
        return None
    call = _call(value)
    return StepReading(calls=[call]) if call is not None else None


def _call(value: Any) -> tuple[str, dict[str, Any] | str] | None:
    if (
        not isinstance(value, dict)
        or set(value) - {"tool", "arguments"}
        or not isinstance(value.get("tool"), str)
    ):
        return None
    arguments = value.get("arguments", {})
    if isinstance(arguments, dict):
        return value["tool"], arguments
    return value["tool"], compact_json(arguments) if not isinstance(arguments, str) else arguments


_ANSWER_START = re.compile(r'\A\s*\{\s*"answer"\s*:\s*"')


def partial_answer(text: str) -> str | None:
    """The answer's text from a constrained answer cut off by the token limit (`{"answer": "Sunny, go`),
    or None when `text` is not the start of one."""
    start = _ANSWER_START.match(text)
    if start is None:
        return None
    body = text[start.end() :]
    for cut in range(len(body), max(-1, len(body) - 8), -1):  # an escape may be cut in the middle
        try:
            value = json.loads(f'"{body[:cut]}"')
        except ValueError:
            continue
        return value if isinstance(value, str) and value.strip() else None
    return None
