"""The edit-arguments form: HTML fields generated from a tool's JSON Schema, read back as JSON.

`build_form(schema, arguments)` turns the schema into `FormField`s (strings, numbers, integers,
booleans, enums, exact decimals, optional fields, nested objects as fieldsets, arrays as rows)
and `read_form(schema, fields)` turns a submitted form back into a JSON value with the types the
schema asks for. Both walk the same schema the same way, so a form submitted unchanged reads back
as the arguments it was built from. Nothing here decides whether the value is valid: the gate's
own validation does (see `decide.check_edit`), and its teaching errors are placed next to the
fields with `place_errors`.

Names are paths: `args.address.city`, `args.items.0.sku` (each segment percent-escaped, so a
property called `a.b` cannot pose as a nested one). Names starting with `!` are the form's own
controls: `!rows:NAME` (how many rows an array rendered), `!set:NAME` (an optional object is
given), `!remove:NAME` (drop this row). An array is rendered with its items plus one empty row,
and `add a row` re-renders it with one more; a row left blank is no item.

What a form cannot show faithfully - a union of objects, a map (`additionalProperties` as a
schema), tuples, a value that does not fit its schema, a `$ref` it cannot resolve - becomes a JSON
textarea for that field; a schema that is not an object of properties is edited as JSON whole.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, unquote

__all__ = [
    "Change",
    "EditForm",
    "FieldError",
    "FieldKind",
    "FormField",
    "MAX_JSON_DEPTH",
    "MAX_ROWS",
    "Option",
    "ROOT",
    "build_form",
    "diff_arguments",
    "field_messages",
    "json_path",
    "place_errors",
    "read_form",
    "read_json",
]

ROOT = "args"
"""The name every argument field starts with (so no argument can collide with `csrf` or `note`)."""
MAX_ROWS = 200
"""The most rows an array renders or reads back (a forged `!rows:` count cannot make more)."""
MAX_JSON_DEPTH = 64
"""The deepest nesting typed JSON may have (the gate refuses far less deep values anyway)."""
_MAX_DEPTH = 12

FieldKind = Literal[
    "text", "decimal", "integer", "number", "boolean", "choice", "multichoice", "object", "array", "json"
]


class _Missing:
    """No value: the field was left empty (or is absent from the arguments)."""

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


@dataclass(frozen=True)
class Option:
    """One choice of a `<select>`: the submitted text and what a person reads."""

    value: str
    label: str


@dataclass(kw_only=True)
class FormField:
    """One field of the edit form (an input, a select, a fieldset or a list of rows)."""

    name: str
    """The HTML name, a path under `args`."""
    path: tuple[str | int, ...]
    """The JSON path of the value (`("items", 0, "sku")`)."""
    label: str
    kind: FieldKind
    required: bool = False
    """The schema requires the key (an empty input is then sent as an empty value, and refused if wrong)."""
    optional: bool = False
    """An empty input means the key is absent (or null where the schema allows null)."""
    nullable: bool = False
    """The schema allows null: an empty input is sent as null."""
    description: str = ""
    hint: str = ""
    """What the schema expects, in a few words (type, pattern, bounds)."""
    value: str = ""
    """The text shown in a text input or a JSON textarea; a select's chosen option."""
    checked: bool = False
    """A checkbox is ticked."""
    chosen: tuple[str, ...] = ()
    """The options chosen in a multiple select."""
    present: bool = True
    """An optional object is given (its `!set:` box is ticked)."""
    options: list[Option] = field(default_factory=list)
    children: list[FormField] = field(default_factory=list)
    """An object's properties, or an array's rows."""
    row_of: str = ""
    """For a row: the array's name (a row can be removed)."""
    error: str = ""
    """The gate's teaching error for this value, placed here after an invalid edit."""
    why_json: str = ""
    """Why this value is edited as JSON."""

    @property
    def where(self) -> str:
        return json_path(self.path)

    @property
    def if_empty(self) -> str:
        """What leaving the field empty sends ('' when it is required and takes no null)."""
        if self.kind in ("boolean", "object", "array"):
            return ""  # a checkbox is never empty (unticked is false); fieldsets say it themselves
        return "null" if self.nullable else "left out" if self.optional else ""


