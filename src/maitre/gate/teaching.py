"""Errors that teach (seeds 000, 001, 003).

A model fixes its call in one step when the error says where it went wrong (the JSON path), what
was expected (type, pattern with a human hint, enum values, range, lengths), what it sent, and
shows a call that would pass. A bare "invalid input" makes it guess, or resend the same call.
"""

from __future__ import annotations

import difflib
import json
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from ..jsonutil import compact_json, json_type
from ..tools import Tool
from ..tools.examples import MISSING, example_value
from ..types import ErrorCode, ToolError

__all__ = [
    "closest",
    "describe_expected",
    "example_arguments",
    "example_call",
    "invalid_arguments",
    "json_path",
    "problems_from_jsonschema",
    "problems_from_pydantic",
    "schema_at",
]

_MAX_SHOWN = 80


def closest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """Names most like `name`, comparing full names and the part after the namespace."""
    if not candidates:
        return []
    scores: dict[str, float] = {}
    base = name.rsplit(".", 1)[-1].replace("__", ".").rsplit(".", 1)[-1]
    for candidate in candidates:
        cand_base = candidate.rsplit(".", 1)[-1]
        score = max(
            difflib.SequenceMatcher(None, name.lower(), candidate.lower()).ratio(),
            difflib.SequenceMatcher(None, base.lower(), cand_base.lower()).ratio(),
        )
        if score >= 0.6:
            scores[candidate] = score
    return sorted(scores, key=lambda c: (-scores[c], c))[:n]


def _shown(value: Any) -> str:
    if isinstance(value, Decimal):  # a JSON number parsed exactly (arguments sent as text)
        return str(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 1] + "…" + f" ({len(text):,} characters)"
    return text


def schema_at(schema: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any] | None:
    """The sub-schema at a pydantic error location (following $ref, items and anyOf)."""
    defs = schema.get("$defs", {})
    node: dict[str, Any] | None = schema
    for part in path:
        node = _deref(node, defs)
        if node is None:
            return None
        if isinstance(part, int):
            node = node.get("items") if isinstance(node.get("items"), dict) else None
        elif "properties" in node and part in node["properties"]:
            node = node["properties"][part]
        else:
            options = node.get("anyOf") or node.get("oneOf") or []
            node = next(
                (
                    opt_props[part]
                    for opt in options
                    if (opt_props := (_deref(opt, defs) or {}).get("properties", {})) and part in opt_props
                ),
                None,
            )
    return _deref(node, defs)


def _deref(node: dict[str, Any] | None, defs: dict[str, Any]) -> dict[str, Any] | None:
    seen = 0
    while node is not None and "$ref" in node and seen < 10:
        node = defs.get(node["$ref"].rsplit("/", 1)[-1])
        seen += 1
    return node


def describe_expected(node: dict[str, Any] | None) -> str:
    """A short human description of what a schema accepts."""
    if not node:
        return "a valid value"
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    if "const" in node:
        return f"exactly {json.dumps(node['const'])}"
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        parts = [describe_expected(opt) for opt in options if opt.get("type") != "null"]
        nullable = any(opt.get("type") == "null" for opt in options)
        text = " or ".join(dict.fromkeys(parts))
        return text + (" (or null)" if nullable else "")
    kind = node.get("type", "value")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    article = "an" if str(kind)[:1] in "aeiou" else "a"
    text = f"{article} {kind}"
    if node.get("format") and node.get("format") != "decimal":
        text += f" in {node['format']} format"
    if "pattern" in node:
        text += f" matching the pattern {node['pattern']}"
    bounds = []
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if key in node:
            bounds.append(f"{word} {node[key]}")
    if bounds:
        text += " " + " and ".join(bounds)
    if "minLength" in node or "maxLength" in node:
        low, high = node.get("minLength"), node.get("maxLength")
        if low is not None and high is not None:
            text += f" of {low} to {high} characters"
        elif low is not None:
            text += f" of at least {low} characters"
        else:
            text += f" of at most {high} characters"
    if "minItems" in node or "maxItems" in node:
        text += f" with {node.get('minItems', 0)} to {node.get('maxItems', 'any number of')} items"
    hint = node.get("description")
    if hint:
        text += f" ({hint.rstrip('.')})"
    example = example_value(node)
    if example is not MISSING and not hint:
        text += f", for example {json.dumps(example, ensure_ascii=False)}"
    return text


