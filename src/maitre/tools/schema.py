"""Turn a typed Python function into a strict pydantic model and a JSON Schema (2020-12).

What the model sees is the schema, so it is made strict and short: `additionalProperties: false`
on every object, no pydantic titles, descriptions from `Annotated[..., Field(...)]` or the
docstring's parameter section (Google, NumPy or Sphinx style), enums from `Literal`, and
`Decimal` advertised as an exact decimal string with a pattern derived from `max_digits` /
`decimal_places` (money is never a float).

Parameters annotated with a context type (`Principal`, `RunContext`, ...) are not arguments: the
gate injects them, and they never appear in the schema.
"""

from __future__ import annotations

import inspect
import typing
from decimal import Decimal
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from ..exceptions import ToolDefinitionError

__all__ = ["SCHEMA_DIALECT", "build_input_model", "model_json_schema", "strict_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_Bound = Literal["gt", "ge", "lt", "le"]
_BOUND_TEXT: tuple[tuple[_Bound, str], ...] = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
_LOWER: tuple[_Bound, ...] = ("ge", "gt")
_UPPER: tuple[_Bound, ...] = ("le", "lt")


class _StrictSchema(GenerateJsonSchema):
    """Pydantic's generator, minus titles, with Decimal as an exact decimal string."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> dict[str, Any]:
        places = schema.get("decimal_places")
        digits = schema.get("max_digits")
        lower = schema.get("ge", schema.get("gt"))
        sign = "" if lower is not None and lower >= 0 else "-?"
        whole = r"\d+" if digits is None else r"\d{1,%s}" % max(digits - (places or 0), 1)  # noqa: UP031
        frac = r"(\.\d+)?" if places is None else (rf"(\.\d{{1,{places}}})?" if places else "")
        out: dict[str, Any] = {"type": "string", "pattern": f"^{sign}{whole}{frac}$"}
        bounds = []
        for key, text in _BOUND_TEXT:
            if schema.get(key) is not None:
                bounds.append(f"{text} {schema[key]}")
        note = "exact decimal as a string"
        if places is not None:
            note += f" with at most {places} decimal places"
        if bounds:
            note += ", " + " and ".join(bounds)
        out["x-decimal"] = note  # merged into the field's description by strict_schema
        out["examples"] = [_decimal_example(schema)]
        return out


def _decimal_example(schema: core_schema.DecimalSchema) -> str:
    places = schema.get("decimal_places")
    value = Decimal(10)
    for key in _LOWER:
        if schema.get(key) is not None and Decimal(str(schema[key])) >= value:
            value = Decimal(str(schema[key])) + 1
    for key in _UPPER:
        if schema.get(key) is not None and Decimal(str(schema[key])) <= value:
            value = Decimal(str(schema[key])) - Decimal("0.01")
    if places:
        return f"{value:.{places}f}"
    return str(value)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Close every object (additionalProperties false) and drop titles, in place; returns it."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("title", None)
            note = node.pop("x-decimal", None)
            if note:
                node["description"] = (
                    f"{node['description'].rstrip('.')}; {note}" if node.get("description") else note
                )
            if node.get("type") == "object" or "properties" in node:
                node.setdefault("additionalProperties", False)
            for key, value in node.items():
                if key in ("properties", "$defs", "patternProperties"):
                    for sub in value.values():
                        walk(sub)
                elif key in ("default", "examples", "const", "enum"):
                    continue
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return schema


def model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict 2020-12 schema of a pydantic model, as a model should see it."""
    schema = model.model_json_schema(schema_generator=_StrictSchema, mode="validation")
    schema = strict_schema(schema)
    return {"$schema": SCHEMA_DIALECT, **schema}


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and Optional wrappers to find the underlying class."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def build_input_model(
    fn: typing.Callable[..., Any],
    *,
    model_name: str,
    param_docs: dict[str, str],
    context_types: tuple[type, ...],
) -> tuple[type[BaseModel], dict[str, type]]:
    """Build the arguments model of `fn`; return it and the injected context parameters."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"cannot read the type hints of {fn.__qualname__}: {exc}") from exc
    fields: dict[str, Any] = {}
    context: dict[str, type] = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{fn.__qualname__} takes *{name}; a tool needs named, typed parameters so a schema can "
                "describe them"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"{fn.__qualname__}: parameter {name!r} is positional-only")
        annotation = hints.get(name, inspect.Parameter.empty)
        if annotation is inspect.Parameter.empty:
            raise ToolDefinitionError(
                f"{fn.__qualname__}: parameter {name!r} has no type annotation; add one so the model "
                "gets a typed schema"
            )
        base = _unwrap(annotation)
        if isinstance(base, type) and issubclass(base, context_types):
            context[name] = base
            continue
        default = param.default
        field_annotation = annotation
        doc = param_docs.get(name)
        if doc and not _has_description(annotation, default):
            field_annotation = Annotated[annotation, Field(description=doc)]
        if default is inspect.Parameter.empty:
            fields[name] = (field_annotation, ...)
        else:
            fields[name] = (field_annotation, default)
    model = create_model(
        model_name,
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False, populate_by_name=False),
        **fields,
    )
    return model, context


def _has_description(annotation: Any, default: Any) -> bool:
    if isinstance(default, FieldInfo) and default.description:
        return True
    if get_origin(annotation) is Annotated:
        return any(isinstance(meta, FieldInfo) and meta.description for meta in get_args(annotation)[1:])
    return False
