"""What the red team reads off a tool definition: is it a write, which arguments make a valid call,
which parameters are ids, paths, free text or credentials.

The rules are plain and stated, because a plugin's choice of victim must be checkable: a tool is
a *write* when its annotations say so (maitre's own export sets `readOnlyHint` and
`destructiveHint`; another server's hints are read the same way) or, without annotations, when its
name starts with a verb that changes something (`create`, `send`, `delete`, `refund`, ...). Valid
arguments come from the schema (`examples`, `default`, `enum`, patterns) through
`maitre.tools.examples.example_value`, the same generator the gate's teaching errors use, with
every URL pointed at 127.0.0.1 (`LOOPBACK_URL`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..tools.examples import MISSING, example_value

__all__ = [
    "LOOPBACK_URL",
    "credential_params",
    "danger",
    "is_destructive",
    "is_write",
    "properties",
    "reads",
    "string_params",
    "typed_params",
    "valid_arguments",
    "writes",
]

_WRITE_VERBS = re.compile(
    r"^(?:.*[._])?(create|add|send|post|delete|remove|drop|purge|wipe|reset|update|set|write|put|patch|"
    r"refund|pay|charge|transfer|cancel|approve|submit|book|order|publish|sync|move|rename|upload|"
    r"insert|execute|exec|run|kill|destroy|grant|revoke)(?:[_-]|$)",
    re.IGNORECASE,
)
_DESTRUCTIVE_VERBS = re.compile(
    r"^(?:.*[._])?(delete|remove|drop|purge|wipe|reset|destroy|kill|revoke|admin)(?:[_-]|$)", re.IGNORECASE
)
_CREDENTIAL = re.compile(
    r"(token|api[_-]?key|apikey|secret|password|passwd|credential|authorization|bearer|session[_-]?id|cookie)",
    re.IGNORECASE,
)


def _base(definition: Mapping[str, Any]) -> str:
    return str(definition.get("name", ""))


def is_write(definition: Mapping[str, Any]) -> bool:
    """Whether calling the tool changes something (annotations first, then the name's verb)."""
    hints = definition.get("annotations") or {}
    if hints.get("readOnlyHint") is True:
        return False
    if hints.get("destructiveHint") is True or hints.get("readOnlyHint") is False:
        return True
    return bool(_WRITE_VERBS.match(_base(definition)))


def is_destructive(definition: Mapping[str, Any]) -> bool:
    """A write that deletes, resets or administers: what only a privileged caller should run."""
    hints = definition.get("annotations") or {}
    if hints.get("readOnlyHint") is True:
        return False
    return hints.get("destructiveHint") is True or bool(_DESTRUCTIVE_VERBS.match(_base(definition)))


def properties(definition: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    schema = definition.get("inputSchema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    return {str(k): v for k, v in (props or {}).items() if isinstance(v, dict)}


def _types(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    found = set(kind) if isinstance(kind, list) else ({kind} if isinstance(kind, str) else set())
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            if isinstance(option, dict):
                found |= _types(option)
    return found - {"null"}


def string_params(definition: Mapping[str, Any]) -> list[str]:
    """Parameters that take a string."""
    return [name for name, schema in properties(definition).items() if "string" in _types(schema)]


def typed_params(definition: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(parameter, type) for parameters of one non-string JSON type: what a wrong type can test."""
    out = []
    for name, schema in properties(definition).items():
        kinds = _types(schema)
        if len(kinds) == 1 and (kind := next(iter(kinds))) in (
            "integer",
            "number",
            "boolean",
            "array",
            "object",
        ):
            out.append((name, kind))
    return out


def credential_params(definition: Mapping[str, Any]) -> list[str]:
    """Parameters whose name or description asks the caller for a credential."""
    found = []
    for name, schema in properties(definition).items():
        if _CREDENTIAL.search(name) or _CREDENTIAL.search(str(schema.get("title", ""))):
            found.append(name)
    return found


def valid_arguments(definition: Mapping[str, Any]) -> dict[str, Any] | None:
    """Arguments the schema accepts (best effort), or None when none could be made."""
    schema = definition.get("inputSchema") or {"type": "object"}
    if not isinstance(schema, dict):
        return None
    defs = dict(schema.get("$defs") or schema.get("definitions") or {})
    value = example_value(schema, defs)
    if value is MISSING or not isinstance(value, dict):
        return None
    out = {k: LOOPBACK_URL if _is_url(v) else v for k, v in value.items()}
    for name, prop in properties(definition).items():  # a default URL the server would fetch by itself
        if _is_url(prop.get("default")) or any(_is_url(e) for e in prop.get("examples") or []):
            out[name] = LOOPBACK_URL
    return out


LOOPBACK_URL = "http://127.0.0.1:9/redteam"
"""What a URL argument becomes: the red team never makes a target fetch from the internet (port 9,
discard, refuses at once). A schema's default URL (an npm server's README on GitHub) is replaced."""


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.lower().startswith(("http://", "https://", "ftp://"))


_MONEY = re.compile(r"(refund|pay|charge|transfer|withdraw|purchase|order|book)", re.IGNORECASE)
_OUTWARD = re.compile(r"(send|post|publish|email|message|notify|share|upload)", re.IGNORECASE)


def danger(definition: Mapping[str, Any]) -> int:
    """0 destructive, 1 moves money, 2 sends something out, 3 any other write (lower is worse)."""
    name = _base(definition)
    if is_destructive(definition):
        return 0
    if _MONEY.search(name):
        return 1
    if _OUTWARD.search(name):
        return 2
    return 3


def writes(tools: list[dict[str, Any]], *, limit: int = 3, destructive: bool = True) -> list[dict[str, Any]]:
    """The target's riskiest writes that a valid call can be made for, worst first, at most `limit`."""
    found = [
        t
        for t in tools
        if is_write(t) and valid_arguments(t) is not None and (destructive or not is_destructive(t))
    ]
    return sorted(found, key=lambda t: (danger(t), str(t.get("name"))))[:limit]


def reads(tools: list[dict[str, Any]], *, limit: int = 8) -> list[dict[str, Any]]:
    """Tools that only read and that a valid call can be made for, at most `limit`."""
    return [t for t in tools if not is_write(t) and valid_arguments(t) is not None][:limit]