def example_call(tool: Tool, sent: dict[str, Any] | None = None, bad: set[str] | None = None) -> str | None:
    """A call that passes validation: the model's valid values kept, only what is wrong or missing filled.

    See `example_arguments`; `bad` (top-level names the error found wrong) is used only when the
    arguments cannot be repaired field by field.
    """
    repaired = example_arguments(tool, sent or {})
    if repaired is not None:
        return f"{tool.name}({compact_json(repaired[0])})"
    return _example_from_scratch(tool, sent, bad)


def example_arguments(tool: Tool, sent: dict[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """The model's arguments made valid with as few changes as possible, and the JSON paths of the
    values maitre made up (placeholders), or None when no valid arguments can be built.

    - every value the model sent that validates stays as it was (a refund's amount of "1200.00"
      is not replaced by an example's "10.00");
    - fields the model wrote flat that belong in a nested object (`amount` beside `order_id`
      where the schema wants `refund.amount`) are moved into it;
    - unknown fields are dropped, and so is a wrong value of an optional field;
    - a wrong or missing required value is filled: a free string with `<name>` (which no one
      mistakes for data), anything else with a value its schema accepts, listed as a placeholder.
    """
    schema = tool.input_schema
    defs = schema.get("$defs", {})
    try:
        candidate = _initial_arguments(schema, sent)
    except (TypeError, ValueError, AttributeError):  # not JSON-ready, or not an object at all
        return None
    filled: dict[str, int] = {}
    for _ in range(16):
        problems = _problems(tool, candidate)
        if problems is None:
            return None
        if not problems:
            return candidate, [where for where in filled]
        changed = False
        for problem in problems:
            path = _schema_path(schema, tuple(problem["path"]))
            if not path:
                return None
            if problem["kind"] == "unknown":
                changed |= _delete_at(candidate, path)
                continue
            if problem["kind"] == "invalid" and not _required(schema, path):
                changed |= _delete_at(candidate, path)
                continue
            where = json_path(path)
            attempt = filled.get(where, 0)
            filled[where] = attempt + 1
            value = _placeholder(schema_at(schema, path), str(path[-1]), defs, attempt)
            if value is MISSING:
                return None
            changed |= _set_at(candidate, path, value)
        if not changed:
            return None
    return None


def _initial_arguments(schema: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties", {})
    defs = schema.get("$defs", {})
    candidate: dict[str, Any] = {name: json.loads(compact_json(value)) for name, value in sent.items()}
    loose = {name: value for name, value in candidate.items() if name not in props}
    for name, node in props.items():
        nested = _object_schema(node, defs)
        if nested is None or not loose:
            continue
        fields = {key: loose[key] for key in nested.get("properties", {}) if key in loose}
        if not fields:
            continue
        current = candidate.get(name)
        if current is None:
            candidate[name] = fields
        elif isinstance(current, dict):
            candidate[name] = {**fields, **current}
        else:
            continue
        for key in fields:
            candidate.pop(key, None)
            loose.pop(key, None)
    return candidate


def _object_schema(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema a property holds (through $ref and an Optional's anyOf), or None."""
    target = _deref(node, defs)
    if target is None:
        return None
    if "properties" in target:
        return target
    for option in target.get("anyOf") or target.get("oneOf") or []:
        inner = _deref(option, defs)
        if inner is not None and "properties" in inner:
            return inner
    return None


def _problems(tool: Tool, arguments: dict[str, Any]) -> list[dict[str, Any]] | None:
    """What validation finds wrong in `arguments` ([] when they pass), or None when it cannot tell."""
    try:
        if tool.input_model is not None:
            try:
                tool.input_model.model_validate_json(compact_json(arguments), strict=True, extra="forbid")
            except ValidationError as exc:
                return problems_from_pydantic(exc)
            return []
        validator = tool._validator
        if validator is not None:
            return problems_from_jsonschema(list(validator.iter_errors(arguments)))
    except (TypeError, ValueError):
        return None
    return []


def _schema_path(schema: dict[str, Any], path: tuple[Any, ...]) -> tuple[Any, ...]:
    """`path` cut where it stops naming the schema's fields (pydantic adds union tags and the like)."""
    for index in range(len(path), 0, -1):
        if schema_at(schema, path[:index]) is not None:
            return path[:index]
    return ()


def _required(schema: dict[str, Any], path: tuple[Any, ...]) -> bool:
    if isinstance(path[-1], int):
        return True
    parent = schema_at(schema, path[:-1]) if len(path) > 1 else _deref(schema, schema.get("$defs", {}))
    if parent is None:
        return True
    required = parent.get("required")
    if required is None:
        nested = _object_schema(parent, schema.get("$defs", {}))
        required = nested.get("required", []) if nested else []
    return path[-1] in required


def _placeholder(node: dict[str, Any] | None, name: str, defs: dict[str, Any], attempt: int) -> Any:
    if node is None:
        return MISSING
    free = node.get("type") == "string" and not any(
        key in node for key in ("pattern", "enum", "const", "format", "examples", "default")
    )
    if free and attempt == 0:
        return f"<{name}>"
    return example_value(node, defs)


def _container(arguments: Any, path: tuple[Any, ...]) -> Any:
    node = arguments
    for part in path[:-1]:
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return None
            node = node[part]
        else:
            if not isinstance(node, dict):
                return None
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
    return node


def _set_at(arguments: dict[str, Any], path: tuple[Any, ...], value: Any) -> bool:
    node = _container(arguments, path)
    last = path[-1]
    if isinstance(node, dict) and isinstance(last, str):
        if last in node and node[last] == value and type(node[last]) is type(value):
            return False
        node[last] = value
        return True
    if isinstance(node, list) and isinstance(last, int) and last < len(node):
        if node[last] == value and type(node[last]) is type(value):
            return False
        node[last] = value
        return True
    return False


def _delete_at(arguments: dict[str, Any], path: tuple[Any, ...]) -> bool:
    node = _container(arguments, path)
    last = path[-1]
    if isinstance(node, dict) and last in node:
        del node[last]
        return True
    return False


def _example_from_scratch(tool: Tool, sent: dict[str, Any] | None, bad: set[str] | None) -> str | None:
    """The earlier way: keep top-level fields not named wrong, fill the required rest with examples."""
    schema = tool.input_schema
    props = schema.get("properties", {})
    defs = schema.get("$defs", {})
    arguments: dict[str, Any] = {}
    for name in props:
        if sent and name in sent and name not in (bad or set()):
            arguments[name] = sent[name]
        elif name in schema.get("required", []):
            value = example_value(props[name], defs)
            if value is MISSING:
                return None
            arguments[name] = value
    if not _validates(tool, arguments):
        return None
    return f"{tool.name}({compact_json(arguments)})"


def _validates(tool: Tool, arguments: dict[str, Any]) -> bool:
    validator = tool._validator
    try:
        if tool.input_model is not None:  # as strict as the validate stage: JSON mode, no coercion
            tool.input_model.model_validate_json(compact_json(arguments), strict=True, extra="forbid")
            return True
        if validator is not None:
            return bool(validator.is_valid(arguments))
    except (ValidationError, TypeError, ValueError):
        return False
    return True


def invalid_arguments(tool: Tool, sent: dict[str, Any], problems: list[dict[str, Any]]) -> ToolError:
    """Build the teaching INVALID_ARGUMENTS error from normalised problems.

    A problem is `{"kind": "missing" | "unknown" | "invalid", "path": tuple, "received": Any,
    "message": str}`.
    """
    allowed = tool.argument_names
    lines: list[str] = []
    missing: list[str] = []
    fields: list[dict[str, Any]] = []
    bad: set[str] = set()
    suggestions: list[str] = []
    for problem in problems:
        path = problem["path"]
        where = json_path(path)
        node = schema_at(tool.input_schema, path)
        top = path[0] if path else None
        if isinstance(top, str):
            bad.add(top)
        if problem["kind"] == "unknown":
            name = str(path[-1]) if path else "?"
            guess = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
            hint = f" Did you mean '{guess[0]}'?" if guess else ""
            if guess:
                suggestions.append(guess[0])
            allowed_text = ", ".join(allowed) if allowed else "none"
            lines.append(f"Unknown argument '{name}' at {where}.{hint} Allowed arguments: {allowed_text}.")
            fields.append({"path": where, "problem": "unknown"})
        elif problem["kind"] == "missing":
            missing.append(where.removeprefix("$."))
            lines.append(f"Missing required argument {where}: expected {describe_expected(node)}.")
            fields.append({"path": where, "problem": "missing", "expected": describe_expected(node)})
        else:
            expected = describe_expected(node)
            received = problem["received"]
            lines.append(
                f"{where}: expected {expected}; received {_shown(received)} ({json_type(received)})."
                + (f" {problem['message']}." if problem.get("message") else "")
            )
            fields.append(
                {
                    "path": where,
                    "problem": "invalid",
                    "expected": expected,
                    "received": _shown(received),
                }
            )
    repaired = example_arguments(tool, sent)
    placeholders: list[str] = []
    if repaired is not None:
        example: str | None = f"{tool.name}({compact_json(repaired[0])})"
        placeholders = repaired[1]
    else:
        example = _example_from_scratch(tool, sent, bad)
    text = f"Invalid arguments for {tool.name}. " + " ".join(lines)
    if example:
        text += f" A valid call looks like: {example}."
        if placeholders:
            text += (
                f" In it, {', '.join(placeholders)} {'is a placeholder' if len(placeholders) == 1 else 'are placeholders'}"
                " maitre made up: send the real value, not the example's."
            )
    text += " Fix the arguments and call again."
    details: dict[str, Any] = {"fields": fields}
    if example:
        details["example"] = example
        if placeholders:
            details["placeholders"] = placeholders
    return ToolError(
        ErrorCode.INVALID_ARGUMENTS,
        text,
        details=details,
        missing_fields=missing,
        suggestions=suggestions,
    )


def json_path(path: tuple[Any, ...]) -> str:
    """`$.items[2].sku` for the path ("items", 2, "sku")."""
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def problems_from_pydantic(exc: ValidationError) -> list[dict[str, Any]]:
    """Normalise pydantic's error list (type, loc, msg, input) into problems."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            problems.append({"kind": "unknown", "path": loc, "received": err.get("input")})
        elif kind == "missing":
            problems.append({"kind": "missing", "path": loc, "received": None})
        else:
            received = err.get("input")
            problems.append(
                {
                    "kind": "invalid",
                    "path": loc,
                    "received": received,
                    "message": _strict_hint(kind, received) or _clean_message(err.get("msg", "")),
                }
            )
    return problems


def _strict_hint(kind: str, received: Any) -> str:
    """What to send instead, for the errors of strict JSON validation (no coercion between types)."""
    if kind in ("int_type", "float_type", "int_parsing", "float_parsing", "int_from_float"):
        if isinstance(received, bool):
            return f"A boolean ({json.dumps(received)}) is not a number; send a number"
        if isinstance(received, str):
            try:
                number = Decimal(received.strip())
            except ArithmeticError:
                return ""
            if not number.is_finite() or number.adjusted() > 30:  # never build a huge int to show it
                return ""
            if kind.startswith("int") and number != number.to_integral_value():
                return "Send a whole number, without quotes"
            shown = str(int(number)) if kind.startswith("int") else received.strip()
            return f"Numbers are not coerced from strings: send {shown} without quotes"
        if kind.startswith("int") and isinstance(received, float | Decimal):
            return "Send a whole number, without a fractional part"
    if kind == "bool_type":
        return "Send true or false, without quotes"
    return ""


def _clean_message(message: str) -> str:
    # Pydantic's message repeats what "expected" already says; keep the specific part only.
    message = message.rstrip(".")
    for generic in ("Input should be a valid", "String should match pattern", "Input should be '"):
        if message.startswith(generic):
            return ""
    return message


def problems_from_jsonschema(errors: list[Any]) -> list[dict[str, Any]]:
    """Normalise jsonschema errors (imported tools) into problems."""
    problems = []
    for err in errors:
        path = tuple(err.absolute_path)
        if err.validator == "required":
            for name in err.validator_value:
                if isinstance(err.instance, dict) and name not in err.instance:
                    problems.append({"kind": "missing", "path": (*path, name), "received": None})
        elif err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = set(err.schema.get("properties", {}))
            for name in err.instance:
                if name not in allowed:
                    problems.append(
                        {"kind": "unknown", "path": (*path, name), "received": err.instance[name]}
                    )
        else:
            problems.append({"kind": "invalid", "path": path, "received": err.instance, "message": ""})
    return problems
