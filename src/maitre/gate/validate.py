"""Stage 4, validate: strict validation against the tool's schema, with teaching errors.

Validation is strict in JSON mode, whatever door the call came by: pydantic validates the JSON
text itself (`model_validate_json(..., strict=True)`), so no value changes type on the way in:
`true` is not 1, `"12"` is not 12, `12.0` is not an integer. Strings still carry what JSON has no
type for (datetimes, UUIDs, enums, exact decimals). Pydantic's strict *Python* mode is not used:
it refuses a string for a datetime or an enum, which is the only way JSON can send them.

What pydantic's JSON mode still accepts, and maitre does not: a float for a `Decimal` (see
`_inexact_numbers`). NaN, Infinity, `1e400`, lone surrogates and duplicate keys never get here:
the decode stage refuses them.

Each tool has a budget of invalid calls per run (default 3). When it runs out, the model is told
to stop retrying that tool, and later calls of that tool in the run are refused at once: small
local models otherwise resend variations of the same bad call until the step limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from ..jsonutil import canonical_json
from ..tools import Tool
from ..types import ErrorCode, ToolError
from .base import CallContext
from .decode import json_text
from .teaching import invalid_arguments, problems_from_jsonschema, problems_from_pydantic

__all__ = [
    "check_invalid_budget",
    "count_invalid",
    "invalid_budget_now",
    "strict_validate",
    "validate",
    "validate_arguments",
    "validate_now",
    "validate_step",
]

_TEXT = (str, bytes, bytearray)
_SAFE_INTEGER = 2**53 - 1
"""The largest integer every JSON parser keeps exactly (a double's mantissa; RFC 7493 I-JSON)."""


async def check_invalid_budget(ctx: CallContext) -> ToolError | None:
    """Refuse a tool whose invalid-call budget for this run is spent."""
    return invalid_budget_now(ctx)


def invalid_budget_now(ctx: CallContext) -> ToolError | None:
    """`check_invalid_budget` as a plain function (it never waits)."""
    assert ctx.tool is not None
    spent = ctx.run.invalid_calls[ctx.tool.name]
    budget = ctx.gate.limits.invalid_calls_per_tool
    if spent >= budget:
        return _budget_error(ctx.tool.name, spent)
    return None


def _ascii_patterns(tool: Tool) -> dict[str, re.Pattern[str]]:
    """Top-level string patterns that use \\d, \\w, \\s or \\b, compiled with ECMA-262's ASCII meaning.

    JSON Schema patterns are ECMA-262 regexes, where `\\d` is [0-9]. Python's and Rust's regex
    engines give `\\d` its Unicode meaning, so `^N-\\d{3}$` would accept full-width or Arabic-Indic
    digits - a confusable that slips past a pattern. maitre checks these fields again in ASCII mode.
    """
    cached = tool.__dict__.get("_ascii_cache")
    if cached is None:
        cached = {}
        for name, prop in tool.input_schema.get("properties", {}).items():
            pattern = prop.get("pattern") if isinstance(prop, dict) else None
            if pattern and re.search(r"\\[dwsbDWSB]", pattern):
                try:
                    cached[name] = re.compile(pattern, re.ASCII)
                except re.error:
                    continue
        tool.__dict__["_ascii_cache"] = cached
    return cached


async def validate(ctx: CallContext) -> ToolError | None:
    """The validate stage (see the module docstring)."""
    return validate_now(ctx)


def validate_now(ctx: CallContext) -> ToolError | None:
    """The validate stage as a plain function (it never waits)."""
    tool = ctx.tool
    assert tool is not None and ctx.arguments is not None
    if tool.input_model is not None:
        raw = ctx.call.arguments
        from_text = isinstance(raw, _TEXT) and bool(raw)
        # The JSON the caller sent: its own text, or (for a dict) the sorted-key JSON of the dict,
        # where a Python Decimal is the exact string the schema advertises.
        text = json_text(raw) if from_text else ctx.arguments_json  # type: ignore[arg-type]
        assert text is not None
        validated, problems = strict_validate(tool, ctx.arguments, text, from_text=from_text)
        if problems:
            sent = json.loads(text) if from_text else ctx.arguments  # JSON numbers stay numbers
            return invalid_arguments(tool, sent, problems)
        ctx.validated = validated
        return None
    validator = tool._validator
    if validator is not None:
        errors = sorted(validator.iter_errors(ctx.arguments), key=lambda e: list(e.absolute_path))
        if errors:
            return invalid_arguments(tool, ctx.arguments, problems_from_jsonschema(errors))
    ctx.validated = ctx.arguments
    return None


def validate_step(tool: Tool) -> Callable[[CallContext], ToolError | None]:
    """The validate stage specialised for one tool, for its plan: arguments without numbers, for a
    model with no pattern to re-check, go straight to pydantic-core's strict JSON validation;
    everything else (numbers, patterns, schema tools, an invalid call's teaching error) takes the
    general path, `validate_now`, so both give the same answer."""
    model = tool.input_model
    if model is None or _ascii_patterns(tool):
        return validate_now
    validator, closed = _json_validator(tool)
    extra: dict[str, Any] = {} if closed else {"extra": "forbid"}

    def step(ctx: CallContext) -> ToolError | None:
        text = ctx.arguments_json
        if text is None:
            raw = ctx.call.arguments
            text = raw if type(raw) is str and raw else None
        arguments = ctx.arguments
        if text is None or arguments is None or tool.input_model is not model or _has_numbers(arguments):
            return validate_now(ctx)
        try:
            ctx.validated = validator.validate_json(text, strict=True, **extra)
        except ValidationError:
            return validate_now(ctx)
        return None

    return step


def strict_validate(
    tool: Tool, arguments: dict[str, Any], text: str, *, from_text: bool
) -> tuple[Any, list[dict[str, Any]]]:
    """(validated model, []) or (None, problems) for a tool with an input model, in strict JSON mode.

    `text` is the JSON the caller sent (or the canonical JSON of `arguments`); every path that
    validates arguments - the stage, an approver's edited arguments - goes through here.
    """
    problems = _inexact_numbers(tool, arguments, from_text) if _has_numbers(arguments) else []
    validator, closed = _json_validator(tool)
    validated = None
    try:
        validated = (
            validator.validate_json(text, strict=True)
            if closed
            else validator.validate_json(text, strict=True, extra="forbid")
        )
    except ValidationError as exc:
        seen = {tuple(p["path"]) for p in problems}
        problems += [p for p in problems_from_pydantic(exc) if tuple(p["path"]) not in seen]
    patterns = _ascii_patterns(tool)
    if patterns and not problems:
        problems = [
            {"kind": "invalid", "path": (name,), "received": value, "message": ""}
            for name, rx in patterns.items()
            if isinstance(value := arguments.get(name), str) and not rx.search(value)
        ]
    return (None, problems) if problems else (validated, [])


def validate_arguments(tool: Tool, arguments: dict[str, Any]) -> tuple[Any, ToolError | None]:
    """Validate arguments that did not come through the decode stage (an approver's edits) exactly
    as the stage would: strict JSON mode for a model, the JSON Schema for a schema tool."""
    try:
        text = canonical_json(arguments)
    except (TypeError, ValueError, RecursionError):
        return None, ToolError(ErrorCode.INVALID_ARGUMENTS, f"The arguments for {tool.name} are not JSON.")
    if tool.input_model is not None:
        validated, problems = strict_validate(tool, json.loads(text), text, from_text=False)
        return (None, invalid_arguments(tool, arguments, problems)) if problems else (validated, None)
    validator = tool._validator
    if validator is not None:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            return None, invalid_arguments(tool, arguments, problems_from_jsonschema(errors))
    return arguments, None


def _json_validator(tool: Tool) -> tuple[Any, bool]:
    """The input model's pydantic-core validator, and whether it is closed without being told.

    Same as `model_validate_json(text, strict=True, extra="forbid")`, without the wrapper, and
    without the per-call `extra` override when nothing needs it: that override alone doubles the
    cost of a small validation. It is needed for nested models (a user's `RefundRequest` inside the
    arguments is open by default, and the override closes it), so the shortcut is taken only for a
    closed model with nothing nested (no `$defs` in its schema).
    """
    model = tool.input_model
    assert model is not None
    cached = tool.__dict__.get("_json_validator")
    if cached is None or cached[0] is not model:
        closed = model.model_config.get("extra") == "forbid" and not tool.input_schema.get("$defs")
        cached = (model, model.__pydantic_validator__, closed)
        tool.__dict__["_json_validator"] = cached
    return cached[1], cached[2]


def _inexact_numbers(tool: Tool, arguments: dict[str, Any], from_text: bool) -> list[dict[str, Any]]:
    """JSON numbers sent where the schema advertises an exact decimal string (a `Decimal` field).

    Pydantic's JSON mode turns the float `10.1` into `Decimal("10.1")`, but a float is never an
    exact amount: most JSON producers hold it as a binary double, so the digits the model meant may
    not be the digits that arrive. The schema says "exact decimal as a string", and a float is
    refused with that advice.

    An integer JSON number is accepted for a Decimal up to 2**53 - 1: an integer has no binary
    rounding, every JSON parser keeps it exact in that range, and `"amount": 100` is a common,
    unambiguous way to write a whole amount. Beyond that range JavaScript and other double-based
    parsers have already changed it, so it must come as a string.

    In arguments parsed from text a Decimal *is* a JSON float (decode parses floats as Decimal);
    in a dict from a Python caller a Decimal is an exact value (its canonical JSON is a string) and
    a float is the float.
    """
    schema = tool.input_schema
    props = schema.get("properties", {})
    todo = [(name, value) for name, value in arguments.items() if type(value) is not str and name in props]
    defs = schema.get("$defs", {})
    problems: list[dict[str, Any]] = []

    def walk(node: Any, value: Any, path: tuple[Any, ...]) -> None:
        node = _deref(node, defs)
        if not isinstance(node, dict):
            return
        if isinstance(value, dict):
            branch = _branch(node, "object", defs)
            if branch is None:
                return
            props = branch.get("properties", {})
            extra = branch.get("additionalProperties")
            for key, item in value.items():
                sub = props.get(key, extra if isinstance(extra, dict) else None)
                if sub is not None and not isinstance(item, str):
                    walk(sub, item, (*path, key))
        elif isinstance(value, list):
            branch = _branch(node, "array", defs)
            if branch is None:
                return
            prefix = branch.get("prefixItems") or []
            items = branch.get("items")
            for index, item in enumerate(value):
                sub = prefix[index] if index < len(prefix) else items if isinstance(items, dict) else None
                if sub is not None and not isinstance(item, str):
                    walk(sub, item, (*path, index))
        elif isinstance(value, bool):
            return
        elif isinstance(value, float) or (from_text and isinstance(value, Decimal)):
            if _string_only(node, defs):
                problems.append(_inexact(node, defs, path, value, "A JSON number with a fraction"))
        elif isinstance(value, int) and abs(value) > _SAFE_INTEGER and _string_only(node, defs):
            problems.append(_inexact(node, defs, path, value, "An integer this large"))

    for name, value in todo:
        walk(props[name], value, (name,))
    return problems


def _has_numbers(arguments: dict[str, Any]) -> bool:
    """False for the common call where every argument is a string: nothing for the exactness check."""
    for value in arguments.values():  # noqa: SIM110 - a loop is twice as fast as any() on the hot path
        if type(value) is not str:
            return True
    return False


def _deref(node: Any, defs: dict[str, Any]) -> Any:
    for _ in range(10):
        if not (isinstance(node, dict) and "$ref" in node):
            break
        node = defs.get(node["$ref"].rsplit("/", 1)[-1])
    return node


def _kinds(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    return set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()


def _branch(node: dict[str, Any], kind: str, defs: dict[str, Any]) -> dict[str, Any] | None:
    """The one branch of a (possibly union) schema that describes a value of this JSON kind."""
    options = node.get("anyOf") or node.get("oneOf")
    if not options:
        return node
    found = [
        opt
        for opt in (_deref(o, defs) for o in options)
        if isinstance(opt, dict) and (kind in _kinds(opt) or (kind == "object" and "properties" in opt))
    ]
    return found[0] if len(found) == 1 else None


def _string_only(node: dict[str, Any], defs: dict[str, Any]) -> bool:
    """True when the schema admits strings and no number at all (every union branch agrees)."""
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        branches = [_deref(o, defs) for o in options]
        live = [b for b in branches if isinstance(b, dict) and _kinds(b) != {"null"}]
        return bool(live) and all(_string_only(b, defs) for b in live)
    kinds = _kinds(node)
    return "string" in kinds and not kinds & {"number", "integer"}


def _inexact(
    node: dict[str, Any], defs: dict[str, Any], path: tuple[Any, ...], value: Any, what: str
) -> dict[str, Any]:
    examples = [
        ex
        for opt in (node.get("anyOf") or node.get("oneOf") or [node])
        for ex in (_deref(opt, defs) or {}).get("examples", [])
        if isinstance(ex, str)
    ]
    like = json.dumps(examples[0]) if examples else '"10.50"'
    return {
        "kind": "invalid",
        "path": path,
        "received": value,
        "message": f"{what} is not an exact decimal; send the amount as a string, like {like}",
    }


def count_invalid(ctx: CallContext, error: ToolError) -> ToolError:
    """Charge an INVALID_ARGUMENTS error to the tool's budget; the last one says stop."""
    if ctx.tool is None or error.code is not ErrorCode.INVALID_ARGUMENTS:
        return error
    ctx.run.invalid_calls[ctx.tool.name] += 1
    spent = ctx.run.invalid_calls[ctx.tool.name]
    if spent >= ctx.gate.limits.invalid_calls_per_tool:
        budget = _budget_error(ctx.tool.name, spent)
        budget.message = f"{error.message} {budget.message}"
        budget.details = {**error.details, **budget.details}
        budget.missing_fields = error.missing_fields
        return budget
    return error


def _budget_error(name: str, spent: int) -> ToolError:
    return ToolError(
        ErrorCode.BUDGET_EXCEEDED,
        f"{spent} invalid calls to {name} in this run: stop retrying {name}. Ask the user for the "
        "missing or correct information, or continue without this tool.",
        details={"budget": "invalid_calls", "tool": name, "spent": spent},
        user_fixable=True,
    )