@dataclass(kw_only=True)
class EditForm:
    """The form for one tool's arguments: fields, or (when the schema does not allow a form) JSON."""

    fields: list[FormField] | None
    """None when the whole arguments are edited as JSON."""
    json_text: str = ""
    """The arguments as JSON (the whole-JSON editor's text)."""
    why_json: str = ""
    """Why the arguments are edited as JSON."""
    errors: list[str] = field(default_factory=list)
    """Errors not placed next to a field."""

    @property
    def as_json(self) -> bool:
        return self.fields is None


@dataclass(frozen=True)
class FieldError:
    """A value the form could not read (malformed JSON in a JSON field): no call can be built."""

    where: str
    message: str


@dataclass(frozen=True)
class Change:
    """One difference between the model's arguments and the edited ones."""

    where: str
    """JSON path (`$.items[0].qty`)."""
    kind: Literal["changed", "added", "removed"]
    old: Any = None
    new: Any = None

    @property
    def old_text(self) -> str:
        return _shown(self.old) if self.kind != "added" else ""

    @property
    def new_text(self) -> str:
        return _shown(self.new) if self.kind != "removed" else ""


def json_path(path: Sequence[str | int]) -> str:
    """`$.items[2].sku` for ("items", 2, "sku") - the gate's teaching errors write paths this way."""
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _segment(part: str | int) -> str:
    return str(part) if isinstance(part, int) else quote(part, safe="")


def _name(path: Sequence[str | int]) -> str:
    return ".".join([ROOT, *(_segment(p) for p in path)])


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# ------------------------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class _Node:
    """A schema resolved for the form: its kind, whether null is allowed, and the schema itself."""

    kind: FieldKind
    schema: Mapping[str, Any]
    nullable: bool = False
    why_json: str = ""


def _deref(node: Any, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    seen = 0
    while isinstance(node, Mapping) and "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or seen > 20:
            return None
        target: Any = None
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                defs = root.get(prefix[2:-1], {})
                target = defs.get(unquote(ref[len(prefix) :]).replace("~1", "/").replace("~0", "~"))
        if not isinstance(target, Mapping):
            return None
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **extra} if extra else target
        seen += 1
    return node if isinstance(node, Mapping) else None


