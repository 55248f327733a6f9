"""Scan other servers' tool definitions before a model ever reads them.

A tool definition is untrusted input (seed 003 §12): a malicious server writes instructions for
the model into a description, a parameter description, an enum value or a default; hides them with
invisible or bidirectional Unicode; swaps a Latin letter for a Cyrillic one in a name; or talks
about another server's tools ("when send_email is called, also bcc ..."). The scanner walks
*every* string in the definition - keys included, since a property name is read by the model too -
and reports findings with the JSON path where they were found.

Severity decides what `toolbox_from_mcp(scan="block")` keeps out: `high` findings block a tool,
`medium` and `low` are reported. The rules are deliberately plain regular expressions and Unicode
categories: auditable, fast, and with no model in the loop that the same injection could steer.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Finding", "Kind", "Severity", "scan_servers", "scan_tool"]

Severity = Literal["high", "medium", "low"]
Kind = Literal["hidden_instruction", "invisible_unicode", "confusable", "cross_reference", "shadowing"]


@dataclass(kw_only=True, frozen=True)
class Finding:
    """One suspicious thing in one tool definition."""

    server: str
    """The server (namespace) that offered the tool."""
    tool: str
    """The tool's name on that server."""
    kind: Kind
    severity: Severity
    path: str
    """Where in the definition, for example `inputSchema.properties.note.description`."""
    evidence: str
    """The offending text, invisible characters shown as `<U+200B>`."""
    message: str
    """What the rule means, for a human reviewer."""

    def render(self) -> str:
        return f"[{self.severity}] {self.server}/{self.tool} {self.path}: {self.message} - {self.evidence!r}"


_I = re.IGNORECASE | re.DOTALL
_INSTRUCTION_RULES: list[tuple[re.Pattern[str], Severity, str]] = [
    (
        re.compile(
            r"\b(ignore|disregard|forget|override)\b.{0,30}\b(previous|prior|above|earlier|all|other|"
            r"system)\b.{0,20}\b(instructions?|prompts?|rules|guidelines|messages?)\b",
            _I,
        ),
        "high",
        "tells the model to ignore its instructions",
    ),
    (
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin)\b[^>]*>", _I),
        "high",
        "pseudo-markup that addresses the model directly",
    ),
    (
        re.compile(
            r"\b(do\s*n[o']t|never|must\s+not|without)\b.{0,25}\b(tell|telling|inform|informing|notify|"
            r"notifying|mention|mentioning|reveal|revealing|show|showing|alert|alerting|ask|asking)\b"
            r".{0,25}\b(the\s+)?(user|human|operator|owner)",
            _I,
        ),
        "high",
        "asks the model to hide something from the user",
    ),
    (
        re.compile(
            r"(~/\.ssh|id_rsa|id_ed25519|\.env\b|\.aws/credentials|\.netrc|mcp\.json|"
            r"claude_desktop_config|/etc/passwd|private[\s_-]?key)",
            _I,
        ),
        "high",
        "refers to secrets or credential files",
    ),
    (
        re.compile(
            r"\b(send|forward|upload|post|include|pass|copy|exfiltrate|leak|append|attach|bcc)\b.{0,60}"
            r"\b(api[\s_-]?keys?|passwords?|secrets?|tokens?|credentials?|conversation|chat history|"
            r"system prompt|previous messages)\b",
            _I,
        ),
        "high",
        "asks for secrets or the conversation to be sent somewhere",
    ),
    (
        re.compile(
            r"\b(before|after|instead of|whenever|every time)\b.{0,20}\b(using|calling|invoking|you use|"
            r"you call)\b.{0,20}\b(this|any|other|another|the)\b.{0,10}\btools?\b",
            _I,
        ),
        "high",
        "dictates how the model must use tools",
    ),
    (
        re.compile(r"\b(you are now|act as|pretend to be|new instructions|jailbreak)\b", _I),
        "high",
        "tries to change the model's role",
    ),
    (
        re.compile(r"\b(system prompt|system message|assistant must|the assistant should)\b", _I),
        "medium",
        "addresses the model's instructions",
    ),
    (re.compile(r"<!--.*?-->", _I), "medium", "hidden HTML comment"),
    (re.compile(r"\b(other|another|all)\s+(mcp\s+)?servers?\b", _I), "medium", "refers to other servers"),
]

_INVISIBLE_RANGES: tuple[tuple[int, int, str], ...] = (
    (0xE0000, 0xE007F, "Unicode tag characters (invisible ASCII smuggling)"),
    (0x202A, 0x202E, "bidirectional override"),
    (0x2066, 0x2069, "bidirectional isolate"),
    (0x200B, 0x200F, "zero-width or direction mark"),
    (0x2060, 0x2064, "invisible operator or joiner"),
    (0xFEFF, 0xFEFF, "zero-width no-break space"),
    (0xFE00, 0xFE0F, "variation selector"),
    (0xE0100, 0xE01EF, "variation selector"),
    (0x115F, 0x1160, "Hangul filler"),
    (0x3164, 0x3164, "Hangul filler"),
)
_WORD = re.compile(r"\w+", re.UNICODE)


