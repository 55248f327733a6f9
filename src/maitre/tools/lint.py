"""Lint tool definitions for the anti-patterns the seeds name.

The model never sees your code, only the definition, so a definition is a prompt (seed 000). The
checks: a description that does not say when to use the tool and when not to; free-form strings
with no pattern, enum, format or length; money as a float; a tool that both reads and writes; a
name that is not verb-first; two tools that overlap; a parameter that keeps the tool out of OpenAI
strict mode (an open object such as a free `dict`, or a value of any type), which the export then
sends with `strict: false`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ..types import Effect
from .export import openai_strict_problems
from .tool import Tool
from .toolbox import Toolbox

__all__ = ["Finding", "lint_toolbox"]

_USE = re.compile(
    r"\b(use (it|this|this tool)?\s*(when|for|to|before|after|if|only)|use when|call (it|this) when|"
    r"when the user|useful when|use for)\b",
    re.I,
)
_DONT = re.compile(
    r"\b(do not use|don't use|not for|never use|avoid using|instead use|use \w+ instead|not to be used|"
    r"do not call|don't call|does not)\b",
    re.I,
)
_MONEY = re.compile(
    r"(amount|price|cost|total|fee|balance|refund|payment|salary|wage|usd|inr|eur|gbp|money|budget|tax)",
    re.I,
)
_READ_VERBS = {"get", "read", "fetch", "list", "search", "find", "lookup", "look", "query", "check", "show"}
_WRITE_VERBS = {
    "update", "set", "create", "delete", "remove", "write", "save", "send", "issue", "cancel", "book",
    "add", "put", "post", "patch", "modify", "upsert", "insert", "change", "edit", "refund", "charge",
}  # fmt: skip
_VAGUE = {"process", "handle", "manage", "do", "run_action", "execute", "perform", "misc", "helper", "util"}
_VERBS = _READ_VERBS | _WRITE_VERBS | {
    "start", "stop", "open", "close", "move", "copy", "rename", "load", "forget", "summarize", "summarise",
    "translate", "notify", "draft", "estimate", "resolve", "assign", "archive", "restore", "enable",
    "disable", "count", "compare", "analyze", "analyse", "extract", "parse", "format", "render", "track",
    "subscribe", "unsubscribe", "register", "publish", "share", "invite", "reply", "forward", "mark", "tag",
    "rate", "review", "report", "request", "reserve", "return", "exchange", "ship", "apply", "attach",
    "merge", "split", "sort", "filter", "describe", "explain", "predict", "recommend", "suggest", "test",
    "deploy", "build", "install", "call", "email", "message", "ping", "connect", "ask", "answer", "echo",
    "sum", "calculate", "compute", "convert", "generate", "make", "plan", "schedule", "submit", "approve",
    "deny", "pay", "transfer", "upload", "download", "export", "import", "sync", "validate", "verify",
    "reset", "play", "record", "watch", "login", "logout", "tell", "learn", "dial", "text", "fix", "scan",
    "pin", "grant", "revoke", "lock", "unlock", "trigger", "retry", "confirm", "detect", "classify",
    "score", "rank", "match", "resize", "crop", "encode", "decode", "hash", "sign", "reindex",
}  # fmt: skip


@dataclass(kw_only=True)
class Finding:
    """One lint finding."""

    tool: str
    """Canonical tool name (or "a + b" for a pair)."""
    code: str
    """Stable identifier of the check, e.g. `free-form-string`."""
    message: str
    severity: str = "warning"

    def __str__(self) -> str:
        return f"{self.tool}: [{self.code}] {self.message}"


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w.lower() for w in re.split(r"[_\-\s.]+", spaced) if w]


def _properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    defs = schema.get("$defs", {})

    def walk(node: dict[str, Any], prefix: str) -> None:
        if "$ref" in node:
            node = defs.get(node["$ref"].rsplit("/", 1)[-1], {})
        for name, sub in node.get("properties", {}).items():
            path = f"{prefix}{name}"
            if "$ref" in sub:
                walk(sub, path + ".")
                continue
            options = sub.get("anyOf") or [sub]
            for option in options:
                if option.get("type") == "object" or "properties" in option or "$ref" in option:
                    walk(option, path + ".")
                elif option.get("type") == "array" and isinstance(option.get("items"), dict):
                    out.append((path + "[]", option["items"]))
                elif option.get("type") != "null":
                    out.append((path, option))

    walk(schema, "")
    return out


def _check_tool(tool: Tool) -> list[Finding]:
    found: list[Finding] = []
    desc = tool.description or ""
    if not desc.strip():
        found.append(
            Finding(tool=tool.name, code="no-description", message="has no description", severity="error")
        )
    else:
        if not _USE.search(desc):
            found.append(
                Finding(
                    tool=tool.name, code="no-when-to-use", message="description does not say when to use it"
                )
            )
        if not _DONT.search(desc):
            found.append(
                Finding(
                    tool=tool.name,
                    code="no-when-not-to-use",
                    message="description does not say when NOT to use it",
                )
            )
    for path, prop in _properties(tool.input_schema):
        kind = prop.get("type")
        leaf = path.rstrip("[]").rsplit(".", 1)[-1]
        if kind == "string" and not any(
            key in prop for key in ("pattern", "enum", "const", "format", "maxLength")
        ):
            found.append(
                Finding(
                    tool=tool.name,
                    code="free-form-string",
                    message=f"argument {path!r} is a free-form string: add a pattern, enum, format or maxLength",
                )
            )
        if kind == "number" and _MONEY.search(leaf):
            found.append(
                Finding(
                    tool=tool.name,
                    code="float-money",
                    message=f"argument {path!r} looks like money but is a float: use Decimal",
                    severity="error",
                )
            )
    found.extend(_strict_findings(tool))
    words = _words(tool.base_name)
    if words and (words[0] not in _VERBS or words[0] in _VAGUE):
        found.append(
            Finding(
                tool=tool.name,
                code="not-verb-first",
                message=f"name {tool.base_name!r} should start with a verb (get_, list_, create_, ...)",
            )
        )
    reads = set(words) & _READ_VERBS
    writes = set(words) & _WRITE_VERBS
    if (reads and writes) or {"upsert"} & set(words) or tool.base_name.startswith(("get_or_", "fetch_or_")):
        found.append(
            Finding(
                tool=tool.name,
                code="reads-and-writes",
                message="reads and writes in one tool: split it so approval can apply to the write only",
            )
        )
    elif words and words[0] in _WRITE_VERBS and tool.effect is Effect.READ:
        found.append(
            Finding(
                tool=tool.name,
                code="effect-mismatch",
                message=f"name starts with {words[0]!r} but effect is 'read': declare effect='write'",
            )
        )
    return found


def _strict_findings(tool: Tool) -> list[Finding]:
    """Why the OpenAI export of this tool is not strict, for the reasons the author would fix.

    Optional parameters and constraints such as `pattern` also keep a tool non-strict, but they are
    deliberate (and the other checks ask for patterns), so only open objects and untyped values
    are findings."""
    found: list[Finding] = []
    for problem in openai_strict_problems(tool.input_schema):
        what = f"parameter `{problem.path}`" if problem.path else "the arguments object"
        if problem.kind == "open-object":
            found.append(
                Finding(
                    tool=tool.name,
                    code="open-object",
                    message=f"{what} is an open object: OpenAI strict mode needs every object closed; "
                    "exported with strict: false",
                )
            )
        elif problem.kind == "untyped":
            found.append(
                Finding(
                    tool=tool.name,
                    code="untyped-value",
                    message=f"{what} accepts a value of any type: OpenAI strict mode needs a type for "
                    "every value; exported with strict: false",
                )
            )
    return found


def _tokens(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def _overlaps(a: Tool, b: Tool) -> bool:
    da, db = _tokens(a.description), _tokens(b.description)
    desc_sim = len(da & db) / max(len(da | db), 1)
    pa, pb = set(a.argument_names), set(b.argument_names)
    same_args = bool(pa) and pa == pb
    na, nb = set(_words(a.base_name)), set(_words(b.base_name))
    name_sim = len(na & nb) / max(len(na | nb), 1)
    return desc_sim >= 0.6 or (same_args and name_sim >= 0.5 and a.effect == b.effect)


def lint_toolbox(box: Toolbox) -> list[Finding]:
    """Every finding for every tool, then the overlapping pairs."""
    findings: list[Finding] = []
    tools = box.tools()
    for tool in tools:
        findings.extend(_check_tool(tool))
    for a, b in combinations(tools, 2):
        if _overlaps(a, b):
            findings.append(
                Finding(
                    tool=f"{a.name} + {b.name}",
                    code="overlapping-tools",
                    message="these tools look alike: merge them or make their descriptions say which to use",
                )
            )
    return findings