def _types(node: Mapping[str, Any]) -> list[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _resolve(raw: Any, root: Mapping[str, Any]) -> _Node:
    node = _deref(raw, root)
    if node is None:
        return _Node("json", {}, why_json="its schema refers to a definition the form cannot find")
    nullable = False
    all_of = node.get("allOf")
    if all_of is not None:
        if not (isinstance(all_of, list) and len(all_of) == 1):
            return _Node("json", node, why_json="it combines several schemas (allOf)")
        inner = _deref(all_of[0], root)
        if inner is None:
            return _Node("json", node, why_json="its schema refers to a definition the form cannot find")
        node = {**inner, **{k: v for k, v in node.items() if k != "allOf"}}
    union = node.get("anyOf", node.get("oneOf"))
    if union is not None:
        branches = [_deref(b, root) for b in union] if isinstance(union, list) else [None]
        if any(b is None for b in branches):
            return _Node("json", node, why_json="its schema refers to a definition the form cannot find")
        live = [b for b in branches if b is not None and _types(b) != ["null"]]
        nullable = len(live) < len(branches)
        siblings = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        if len(live) == 1:
            inner_node = _resolve({**live[0], **siblings}, root)
            return _Node(
                inner_node.kind,
                inner_node.schema,
                True if nullable else inner_node.nullable,
                inner_node.why_json,
            )
        kinds = sorted({k for b in live for k in _types(b)})
        if kinds == ["number", "string"] and all(len(_types(b)) == 1 for b in live):
            # pydantic's Decimal: a JSON number or an exact decimal string; the form keeps the string
            text = next(b for b in live if _types(b) == ["string"])
            return _Node("decimal", {**text, **siblings}, nullable)
        return _Node("json", node, nullable, why_json="it accepts values of several shapes")
    kinds = _types(node)
    if "null" in kinds:
        nullable = True
        kinds = [k for k in kinds if k != "null"]
    if "enum" in node or "const" in node:
        values = node["enum"] if "enum" in node else [node["const"]]
        if isinstance(values, list) and values and all(_scalar(v) for v in values):
            return _Node("choice", node, nullable or None in values)
        return _Node("json", node, nullable, why_json="its choices are not plain values")
    if not kinds and "properties" in node:
        kinds = ["object"]
    if len(kinds) != 1:
        return _Node("json", node, nullable, why_json="its type is not one the form can show")
    kind = kinds[0]
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if (isinstance(extra, Mapping) and extra) or extra is True or "patternProperties" in node:
            return _Node("json", node, nullable, why_json="it takes keys of its own (a map)")
        if not isinstance(props, Mapping) or not props:
            return _Node("json", node, nullable, why_json="it is a free-form object")
        return _Node("object", node, nullable)
    if kind == "array":
        items = _deref(node.get("items"), root) if "items" in node else None
        if items is None or "prefixItems" in node:
            return _Node("json", node, nullable, why_json="its items have no single schema")
        item = _resolve(items, root)
        if item.kind == "choice" and not item.nullable and node.get("uniqueItems"):
            return _Node("multichoice", node, nullable)
        return _Node("array", node, nullable)
    if kind == "string":
        return _Node("decimal" if _is_decimal(node) else "text", node, nullable)
    if kind in ("integer", "number", "boolean"):
        return _Node(kind, node, nullable)  # type: ignore[arg-type]
    return _Node("json", node, nullable, why_json="its type is not one the form can show")


def _is_decimal(node: Mapping[str, Any]) -> bool:
    """A string that holds an exact decimal (maitre's and pydantic's Decimal schemas)."""
    return node.get("format") == "decimal" or "exact decimal" in str(node.get("description", ""))


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _hint(node: _Node) -> str:
    schema = node.schema
    words = {
        "text": "text",
        "decimal": "an exact decimal, kept as written",
        "integer": "a whole number",
        "number": "a number",
        "boolean": "yes or no",
        "choice": "one of the choices",
        "multichoice": "any of the choices",
        "object": "",
        "array": "a list (a blank row is no item)",
        "json": "JSON",
    }
    parts = [words[node.kind]] if words[node.kind] else []
    if "pattern" in schema:
        parts.append(f"pattern {schema['pattern']}")
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if key in schema:
            parts.append(f"{word} {schema[key]}")
    for key, word in (("minLength", "at least"), ("maxLength", "at most")):
        if key in schema:
            parts.append(f"{word} {schema[key]} characters")
    for key, word in (("minItems", "at least"), ("maxItems", "at most")):
        if key in schema:
            parts.append(f"{word} {schema[key]} items")
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        parts.append(f"e.g. {examples[0]}")
    return ", ".join(str(p) for p in parts)


def _options(node: _Node) -> list[Option]:
    schema = node.schema
    values = schema["enum"] if "enum" in schema else [schema["const"]]
    return [Option(_shown(v), v if isinstance(v, str) else _shown(v)) for v in values]


def _fits(node: _Node, value: Any) -> bool:
    """Whether `value` can be shown by this kind of field without losing anything."""
    if value is _MISSING or (value is None and node.nullable):
        return True
    match node.kind:
        case "text" | "decimal":
            return isinstance(value, str) or (node.kind == "decimal" and _number(value))
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return _number(value)
        case "boolean":
            return isinstance(value, bool)
        case "choice":
            return _shown(value) in {o.value for o in _options(node)}
        case "multichoice":
            return isinstance(value, list) and all(_scalar(v) for v in value)
        case "object":
            props = node.schema.get("properties", {})
            return isinstance(value, dict) and all(key in props for key in value)
        case "array":
            return isinstance(value, list) and len(value) < MAX_ROWS
    return True


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------- build


def build_form(
    schema: Mapping[str, Any] | None,
    arguments: Any,
    *,
    submitted: Mapping[str, Sequence[str]] | None = None,
    add_row: str | None = None,
    force_json: bool = False,
) -> EditForm:
    """The form for `arguments` under `schema` (None: the tool is unknown, so JSON only).

    With `submitted` (a form sent back), every input shows what was typed, rows left blank or
    removed are dropped and the rest numbered again (as `read_form` numbers the items), and the
    array named `add_row` gets one more empty row.
    """
    text = json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)
    if schema is None:
        return EditForm(fields=None, json_text=text, why_json="the console does not have this tool's schema")
    if force_json:
        return EditForm(fields=None, json_text=text, why_json="you asked to edit the arguments as JSON")
    node = _resolve(schema, schema)
    if node.kind != "object" or not isinstance(arguments, dict) or not _fits(node, arguments):
        why = node.why_json or "the arguments are not an object of named fields"
        return EditForm(fields=None, json_text=text, why_json=why)
    builder = _Builder(schema, submitted, add_row)
    return EditForm(fields=builder.properties(node, arguments, (), ROOT), json_text=text)


