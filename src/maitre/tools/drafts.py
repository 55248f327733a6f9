"""Read the JSON Schema dialects MCP servers send as the 2020-12 schema the gate validates with.

MCP's default dialect is 2020-12 and a schema may declare another with `$schema` (basic/index,
"JSON Schema Usage"). Real servers send draft-07 (zod-to-json-schema), draft-04 and OpenAPI 3.0
forms (boolean `exclusiveMinimum`, `nullable`), often without saying so. `normalise_schema` rewrites
such a schema into the 2020-12 schema that means the same thing, so one validator
(`Draft202012Validator`) serves every imported tool and a model always reads 2020-12:

- draft-04 `exclusiveMinimum: true` + `minimum: 5` -> `exclusiveMinimum: 5` (and the maximum twin);
  a boolean form is read this way in every dialect, since it has no other meaning;
- draft-04 `id` / draft-06/07 `$id` -> `$id`, and a fragment id (`#foo`) -> `$anchor`;
- `definitions` -> `$defs`, `dependencies` -> `dependentRequired` / `dependentSchemas` (2020-12
  ignores `dependencies`, which would silently let through what the author meant to refuse);
- array-form `items` -> `prefixItems`, with `additionalItems` becoming `items`;
- up to draft-07, keywords beside `$ref` are ignored, so they are dropped (annotations stay); a
  sibling `additionalProperties` becomes `unevaluatedProperties`, keeping the author's closed object;
- 2019-09 `$recursiveAnchor` / `$recursiveRef` -> `$dynamicAnchor` / `$dynamicRef`;
- OpenAPI 3.0 `nullable: true` (in a schema that declares no dialect, or draft-04) adds `"null"`
  to `type`, and so does Swagger 2.0's `x-nullable: true`;
- a `type` that no JSON Schema dialect defines but real catalogues write is read as the JSON type
  it names (`TYPE_ALIASES`): BFCL's `dict` / `float` / `tuple` / `any` and its Java and
  JavaScript spellings (`String`, `HashMap`, `ArrayList`, `long`, `double`, `char`), OpenAPI's
  format names used as types (`int32`, `int64`, `float`, `double`) and Swagger 2.0's `file`.
  `any` (and an empty type) means no type constraint, so the keyword is dropped. These are read
  in every dialect: such a type makes a schema invalid everywhere, so the rewrite takes no
  meaning away. A type that is neither a JSON type nor an alias is left as sent (and refused).

Every `$ref` is rewritten to point at the same place in the new schema. A schema that uses none
of these forms is left exactly as it is (the conformance suite checks that a client preserves
`$schema`, `$defs`, `$anchor`, `allOf`, `if`/`then`/`else`). A schema without `$schema` is
2020-12 unless it uses a form only an earlier draft has (a boolean bound: draft-04; array
`items`: draft-07). Keywords a draft does not define are kept, so 2020-12 reads them; a `$schema`
below the root is dropped (the root's dialect is the document's). The input is never changed: an
imported tool's pin is the definition as sent.

`schema_validator` builds the validator with a registry that never fetches: a `$ref` to a network
URI is not dereferenced (MCP: MUST NOT), and a schema whose `$ref` does not resolve inside itself
(or to a bundled meta-schema) is refused rather than treated as permissive. Size and depth are
bounded, so a hostile schema cannot exhaust the validator.

One difference cannot be written in 2020-12: draft-04 refuses `1.0` for `"type": "integer"`,
later drafts accept it (the same number).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from ..exceptions import ToolDefinitionError
from .schema import SCHEMA_DIALECT

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

__all__ = [
    "Dialect",
    "JSON_TYPES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
    "TYPE_ALIASES",
    "normalise_schema",
    "schema_dialect",
    "schema_validator",
]

Dialect = Literal["draft-04", "draft-06", "draft-07", "2019-09", "2020-12"]
"""The dialects a schema is read in (the others are refused as not supported)."""

MAX_SCHEMA_DEPTH = 64
"""JSON nesting levels a tool schema may have (objects and arrays)."""
MAX_SCHEMA_NODES = 100_000
"""JSON values a tool schema may hold in all."""

JSON_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
"""The seven types JSON Schema defines."""
TYPE_ALIASES: Mapping[str, str | None] = {
    "dict": "object",
    "hashmap": "object",
    "map": "object",
    "tuple": "array",
    "list": "array",
    "arraylist": "array",
    "set": "array",
    "float": "number",
    "double": "number",
    "decimal": "number",
    "int": "integer",
    "int32": "integer",
    "int64": "integer",
    "long": "integer",
    "short": "integer",
    "str": "string",
    "char": "string",
    "file": "string",
    "bool": "boolean",
    "none": "null",
    "any": None,
    "": None,
}
"""Type names real catalogues use that no JSON Schema dialect defines, read case-insensitively
(after the JSON types themselves: `String` is `string`), and the JSON type each means; None: no
type constraint (the keyword is dropped)."""

_LEGACY: frozenset[str] = frozenset({"draft-04", "draft-06", "draft-07"})
"""Dialects where `$ref` overrides its siblings."""
_SUPPORTED = "JSON Schema 2020-12 (the default), 2019-09, draft-07, draft-06 and draft-04"
_RECURSIVE_ANCHOR = "_recursive"

_SINGLE = frozenset(
    {
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose value is one schema (`items` and `additionalItems` are handled apart)."""
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAPS = frozenset({"$defs", "dependentSchemas", "patternProperties", "properties"})
_ANNOTATIONS = frozenset(
    {"$comment", "default", "deprecated", "description", "examples", "readOnly", "title", "writeOnly"}
)
_LEGACY_KEYWORDS = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "contentEncoding",
        "contentMediaType",
        "dependencies",
        "else",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "id",
        "$id",
        "if",
        "items",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "not",
        "nullable",
        "oneOf",
        "pattern",
        "patternProperties",
        "properties",
        "propertyNames",
        "required",
        "then",
        "type",
        "uniqueItems",
    }
)
"""The draft-04..07 keywords that a `$ref` beside them makes ignored (definitions stay: refs point there)."""


