"""Pin other servers' tool definitions, and say exactly what drifted.

mcp-scan's "rug pull" check hashed the description only (md5), so a schema-only change - a new
`sidenote` parameter that leaks data - went unseen (ANCHORS.md). Here the pin is sha256 over the
RFC 8785 canonical JSON (the `rfc8785` package) of the *whole* definition a model or a policy
reads: name, title, description, inputSchema, outputSchema and annotations. Anything else a
server sends (`_meta`, icons, `execution`) is not part of the pin, because it does not change what
the tool means to the model or to maitre's policy.

The lockfile keeps each pinned definition beside its hash, so drift is shown as a field-by-field
diff (a unified diff of the text for descriptions and schemas), not as two opaque hashes.

Drift semantics (`check_drift`): a pinned tool whose hash matches is admitted; a changed tool and a
tool the lockfile has never seen are kept out until re-pinned; a pinned tool the server no longer
offers is reported. A server absent from the lockfile has every tool "added", so nothing of it is
admitted until someone runs `maitre mcp pin`.

Closed schemas (`closed_schema`): an imported tool's arguments are validated against its pinned
`inputSchema` *closed*. JSON Schema lets an object carry any extra property unless it says
otherwise, so a pinned `{"properties": {"city": ...}}` would still let a model (or an injection)
send `sidenote` to the upstream. Where the upstream says nothing about extra properties, maitre
treats the object as closed; an object the upstream declares open (`additionalProperties: true`
or a schema - a free-form map) stays open as declared.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import rfc8785

__all__ = [
    "DriftReport",
    "LOCKFILE_VERSION",
    "Lockfile",
    "PINNED_FIELDS",
    "ToolDrift",
    "check_drift",
    "closed_schema",
    "definition_hash",
    "pinned_definition",
]

PINNED_FIELDS: tuple[str, ...] = (
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
)
"""The fields of an MCP tool definition that the pin covers (wire names)."""

LOCKFILE_VERSION = 1

_INSTANCE_KEYS = ("additionalProperties", "items", "unevaluatedItems", "unevaluatedProperties")
"""Keywords whose subschema describes another value (a property's, an item's): closed in turn."""
_INSTANCE_MAPS = ("properties", "patternProperties")
_PART_LISTS = ("allOf", "anyOf", "oneOf")
"""In-place applicators: their subschemas describe *the same* value, so they are parts, not closed."""
_PART_KEYS = ("then", "else")
_DEF_MAPS = ("$defs", "definitions", "dependentSchemas")
_APPLICATORS = ("allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "then", "else", "dependentSchemas")


def _is_object_schema(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return (
        kind == "object"
        or (isinstance(kind, list) and "object" in kind)
        or "properties" in node
        or "patternProperties" in node
    )


def closed_schema(schema: Any, *, whole: bool = True) -> Any:
    """A copy of `schema` where every object that says nothing about extra properties is closed.

    A subschema that describes a whole value (the root, a property, an item, ...) gets
    `additionalProperties: false`, or `unevaluatedProperties: false` when it is assembled from parts
    (`allOf`/`anyOf`/`oneOf`/`$ref`/`if`...), so properties declared in the parts still count. The
    parts themselves and `$defs` entries (which are reached through `$ref`) are not closed, only
    the values nested in them; `not`, `if`, `contains` and `propertyNames` are left as written,
    since closing them would loosen or change what they mean.
    """
    if not isinstance(schema, Mapping):
        return schema
    node = dict(schema)
    for key in _INSTANCE_KEYS:
        if isinstance(node.get(key), Mapping):
            node[key] = closed_schema(node[key])
    if isinstance(node.get("prefixItems"), list):
        node["prefixItems"] = [closed_schema(item) for item in node["prefixItems"]]
    for key in _INSTANCE_MAPS:
        if isinstance(node.get(key), Mapping):
            node[key] = {name: closed_schema(sub) for name, sub in node[key].items()}
    for key in _PART_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [closed_schema(sub, whole=False) for sub in node[key]]
    for key in _PART_KEYS:
        if isinstance(node.get(key), Mapping):
            node[key] = closed_schema(node[key], whole=False)
    for key in _DEF_MAPS:
        if isinstance(node.get(key), Mapping):
            node[key] = {name: closed_schema(sub, whole=False) for name, sub in node[key].items()}
    if whole and "additionalProperties" not in node and "unevaluatedProperties" not in node:
        if any(key in node for key in _APPLICATORS):
            node["unevaluatedProperties"] = False
        elif _is_object_schema(node):
            node["additionalProperties"] = False
    return node


def pinned_definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a wire-shaped tool definition that is pinned (absent fields left out)."""
    return {key: tool[key] for key in PINNED_FIELDS if tool.get(key) is not None}


def definition_hash(tool: Mapping[str, Any]) -> str:
    """`sha256:` + hex digest of the RFC 8785 canonical JSON of the pinned definition."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(pinned_definition(tool))).hexdigest()


@dataclass(kw_only=True)
class ToolDrift:
    """One tool whose definition is not the pinned one."""

    name: str
    """The tool's name on the upstream server (not namespaced)."""
    kind: Literal["changed", "added", "removed"]
    """`changed`: pinned but different now; `added`: never pinned; `removed`: pinned, no longer offered."""
    fields: list[str] = field(default_factory=list)
    """For `changed`: which pinned fields differ (for example `["inputSchema"]`)."""
    diff: str = ""
    """A unified diff of the pinned and the offered definition, field by field."""

    def describe(self) -> str:
        if self.kind == "added":
            return f"{self.name}: new tool, not in the lockfile"
        if self.kind == "removed":
            return f"{self.name}: pinned, but the server no longer offers it"
        return f"{self.name}: changed ({', '.join(self.fields)})"


