"""Stage 4, validate: strict validation against the tool's schema, with teaching errors.

Each tool has a budget of invalid calls per run (default 3). When it runs out, the model is told
to stop retrying that tool, and later calls of that tool in the run are refused at once: small
local models otherwise resend variations of the same bad call until the step limit.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from ..tools import Tool
from ..types import ErrorCode, ToolError
from .base import CallContext
from .teaching import invalid_arguments, problems_from_jsonschema, problems_from_pydantic

__all__ = ["check_invalid_budget", "count_invalid", "validate"]


async def check_invalid_budget(ctx: CallContext) -> ToolError | None:
    """Refuse a tool whose invalid-call budget for this run is spent."""
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
    tool = ctx.tool
    assert tool is not None and ctx.arguments is not None
    if tool.input_model is not None:
        try:
            ctx.validated = tool.input_model.model_validate(ctx.arguments, extra="forbid")
        except ValidationError as exc:
            return invalid_arguments(tool, ctx.arguments, problems_from_pydantic(exc))
        patterns = _ascii_patterns(tool)
        if patterns:
            problems = [
                {"kind": "invalid", "path": (name,), "received": value, "message": ""}
                for name, rx in patterns.items()
                if isinstance(value := ctx.arguments.get(name), str) and not rx.search(value)
            ]
            if problems:
                ctx.validated = None
                return invalid_arguments(tool, ctx.arguments, problems)
        return None
    validator = tool._validator
    if validator is not None:
        errors = sorted(validator.iter_errors(ctx.arguments), key=lambda e: list(e.absolute_path))
        if errors:
            return invalid_arguments(tool, ctx.arguments, problems_from_jsonschema(errors))
    ctx.validated = ctx.arguments
    return None


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