def schema_dialect(schema: Mapping[str, Any]) -> Dialect:
    """The dialect `schema` is read in: the one `$schema` names, else 2020-12 (MCP's default) unless
    the schema uses a form only an earlier draft has - boolean `exclusiveMinimum`/`exclusiveMaximum`
    (draft-04) or array-form `items` (draft-07) - which 2020-12 would refuse as invalid.

    Raises ToolDefinitionError for a dialect maitre does not read (draft-03, an unknown URI).
    """
    declared = schema.get("$schema")
    if declared is not None:
        return _declared(declared)
    forms = _legacy_forms(schema)
    if "boolean bound" in forms:
        return "draft-04"
    return "draft-07" if forms else "2020-12"


def _declared(uri: Any) -> Dialect:
    from jsonschema import (
        Draft3Validator,
        Draft4Validator,
        Draft6Validator,
        Draft7Validator,
        Draft201909Validator,
        Draft202012Validator,
    )
    from jsonschema.validators import validator_for

    if not isinstance(uri, str):
        raise ToolDefinitionError(f"$schema must be a URI string, not {type(uri).__name__}")
    dialects: dict[type[Any], Dialect] = {
        Draft4Validator: "draft-04",
        Draft6Validator: "draft-06",
        Draft7Validator: "draft-07",
        Draft201909Validator: "2019-09",
        Draft202012Validator: "2020-12",
    }
    # Draft-03 and unknown URIs alike are not read (draft-03 is the default so unknown ones come back as it).
    dialect = dialects.get(validator_for({"$schema": _canonical_uri(uri)}, default=Draft3Validator))
    if dialect is None:
        raise ToolDefinitionError(
            f"the schema's dialect {uri[:200]!r} is not supported: maitre reads {_SUPPORTED}"
        )
    return dialect


def _canonical_uri(uri: str) -> str:
    """The meta-schema URI as jsonschema knows it: drafts up to 07 on http, later ones on https."""
    text = uri.strip()
    parts = urlsplit(text)
    if parts.netloc.lower() != "json-schema.org" or parts.fragment:
        return text
    path = parts.path
    scheme = "http" if path.startswith("/draft-0") else "https"
    return f"{scheme}://json-schema.org{path}"