@dataclass(kw_only=True)
class DriftReport:
    """What `check_drift` found for one server."""

    server: str
    """The lockfile key of the server (the namespace it is imported under)."""
    admitted: list[str] = field(default_factory=list)
    """Tools whose definitions match their pins."""
    drift: list[ToolDrift] = field(default_factory=list)
    """Tools kept out (changed, added) and pins without a tool (removed)."""

    @property
    def blocked(self) -> list[str]:
        """Names of tools the server offers that are kept out."""
        return [d.name for d in self.drift if d.kind != "removed"]

    @property
    def clean(self) -> bool:
        return not self.drift

    def render(self) -> str:
        """A readable report: one line per drifted tool, then each diff."""
        if self.clean:
            return f"{self.server}: {len(self.admitted)} tool(s) match the lockfile"
        lines = [f"{self.server}: {len(self.blocked)} tool(s) kept out until re-pinned (`maitre mcp pin`)"]
        lines += ["  - " + d.describe() for d in self.drift]
        for d in self.drift:
            if d.diff:
                lines += ["", d.diff.rstrip("\n")]
        return "\n".join(lines)


def _pretty(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.splitlines() or [""]
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def _field_diff(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[list[str], str]:
    changed: list[str] = []
    chunks: list[str] = []
    for key in PINNED_FIELDS:
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        changed.append(key)
        chunks.extend(
            difflib.unified_diff(
                _pretty(before) if before is not None else [],
                _pretty(after) if after is not None else [],
                fromfile=f"pinned/{name}/{key}",
                tofile=f"offered/{name}/{key}",
                lineterm="",
            )
        )
    return changed, "\n".join(chunks)


class Lockfile:
    """A JSON lockfile of pinned tool definitions, per server.

    ```json
    {"version": 1, "servers": {"weather": {"source": "...", "pinned_at": 1764470000,
      "tools": {"get_forecast": {"sha256": "sha256:...", "definition": {...}}}}}}
    ```
    Writes are atomic (temporary file + rename), so a reader never sees half a lockfile.
    """

    def __init__(self, path: str | os.PathLike[str], data: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.data: dict[str, Any] = data if data is not None else {"version": LOCKFILE_VERSION, "servers": {}}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Lockfile:
        """Read `path`; a missing file is an empty lockfile (nothing pinned yet)."""
        p = Path(path)
        if not p.exists():
            return cls(p)
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != LOCKFILE_VERSION:
            raise ValueError(f"{p}: not a maitre MCP lockfile (version {LOCKFILE_VERSION} expected)")
        data.setdefault("servers", {})
        return cls(p, data)

    def servers(self) -> list[str]:
        return sorted(self.data["servers"])

    def pins(self, server: str) -> dict[str, dict[str, Any]]:
        """`{tool name: {"sha256": ..., "definition": ...}}` for one server (empty if unknown)."""
        entry = self.data["servers"].get(server) or {}
        return dict(entry.get("tools") or {})

    def pin(self, server: str, tools: Iterable[Mapping[str, Any]], *, source: str = "") -> None:
        """Replace the pins of `server` with these wire-shaped definitions."""
        pinned = {}
        for tool in tools:
            definition = pinned_definition(tool)
            pinned[str(tool["name"])] = {"sha256": definition_hash(definition), "definition": definition}
        self.data["servers"][server] = {
            "source": source,
            "pinned_at": int(time.time()),
            "tools": dict(sorted(pinned.items())),
        }

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def check_drift(server: str, offered: Iterable[Mapping[str, Any]], lockfile: Lockfile) -> DriftReport:
    """Compare the definitions a server offers now with its pins."""
    pins = lockfile.pins(server)
    report = DriftReport(server=server)
    seen: set[str] = set()
    for tool in offered:
        name = str(tool["name"])
        seen.add(name)
        pin = pins.get(name)
        if pin is None:
            report.drift.append(ToolDrift(name=name, kind="added", diff=_added_diff(name, tool)))
            continue
        if definition_hash(tool) == pin.get("sha256"):
            report.admitted.append(name)
            continue
        fields, diff = _field_diff(name, pin.get("definition") or {}, pinned_definition(tool))
        # A lockfile edited by hand can carry a hash that no longer matches its own definition.
        report.drift.append(ToolDrift(name=name, kind="changed", fields=fields or ["sha256"], diff=diff))
    for name in sorted(set(pins) - seen):
        report.drift.append(ToolDrift(name=name, kind="removed"))
    return report


def _added_diff(name: str, tool: Mapping[str, Any]) -> str:
    return "\n".join(
        difflib.unified_diff(
            [],
            _pretty(pinned_definition(tool)),
            fromfile="pinned/(none)",
            tofile=f"offered/{name}",
            lineterm="",
        )
    )