@dataclass
class _Builder:
    root: Mapping[str, Any]
    submitted: Mapping[str, Sequence[str]] | None
    add_row: str | None

    def properties(self, node: _Node, value: Any, path: tuple[str | int, ...], src: str) -> list[FormField]:
        props: Mapping[str, Any] = node.schema.get("properties", {})
        required = set(node.schema.get("required", []))
        given = value if isinstance(value, dict) else {}
        return [
            self.field(
                sub,
                given.get(key, _MISSING),
                (*path, key),
                key,
                required=key in required,
                src=f"{src}.{_segment(key)}",
            )
            for key, sub in props.items()
        ]

    def first(self, name: str) -> str | None:
        values = (self.submitted or {}).get(name)
        return values[0] if values else None

    def field(
        self,
        raw: Any,
        value: Any,
        path: tuple[str | int, ...],
        label: str,
        *,
        required: bool,
        src: str,
        row_of: str = "",
    ) -> FormField:
        """The field at `path`; `src` is its name in the submitted form (rows may be renumbered)."""
        node = _field_node(raw, self.root, path, required=required, in_row=bool(row_of))
        sent = self.submitted is not None
        if sent and node.kind != "json" and self.first("!json:" + src) is not None:
            node = _Node("json", node.schema, node.nullable, why_json="it was edited as JSON")
        if not sent and not _fits(node, value):
            node = _Node("json", node.schema, node.nullable, why_json="its value does not fit its schema")
        name = _name(path)
        made = FormField(
            name=name,
            path=path,
            label=str(node.schema.get("title") or label),
            kind=node.kind,
            required=required,
            optional=not required or node.nullable,
            nullable=node.nullable,
            description=str(node.schema.get("description", "")),
            hint=_hint(node),
            row_of=row_of,
            why_json=node.why_json,
        )
        match node.kind:
            case "text" | "decimal" | "integer" | "number":
                if sent:
                    made.value = self.first(src) or ""
                else:
                    made.value = "" if value is _MISSING or value is None else _text(value)
            case "boolean":
                made.checked = self.first(src) is not None if sent else value is True
            case "choice":
                made.options = _options(node)
                if sent:
                    made.value = self.first(src) or ""
                else:
                    made.value = (
                        "" if value is _MISSING or (value is None and node.nullable) else _shown(value)
                    )
                if made.optional or made.value not in {o.value for o in made.options}:
                    made.options.insert(0, Option("", "(none)" if made.optional else "(choose)"))
            case "multichoice":
                made.options = _options(_resolve(node.schema["items"], self.root))
                if sent:
                    made.chosen = tuple((self.submitted or {}).get(src, ()))
                else:
                    made.chosen = tuple(_shown(v) for v in value) if isinstance(value, list) else ()
            case "object":
                if sent:
                    made.present = not made.optional or self.first("!set:" + src) is not None
                else:
                    made.present = isinstance(value, dict)
                made.children = self.properties(node, value, path, src)
            case "array":
                if sent:
                    assert self.submitted is not None
                    sources = _kept_rows(self.submitted, src)
                    items: list[Any] = [_MISSING] * len(sources)
                else:
                    items = value if isinstance(value, list) else []
                    sources = [f"{src}.{i}" for i in range(len(items))]
                rows = len(items) + 1 + (1 if self.add_row == name else 0)
                made.children = [
                    self.field(
                        node.schema["items"],
                        items[i] if i < len(items) else _MISSING,
                        (*path, i),
                        f"{label}[{i}]",
                        required=True,
                        src=sources[i] if i < len(sources) else f"!new:{name}.{i}",
                        row_of=name,
                    )
                    for i in range(min(rows, MAX_ROWS))
                ]
            case "json":
                if sent:
                    made.value = self.first(src) or ""
                else:
                    made.value = "" if value is _MISSING else json.dumps(value, indent=2, ensure_ascii=False)
        return made