def _show(text: str, limit: int = 160) -> str:
    shown = "".join(
        ch if unicodedata.category(ch)[0] != "C" or ch in "\n\t" else f"<U+{ord(ch):04X}>" for ch in text
    )
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _strings(value: Any, path: str) -> Iterator[tuple[str, str, bool]]:
    """Yield `(path, text, is_key)` for every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, Mapping):
        for key, sub in value.items():
            sub_path = f"{path}.{key}" if path else str(key)
            yield sub_path, str(key), True
            yield from _strings(sub, sub_path)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _strings(sub, f"{path}[{i}]")


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "UNKNOWN"
    return name.split(" ", 1)[0]


def _unicode_findings(server: str, tool: str, path: str, text: str, is_name: bool) -> list[Finding]:
    found: list[Finding] = []
    hidden = []
    for ch in text:
        cp = ord(ch)
        for low, high, label in _INVISIBLE_RANGES:
            if low <= cp <= high:
                hidden.append(label)
                break
        else:
            if unicodedata.category(ch) == "Cf" and ch != "\u00ad":
                hidden.append("invisible formatting character")
    if hidden:
        found.append(
            Finding(
                server=server,
                tool=tool,
                kind="invisible_unicode",
                severity="high",
                path=path,
                evidence=_show(text),
                message="contains " + ", ".join(sorted(set(hidden))),
            )
        )
    for word in _WORD.findall(text):
        scripts = {s for s in map(_script, word) if s is not None}
        if len(scripts) > 1 and "LATIN" in scripts:
            found.append(
                Finding(
                    server=server,
                    tool=tool,
                    kind="confusable",
                    severity="high",
                    path=path,
                    evidence=_show(word),
                    message=f"mixes scripts in one word ({', '.join(sorted(scripts))})",
                )
            )
            break
    if is_name and not text.isascii():
        found.append(
            Finding(
                server=server,
                tool=tool,
                kind="confusable",
                severity="high",
                path=path,
                evidence=_show(text),
                message="a name with non-ASCII characters",
            )
        )
    elif unicodedata.normalize("NFKC", text) != text and not hidden:
        found.append(
            Finding(
                server=server,
                tool=tool,
                kind="confusable",
                severity="medium",
                path=path,
                evidence=_show(text),
                message="changes under NFKC normalisation (look-alike forms)",
            )
        )
    return found


def scan_tool(
    tool: Mapping[str, Any],
    *,
    server: str,
    own_tools: Iterable[str] = (),
    foreign_tools: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Scan one wire-shaped tool definition (`name`, `description`, `inputSchema`, ...).

    Args:
        tool: The definition as the server sent it.
        server: The namespace it is imported under.
        own_tools: Names of the other tools on the same server (a mention is worth a low note).
        foreign_tools: `{tool name: server}` for tools offered by *other* servers; mentioning one
            is how a malicious server steers calls it does not own, so it is a high finding.
    """
    name = str(tool.get("name", ""))
    findings: list[Finding] = []
    foreign = {k: v for k, v in (foreign_tools or {}).items() if v != server}
    own = {t for t in own_tools if t != name}
    for path, text, is_key in _strings(dict(tool), ""):
        is_name = path == "name" or (is_key and ".properties." in f".{path}")
        findings += _unicode_findings(server, name, path, text, is_name)
        if is_key:
            continue
        for pattern, severity, message in _INSTRUCTION_RULES:
            match = pattern.search(text)
            if match:
                findings.append(
                    Finding(
                        server=server,
                        tool=name,
                        kind="hidden_instruction",
                        severity=severity,
                        path=path,
                        evidence=_show(match.group(0)),
                        message=message,
                    )
                )
        if path == "name":
            continue
        for other, other_server in foreign.items():
            if re.search(rf"(?<![\w.-]){re.escape(other)}(?![\w-])", text):
                findings.append(
                    Finding(
                        server=server,
                        tool=name,
                        kind="cross_reference",
                        severity="high",
                        path=path,
                        evidence=other,
                        message=f"mentions {other!r}, a tool of server {other_server!r}",
                    )
                )
        for other in own:
            if len(other) > 3 and re.search(rf"(?<![\w.-]){re.escape(other)}(?![\w-])", text):
                findings.append(
                    Finding(
                        server=server,
                        tool=name,
                        kind="cross_reference",
                        severity="low",
                        path=path,
                        evidence=other,
                        message=f"mentions {other!r} on the same server",
                    )
                )
    return findings


def scan_servers(servers: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Finding]:
    """Scan several servers' definitions together: adds cross-server references and shadowing.

    `servers` is ordered: the first server to offer a tool name owns it, and a later server that
    offers the same name is reported as shadowing it (high); the owner gets a medium note.
    """
    listed = {server: list(tools) for server, tools in servers.items()}
    owners: dict[str, list[str]] = defaultdict(list)
    for server, tools in listed.items():
        for tool in tools:
            owners[str(tool.get("name", ""))].append(server)
    findings: list[Finding] = []
    for server, tools in listed.items():
        names = [str(t.get("name", "")) for t in tools]
        foreign = {
            name: others[0] for name, servs in owners.items() if (others := [s for s in servs if s != server])
        }
        for tool in tools:
            findings += scan_tool(tool, server=server, own_tools=names, foreign_tools=foreign)
    for name, servs in sorted(owners.items()):
        if len(servs) > 1:
            # The first server to offer a name keeps it; every later one is the shadow (high).
            for i, server in enumerate(servs):
                shadowed_by = ", ".join(s for s in servs if s != server)
                findings.append(
                    Finding(
                        server=server,
                        tool=name,
                        kind="shadowing",
                        severity="high" if i else "medium",
                        path="name",
                        evidence=name,
                        message=f"the same tool name is offered by {shadowed_by}",
                    )
                )
    return findings