def _legacy_forms(schema: Mapping[str, Any]) -> set[str]:
    """Which pre-2019 forms appear at schema positions (iteratively: depth is checked later)."""
    found: set[str] = set()
    stack: list[Any] = [schema]
    seen = 0
    while stack and seen <= MAX_SCHEMA_NODES:
        node = stack.pop()
        seen += 1
        if not isinstance(node, Mapping):
            continue
        if isinstance(node.get("exclusiveMinimum"), bool) or isinstance(node.get("exclusiveMaximum"), bool):
            found.add("boolean bound")
        if isinstance(node.get("items"), list):
            found.add("array items")
        stack.extend(_subschemas(node))
    return found


def normalise_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The 2020-12 schema that means what `schema` means in its dialect (see the module docstring).

    Returns a new dict; `schema` is not changed. Normalising a normalised schema changes nothing.
    Raises ToolDefinitionError for an unsupported dialect or a schema past the size bounds.
    """
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(f"a tool's input schema must be a JSON object, not {type(schema).__name__}")
    _check_size(schema)
    dialect = schema_dialect(schema)
    declared = schema.get("$schema")
    out = _Normaliser(schema, dialect, openapi=declared is None or dialect == "draft-04").run()
    if not isinstance(out, dict):  # pragma: no cover - a mapping in, a mapping out
        raise ToolDefinitionError("a tool's input schema must be a JSON object")
    if dialect != "2020-12":
        out = {"$schema": SCHEMA_DIALECT, **{k: v for k, v in out.items() if k != "$schema"}}
    elif declared is not None:
        out = {"$schema": declared, **{k: v for k, v in out.items() if k != "$schema"}}
    return out


def _check_size(schema: Any) -> None:
    """Iteratively (no recursion, so a 10,000-level schema is refused, not a RecursionError)."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_NODES:
            raise ToolDefinitionError(f"the schema has more than {MAX_SCHEMA_NODES} values")
        if isinstance(node, Mapping | list):
            if depth > MAX_SCHEMA_DEPTH:
                raise ToolDefinitionError(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
            children = node.values() if isinstance(node, Mapping) else node
            stack.extend((child, depth + 1) for child in children)


def _copy(value: Any) -> Any:
    """A plain-JSON deep copy of a value that is not a schema (enum, const, default, required...)."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value


def _unescape(segment: str) -> str:
    return unquote(segment).replace("~1", "/").replace("~0", "~")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _renames_definitions(node: Mapping[str, Any]) -> bool:
    """`definitions` becomes `$defs` unless `$defs` is there too with a name in common."""
    defs = node.get("definitions")
    if not isinstance(defs, Mapping):
        return False
    other = node.get("$defs")
    if other is None:
        return True
    return isinstance(other, Mapping) and not (defs.keys() & other.keys())


def _alias(name: str) -> str | bool | None:
    """The JSON type `name` stands for, None for no constraint, False when it is not an alias."""
    lowered = name.strip().lower()
    if lowered in JSON_TYPES:
        return lowered
    return TYPE_ALIASES.get(lowered, False)


def _needs_alias(value: Any) -> bool:
    """A `type` value that holds a name other than the seven JSON types, which an alias may mend."""
    names = value if isinstance(value, list) else [value]
    return any(isinstance(n, str) and n not in JSON_TYPES and _alias(n) is not False for n in names)


def _json_type(value: Any) -> Any:
    """`type` with every alias read as its JSON type; None when the result constrains nothing."""
    if not isinstance(value, list):
        alias = _alias(value) if isinstance(value, str) else False
        return value if alias is False else alias
    kinds: list[Any] = []
    for item in value:
        alias = _alias(item) if isinstance(item, str) else False
        if alias is None:
            return None  # `any` in a union: anything goes
        kind = item if alias is False else alias
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def _is_schema(value: Any) -> bool:
    return isinstance(value, Mapping | bool)


class _Normaliser:
    def __init__(self, root: Mapping[str, Any], dialect: Dialect, *, openapi: bool) -> None:
        self.root = root
        self.dialect = dialect
        self.openapi = openapi
        self.legacy = dialect in _LEGACY
        self._id_keyword = "id" if dialect == "draft-04" else "$id"
        self.resources: dict[str, Mapping[str, Any]] = {}
        """Original resource roots by absolute URI (no fragment), for rewriting `$ref` pointers."""

    def run(self) -> Any:
        self._index(self.root, "")
        return self._schema(self.root, "", self.root, root=True)

    # -- identifiers and resources ------------------------------------------------------------

    def _identifier(self, node: Mapping[str, Any]) -> str | None:
        """The URI (without fragment) this node declares as its own, in the source dialect."""
        value = node.get(self._id_keyword)
        if not isinstance(value, str) or (self.legacy and "$ref" in node):
            return None
        url = urldefrag(value).url
        return url or None

    def _index(self, node: Any, base: str) -> None:
        if not isinstance(node, Mapping):
            return
        ident = self._identifier(node)
        if ident is not None or node is self.root:
            base = urljoin(base, ident) if ident else base
            self.resources.setdefault(base, node)
        for sub in _subschemas(node):
            self._index(sub, base)

    # -- the rewrite ------------------------------------------------------------------------------

    def _schema(self, node: Any, base: str, resource: Mapping[str, Any], *, root: bool = False) -> Any:
        if not isinstance(node, Mapping):
            return _copy(node)  # a boolean schema, or not a schema (the 2020-12 check says so)
        ident = self._identifier(node)
        if ident is not None:
            base = urljoin(base, ident)
            resource = node
        overridden = self.legacy and "$ref" in node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if overridden and key in _LEGACY_KEYWORDS:
                if key == "additionalProperties" and "unevaluatedProperties" not in node:
                    out["unevaluatedProperties"] = self._schema(value, base, resource)
                continue
            self._keyword(out, node, key, value, base, resource, root=root)
        nullable = "nullable" if "nullable" in node else ("x-nullable" if "x-nullable" in node else None)
        if self.openapi and nullable is not None and not overridden:
            out.pop(nullable, None)
            if node[nullable] is True and "type" in out:
                kind = out["type"]
                if isinstance(kind, str) and kind != "null":
                    out["type"] = [kind, "null"]
                elif isinstance(kind, list) and "null" not in kind:
                    out["type"] = [*kind, "null"]
        return out

    def _keyword(
        self,
        out: dict[str, Any],
        node: Mapping[str, Any],
        key: str,
        value: Any,
        base: str,
        resource: Mapping[str, Any],
        *,
        root: bool,
    ) -> None:
        sub = self._schema
        if key in _SINGLE:
            out[key] = sub(value, base, resource)
        elif key in _LISTS and isinstance(value, list):
            out[key] = [sub(item, base, resource) for item in value]
        elif key in _MAPS and isinstance(value, Mapping):
            converted = {name: sub(item, base, resource) for name, item in value.items()}
            if key == "dependentSchemas" and key in out:  # `dependencies` came first
                out[key] = _merge_dependent(converted, out[key])
            elif key == "$defs" and key in out:  # `definitions` came first, merged
                out[key] = {**out[key], **converted}
            else:
                out[key] = converted
        elif key == "items":
            if isinstance(value, list) and "prefixItems" not in node:
                out["prefixItems"] = [sub(item, base, resource) for item in value]
                if "additionalItems" in node:
                    out["items"] = sub(node["additionalItems"], base, resource)
            elif not isinstance(value, list):
                out["items"] = sub(value, base, resource)
            else:
                out["items"] = _copy(value)  # prefixItems and an array: not valid, said so later
        elif key == "additionalItems":
            pass  # read with array-form items (above); ignored otherwise, in every draft
        elif key == "definitions" and _renames_definitions(node):
            converted = {name: sub(item, base, resource) for name, item in value.items()}
            out["$defs"] = {**converted, **out.get("$defs", {})}
        elif key == "dependencies" and isinstance(value, Mapping):
            self._dependencies(out, value, base, resource)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value and _is_number(node.get(bound)):
                out[key] = node[bound]
                out.pop(bound, None)
        elif key in ("minimum", "maximum") and node.get(f"exclusive{key.capitalize()}") is True:
            if not _is_number(value):
                out[key] = _copy(value)
            # else: it became the exclusive bound
        elif key == "type" and _needs_alias(value):
            kind = _json_type(value)
            if kind is not None:
                out[key] = kind
        elif key == "$ref" and isinstance(value, str):
            self._ref(out, node, value, base, resource)
        elif key == "$recursiveRef" and isinstance(value, str):
            if resource.get("$recursiveAnchor") is True:
                out["$dynamicRef"] = f"#{_RECURSIVE_ANCHOR}"
            elif "$ref" in node:
                out.setdefault("allOf", []).append({"$ref": value})
            else:
                out["$ref"] = value
        elif key == "$recursiveAnchor":
            if value is True:
                out["$dynamicAnchor"] = _RECURSIVE_ANCHOR
        elif key == self._id_keyword and self.legacy and isinstance(value, str):
            self._legacy_id(out, node, value)
        elif key == "$id" and self.dialect == "draft-04":
            pass  # not a draft-04 keyword, dropped: kept, it would move the base URI of the refs below it
        elif key == "$schema":
            if root:
                out[key] = value  # replaced by the caller
        else:
            out[key] = _copy(value)

    def _legacy_id(self, out: dict[str, Any], node: Mapping[str, Any], value: str) -> None:
        url, fragment = urldefrag(value)
        if url and "$id" not in out:
            out["$id"] = url
        if fragment and "$anchor" not in node:
            out["$anchor"] = fragment

    def _dependencies(
        self, out: dict[str, Any], value: Mapping[str, Any], base: str, resource: Mapping[str, Any]
    ) -> None:
        required = {name: list(item) for name, item in value.items() if isinstance(item, list)}
        schemas = {
            name: self._schema(item, base, resource) for name, item in value.items() if _is_schema(item)
        }
        if required:
            merged = dict(out.get("dependentRequired", {}))
            for name, names in required.items():
                merged[name] = list(dict.fromkeys([*merged.get(name, []), *names]))
            out["dependentRequired"] = merged
        if schemas:
            out["dependentSchemas"] = _merge_dependent(out.get("dependentSchemas", {}), schemas)

    def _ref(self, out: dict[str, Any], node: Mapping[str, Any], ref: str, base: str, resource: Any) -> None:
        doc, fragment = urldefrag(urljoin(base, ref))
        target = self.resources.get(doc)
        if target is None or not fragment.startswith("/"):
            out["$ref"] = ref
            return
        new = self._pointer(target, fragment)
        out["$ref"] = ref if new == fragment else f"{ref.split('#', 1)[0]}#{new}"

    def _pointer(self, node: Any, fragment: str) -> str:
        """The same JSON pointer into the normalised resource (keywords renamed along the way)."""
        raw = fragment.split("/")[1:]
        out: list[str] = []
        i = 0
        cur: Any = node
        while i < len(raw):
            if not isinstance(cur, Mapping):
                break
            key = _unescape(raw[i])
            if self.legacy and "$ref" in cur and key in _LEGACY_KEYWORDS:
                break  # dropped with the other siblings of a draft-07 $ref
            name = _unescape(raw[i + 1]) if i + 1 < len(raw) else None
            if key == "definitions" and isinstance(cur.get(key), Mapping):
                out += ["$defs" if _renames_definitions(cur) else key, *raw[i + 1 : i + 2]]
                cur, i = cur[key].get(name) if name is not None else None, i + 2
            elif key == "dependencies" and isinstance(cur.get(key), Mapping) and name is not None:
                item = cur[key].get(name)
                if not _is_schema(item):
                    break
                out += ["dependentSchemas", raw[i + 1]]
                if isinstance(cur.get("dependentSchemas"), Mapping) and name in cur["dependentSchemas"]:
                    out += ["allOf", "1"]
                cur, i = item, i + 2
            elif key == "dependentSchemas" and isinstance(cur.get(key), Mapping) and name is not None:
                out += [key, raw[i + 1]]
                deps = cur.get("dependencies")
                if isinstance(deps, Mapping) and _is_schema(deps.get(name)):
                    out += ["allOf", "0"]
                cur, i = cur[key].get(name), i + 2
            elif key == "items" and isinstance(cur.get(key), list) and "prefixItems" not in cur:
                out += ["prefixItems", *raw[i + 1 : i + 2]]
                cur, i = _index_of(cur[key], name), i + 2
            elif key == "additionalItems" and isinstance(cur.get("items"), list):
                out.append("items")
                cur, i = cur.get(key), i + 1
            elif key in _SINGLE or key == "items":
                out.append(raw[i])
                cur, i = cur.get(key), i + 1
            elif key in _LISTS and isinstance(cur.get(key), list):
                out += raw[i : i + 2]
                cur, i = _index_of(cur[key], name), i + 2
            elif key in _MAPS and isinstance(cur.get(key), Mapping):
                out += raw[i : i + 2]
                cur, i = cur[key].get(name) if name is not None else None, i + 2
            else:
                break
        out += raw[i:]
        return "/" + "/".join(out) if raw else fragment


def _subschemas(node: Mapping[str, Any]) -> list[Any]:
    """The subschemas directly in `node`, under any dialect's keywords."""
    found: list[Any] = []
    for key, value in node.items():
        if key in _SINGLE or key in ("items", "additionalItems"):
            found.extend(value if isinstance(value, list) else [value])
        elif key in _LISTS and isinstance(value, list):
            found.extend(value)
        elif key in (*_MAPS, "definitions", "dependencies") and isinstance(value, Mapping):
            found.extend(v for v in value.values() if _is_schema(v))
    return found


def _index_of(items: list[Any], segment: str | None) -> Any:
    if segment is None or not segment.isdigit() or int(segment) >= len(items):
        return None
    return items[int(segment)]


def _merge_dependent(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """`dependentSchemas` from both spellings: a property named in both needs both schemas."""
    merged = dict(first)
    for name, schema in second.items():
        merged[name] = {"allOf": [merged[name], schema]} if name in merged else schema
    return merged


def schema_validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    """A 2020-12 validator for a normalised schema, refusing what cannot be validated safely.

    Raises ToolDefinitionError when the schema is not valid 2020-12, or a `$ref` / `$dynamicRef`
    does not resolve within the schema (a network URI is never fetched).
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    _check_size(schema)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.path)
        raise ToolDefinitionError(
            f"input schema is not valid JSON Schema: {exc.message[:300]}"
            + (f" (at /{where})" if where else "")
        ) from None
    except RecursionError:
        raise ToolDefinitionError("input schema nests too deeply to check") from None
    unresolved = _unresolved_refs(schema)
    if unresolved:
        shown = ", ".join(repr(ref[:120]) for ref in unresolved[:3])
        raise ToolDefinitionError(
            f"input schema has a $ref that does not resolve inside it ({shown}); maitre never fetches "
            "a schema from the network, and a reference it cannot follow would validate nothing"
        )
    # An empty registry: refs resolve inside the schema and to the bundled meta-schemas, never fetched.
    validator: Draft202012Validator = _validator_class()(dict(schema), registry=Registry())
    return validator


@cache
def _validator_class() -> type[Draft202012Validator]:
    """2020-12, reading numbers the way the gate decodes them: JSON text gives `Decimal`s, a Python
    caller floats. jsonschema's `multipleOf` divides the two (a TypeError), and its `integer` leaves
    out `Decimal("2.0")`, which 2020-12 counts as an integer (as it does the float 2.0)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    def is_integer(checker: Any, instance: Any) -> bool:
        if isinstance(instance, bool):
            return False
        if isinstance(instance, Decimal):
            return instance.is_finite() and instance == instance.to_integral_value()
        return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())

    types = Draft202012Validator.TYPE_CHECKER.redefine("integer", is_integer)
    cls: type[Draft202012Validator] = extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, validators={"multipleOf": _multiple_of}, type_checker=types
    )
    return cls


def _multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """`multipleOf` in exact decimal arithmetic (so 0.3 is a multiple of 0.1, as the schema means)."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "number") or not _is_number(divisor):
        return
    try:
        failed = Decimal(str(instance)) % Decimal(str(divisor)) != 0
    except (InvalidOperation, ArithmeticError, ValueError):
        failed = True  # too far apart to divide exactly: not provably a multiple
    if failed:
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


def _unresolved_refs(schema: Mapping[str, Any]) -> list[str]:
    """Every `$ref` / `$dynamicRef` that does not resolve the way the validator would follow it."""
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
    from referencing import Registry
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    resolver = REGISTRY.combine(Registry()).resolver_with_root(DRAFT202012.create_resource(schema))
    found: list[str] = []
    stack: list[tuple[Any, Any]] = [(schema, resolver)]
    while stack:
        node, here = stack.pop()
        if not isinstance(node, Mapping):
            continue
        here = here.in_subresource(DRAFT202012.create_resource(node))
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if isinstance(ref, str):
                try:
                    here.lookup(ref)
                except Unresolvable:
                    found.append(ref)
        stack.extend((sub, here) for sub in _subschemas(node))
    return found