def _field_node(
    raw: Any, root: Mapping[str, Any], path: tuple[str | int, ...], *, required: bool, in_row: bool
) -> _Node:
    """The field's node as the form shows it (the builder and the reader must agree on this)."""
    node = _resolve(raw, root)
    if len(path) > _MAX_DEPTH:
        return _Node("json", node.schema, node.nullable, why_json="it is nested too deeply for a form")
    if node.kind == "boolean" and (in_row or (not required and "default" not in node.schema)):
        # a checkbox cannot say "absent": an optional yes/no (or one in a row) is a three-way choice
        return _Node("choice", {**node.schema, "enum": [True, False]}, True)
    return node


def _kept_rows(fields: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """The submitted rows of the array `name` that are items: not removed, not left blank."""
    count = _count(_first(fields, "!rows:" + name))
    return [
        row
        for row in (f"{name}.{index}" for index in range(count))
        if _first(fields, "!remove:" + row) is None and not _blank(fields, row)
    ]


def _first(fields: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = fields.get(name)
    return values[0] if values else None


def _blank(fields: Mapping[str, Sequence[str]], row: str) -> bool:
    """No value typed in the row: every input under it is empty (the form's controls do not count)."""
    return all(
        not any(v.strip() for v in values)
        for key, values in fields.items()
        if key == row or key.startswith(row + ".")
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# ---------------------------------------------------------------------------------------------- read


def read_form(
    schema: Mapping[str, Any], fields: Mapping[str, Sequence[str]]
) -> tuple[dict[str, Any], list[FieldError]]:
    """The JSON arguments a submitted edit form stands for, and the values that could not be read.

    `fields` holds every value of each name (`Console.form_lists`). Types follow the schema: an
    integer field's digits become an int, a number's a float or int, an exact decimal stays the
    string typed, a checkbox is true when ticked; an empty optional field is left out (or null).
    Text that is not the type asked for is passed on as typed, so the gate's validation says what
    is wrong with it. An empty field is null where the schema allows null, else absent (the
    tool's default applies).
    """
    reader = _Reader(schema, fields)
    node = _resolve(schema, schema)
    value = reader.properties(node, (), ROOT)
    return value, reader.problems


def read_json(text: str) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """The arguments typed in the whole-JSON editor (an object), or the reason they are not."""
    value, problem = _parse_json(text, "$")
    if problem is not None:
        return None, [problem]
    if not isinstance(value, dict):
        return None, [FieldError("$", "The arguments must be a JSON object ({...}).")]
    return value, []


@dataclass
class _Reader:
    root: Mapping[str, Any]
    fields: Mapping[str, Sequence[str]]
    problems: list[FieldError] = field(default_factory=list)

    def properties(self, node: _Node, path: tuple[str | int, ...], src: str) -> dict[str, Any]:
        props: Mapping[str, Any] = node.schema.get("properties", {})
        required = set(node.schema.get("required", []))
        out: dict[str, Any] = {}
        for key, sub in props.items():
            value = self.value(sub, (*path, key), f"{src}.{_segment(key)}", required=key in required)
            if value is not _MISSING:
                out[key] = value
        return out

    def value(
        self, raw: Any, path: tuple[str | int, ...], src: str, *, required: bool, in_row: bool = False
    ) -> Any:
        node = _field_node(raw, self.root, path, required=required, in_row=in_row)
        if node.kind != "json" and _first(self.fields, "!json:" + src) is not None:
            node = _Node("json", node.schema, node.nullable)
        empty: Any = None if node.nullable else _MISSING  # an empty field: null where allowed, else absent
        text = _first(self.fields, src)
        if text is None and node.kind in ("text", "decimal", "integer", "number", "choice", "json"):
            return _MISSING  # not on the form at all (a forged or partial form): left out
        match node.kind:
            case "text":
                if text is None:
                    return empty
                text = text.replace("\r\n", "\n")  # a textarea's lines come back as CRLF
                return empty if text == "" and (not required or node.nullable) else text
            case "decimal" | "integer" | "number":
                text = (text or "").strip()
                return empty if text == "" else _number_from(text, node.kind)
            case "boolean":
                return text is not None
            case "choice":
                return empty if not text else _choice_from(text, _options(node))
            case "multichoice":
                options = _options(_resolve(node.schema["items"], self.root))
                picked = set(self.fields.get(src, ()))
                chosen = [_choice_from(o.value, options) for o in options if o.value in picked]
                return empty if not chosen and not required else chosen
            case "object":
                if (not required or node.nullable) and _first(self.fields, "!set:" + src) is None:
                    return empty
                return self.properties(node, path, src)
            case "array":
                items: list[Any] = []
                for row in _kept_rows(self.fields, src):
                    item = self.value(
                        node.schema["items"], (*path, len(items)), row, required=True, in_row=True
                    )
                    if item is not _MISSING:
                        items.append(item)
                return empty if not items and not required else items
            case _:  # json
                if text is None or text.strip() == "":
                    return empty
                value, problem = _parse_json(text, json_path(path))
                if problem is not None:
                    self.problems.append(problem)
                    return _MISSING
                return value


def _parse_json(text: str, where: str) -> tuple[Any, FieldError | None]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        return None, FieldError(where, f"This is not valid JSON: {exc}.")
    except RecursionError:
        return None, FieldError(where, f"This JSON nests deeper than {MAX_JSON_DEPTH} levels.")
    if _deeper_than(value, MAX_JSON_DEPTH):
        return None, FieldError(where, f"This JSON nests deeper than {MAX_JSON_DEPTH} levels.")
    try:  # a `\ud800` escape alone decodes to a lone surrogate: no page, store or tool can carry it
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return None, FieldError(
            where, "This JSON has a lone surrogate escape (such as \\ud800), which is not text."
        )
    return value, None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` (walked without recursion)."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            todo.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            todo.extend((v, depth + 1) for v in item)
    return False


def _count(text: str | None) -> int:
    if text is None or not text.isdigit():
        return 0
    return min(int(text), MAX_ROWS)


_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _number_from(text: str, kind: str) -> Any:
    """An int or float from a number field; an exact decimal's text as typed; else the text itself."""
    if kind == "decimal":
        return text
    if _INTEGER.fullmatch(text):
        return int(text)
    if kind == "number" and _NUMBER.fullmatch(text):
        number = float(text)
        if math.isfinite(number):
            return number
    return text  # not a number: the gate's validation will say so, in its own words


def _choice_from(text: str, options: list[Option]) -> Any:
    for option in options:
        if option.value == text:
            return json.loads(option.value)
    return text  # not one of the choices (a forged form): the gate refuses it


# -------------------------------------------------------------------------------------------- errors


def field_messages(message: str, fields: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The gate's teaching message cut into one sentence per JSON path (`$.amount` -> its line).

    `fields` is the error's `details["fields"]` (path, problem), in the order the message names
    them; where a line cannot be found, what the details say stands in for it.
    """
    body = message
    for tail in (" A valid call looks like: ", " Fix the arguments and call again."):
        cut = body.rfind(tail)
        if cut != -1:
            body = body[:cut]
    starts: list[tuple[int, str]] = []
    cursor = 0
    for item in fields:
        where = str(item.get("path", "$"))
        marker = {
            "unknown": "Unknown argument '",
            "missing": f"Missing required argument {where}:",
        }.get(str(item.get("problem")), f"{where}: expected ")
        found = body.find(marker, cursor)
        if found == -1:
            starts.append((-1, where))
        else:
            starts.append((found, where))
            cursor = found + len(marker)
    out: dict[str, str] = {}
    located = [s for s, _ in starts if s != -1]
    for (start, where), item in zip(starts, fields, strict=True):
        if start == -1:
            line = _from_details(item)
        else:
            after = [s for s in located if s > start]
            line = body[start : after[0] if after else len(body)].strip()
        out[where] = f"{out[where]} {line}" if where in out else line
    return out


def _from_details(item: Mapping[str, Any]) -> str:
    problem = item.get("problem")
    if problem == "missing":
        return f"Missing: expected {item.get('expected', 'a value')}."
    if problem == "unknown":
        return "This argument is not part of the tool's schema."
    return f"Expected {item.get('expected', 'a valid value')}; received {item.get('received', '?')}."


def place_errors(form: EditForm, errors: Mapping[str, str]) -> None:
    """Put each error next to the field of its path (or its nearest shown ancestor, else on top)."""
    if form.fields is None:
        form.errors.extend(errors.values())
        return
    index: dict[str, FormField] = {}

    def walk(fields: list[FormField]) -> None:
        for item in fields:
            index[item.where] = item
            walk(item.children)

    walk(form.fields)
    for where, text in errors.items():
        target = where
        while target not in index and target != "$":
            target = _parent(target)
        if target in index:
            found = index[target]
            found.error = f"{found.error} {text}".strip()
        else:
            form.errors.append(text)


def _parent(where: str) -> str:
    cut = max(where.rfind("."), where.rfind("["))
    return where[:cut] if cut > 0 else "$"


# ---------------------------------------------------------------------------------------------- diff


def diff_arguments(old: Any, new: Any, path: tuple[str | int, ...] = ()) -> list[Change]:
    """What changed from the model's arguments to the edited ones, path by path (leaves only)."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[Change] = []
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in new:
                changes.append(Change(json_path((*path, key)), "removed", old=old[key]))
            elif key not in old:
                changes.append(Change(json_path((*path, key)), "added", new=new[key]))
            else:
                changes.extend(diff_arguments(old[key], new[key], (*path, key)))
        return changes
    if isinstance(old, list) and isinstance(new, list):
        changes = []
        for i in range(max(len(old), len(new))):
            if i >= len(new):
                changes.append(Change(json_path((*path, i)), "removed", old=old[i]))
            elif i >= len(old):
                changes.append(Change(json_path((*path, i)), "added", new=new[i]))
            else:
                changes.extend(diff_arguments(old[i], new[i], (*path, i)))
        return changes
    if _shown(old) == _shown(new):  # 1 and true, or 1 and 1.0, are different JSON
        return []
    return [Change(json_path(path), "changed", old=old, new=new)]
