"""Scan other servers' tool definitions before a model ever reads them.

A tool definition is untrusted input (seed 003 §12): a malicious server writes instructions for
the model into a description, a parameter description, an enum value or a default; hides them with
invisible or bidirectional Unicode; swaps a Latin letter for a Cyrillic one in a name; or steers
another server's tools ("when send_email is called, also bcc ..."). The scanner walks *every*
string in the definition - keys included, since a property name is read by the model too - and
reports findings with the JSON path where they were found.

Severity decides what `toolbox_from_mcp(scan="block")` keeps out: `high` findings block a tool,
`medium` and `low` are reported. The rules are deliberately plain regular expressions and Unicode
properties: auditable, fast, and with no model in the loop that the same injection could steer.
They are measured on two committed corpora (`tests/mcp/corpus/`): the tool definitions of real
public servers, where a `high` finding is a false positive, and an attack corpus of the OWASP MCP
families, each case with the finding it must raise (`benchmarks/scanner_corpus.py` prints both).
What keeps the false positives down:

- A tool of another server is a *cross-reference* only when the text names it as that server's
  tool (`mail.send_email`), or wraps an instruction around its name ("before you call search",
  "when send_email is used", "do not use read_file"), or mentions a distinctive name (`send_email`,
  not a dictionary word such as `search`) in a text that already carries a high instruction. A
  plain mention of a distinctive name is a medium note; of a dictionary word, nothing.
- Look-alike letters count only inside one token: a word mixing Latin with Cyrillic or Greek
  letters that pass for Latin ones (`pаypal`), or a name whose look-alike skeleton is an ASCII
  name (`ｓｅｎｄ_email`). Chinese or Japanese text around a Latin id is not mixed script.
- Emoji presentation selectors and joiners inside emoji sequences are not hidden text; runs of
  variation selectors, tag characters outside a flag, bidirectional controls and zero-width
  characters inside a word or a name are. A few zero-width spaces between words of prose (pasted
  from a web page) are a medium note.
- A name offered by two servers is namespaced apart by the client, so the collision alone is a
  medium note; it is a high shadow when the later server's tool has a distinctive name and does not
  belong with the rest of its tools (a facts server offering `send_email`; gitlab's `create_issue`
  beside its `list_issues` belongs).
- Credential files are high when the text asks for them to be read or passed on; a mention alone
  (`.env` in a list of config files, "`~/.ssh` is rejected") is medium. Requests for secrets that
  are negated ("do not include API keys in the query") are advice, not requests.
- Role changes, pseudo-markup, chat-template tokens, "ignore previous instructions", hiding from
  the user, acting without confirmation and piping a download into a shell are high wherever they
  appear; "act as" alone ("Goggles act as a re-ranking") and "instructions for the AI" are not.

Not the scanner's job: a definition that changes after approval (a rug pull) is caught by pinning
(`maitre.mcp.pinning`), and injection in tool *results* by taint.
"""

from __future__ import annotations

import functools
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
_GAP = r"(?:(?![.!?;]\s)[^\n])"
"""One character of the same sentence: the secret-file rules do not reach across a full stop."""
_SECRET_FILES = (
    r"(~/\.ssh|\.ssh/|\bssh[\s_-]+(?:private[\s_-]+)?keys?\b|\bid[\s_-]?(?:rsa|ed25519|ecdsa|dsa)\b|"
    r"\.aws/credentials|\baws[\s_-]+credentials\b|\.netrc\b|\.npmrc\b|\.pgpass\b|\.git-credentials|"
    r"/etc/(?:passwd|shadow)|\.docker/config\.json|\.kube/config|claude_desktop_config|"
    r"\bmcp\.json\b|\.cursor/)"
)
_LOOSE_SECRETS = r"(\.env\b|private[\s_-]?keys?\b|keychain|wallet[\s_-]+seed|seed[\s_-]+phrase|mnemonic)"
_ACCESS = (
    r"(?:\b(?:read|reading|cat|open|opening|load|loading|include|including|pass|passing|send|sending|copy|"
    r"copying|append|appending|attach|attaching|upload|uploading|put|provide|forward|post|content|contents|"
    r"paste|dump|exfiltrate|leak)\b|读取|读|发送|传入|传递|附加|上传|包含|内容|読み|読ん|送信|渡し|添付)"
)
"""Verbs of reading a file or passing it on (English, and the common Chinese and Japanese ones)."""
_TRANSFER = (
    r"(?:\b(?:include|pass|send|copy|append|attach|upload|put|provide|forward|post|paste|exfiltrate|leak|bcc)\b"
    r"|发送|传入|传递|附加|上传|送信|渡し|添付)"
)
_VERBS = (
    r"(?:call|calls|calling|use|uses|using|invoke|invoking|run|running|execute|executing|trigger|triggering)"
)

_MENTION = "refers to a credential file"
_INSTRUCTION_RULES: list[tuple[re.Pattern[str], Severity, str]] = [
    (
        re.compile(
            r"\b(ignore|disregard|forget|override)\b.{0,30}\b(previous|prior|above|earlier|all|other|"
            r"system|your|the user'?s?|user)\b.{0,20}\b(instructions?|prompts?|rules|guidelines|messages?|"
            r"requests?)\b",
            _I,
        ),
        "high",
        "tells the model to ignore its instructions",
    ),
    (
        re.compile(
            r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin|assistant|sys)\b[^>]*>", _I
        ),
        "high",
        "pseudo-markup that addresses the model directly",
    ),
    (
        re.compile(
            r"<\|\s*(im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\s*\|>|"
            r"\[/?INST\]|<<\s*/?SYS\s*>>",
            re.IGNORECASE,
        ),
        "high",
        "chat-template control tokens that open a fake turn",
    ),
    (
        re.compile(
            r"\b(do\s*n[o']?t|never|must\s+not|without)\s+(tell|telling|inform|informing|notify|notifying|alert|"
            r"alerting|warn|warning)\s+(the\s+|a\s+)?(user|human|operator|owner)s?\s*([.,;:!)<\n]|$|about\s+(this|it))"
            r"|\b(do\s*n[o']?t|never|must\s+not|without)\s+(tell|telling|mention|mentioning|reveal|revealing|"
            r"disclose|disclosing)\s+(this|it|that\s+you|what\s+you|anything|any\s+of\s+this)\b"
            r"|\bwithout\s+the\s+user'?s?\s+(knowing|knowledge|noticing|seeing)"
            r"|(不要|别|不得|切勿)(告诉|通知|提醒)(用户|使用者)\s*([。，,.;；!！]|$|此|这|任何)"
            r"|ユーザーに(は)?(伝え|言わ|知らせ|教え)ないで",
            _I,
        ),
        "high",
        "asks the model to hide something from the user",
    ),
    (
        re.compile(
            r"\bwithout\s+(asking|requesting|waiting\s+for|seeking|getting)\s+((the\s+)?user'?s?\s+|for\s+|any\s+)*"
            r"(confirmation|permission|approval|consent)\b",
            _I,
        ),
        "high",
        "tells the model to act without the user's confirmation",
    ),
    (
        re.compile(
            rf"{_ACCESS}{_GAP}{{0,40}}{_SECRET_FILES}|{_SECRET_FILES}{_GAP}{{0,40}}({_TRANSFER}|\bcontents?\b)",
            _I,
        ),
        "high",
        "asks for a secret or credential file to be read or passed on",
    ),
    (
        re.compile(
            rf"{_TRANSFER}{_GAP}{{0,40}}{_LOOSE_SECRETS}|{_LOOSE_SECRETS}{_GAP}{{0,30}}{_TRANSFER}", _I
        ),
        "high",
        "asks for secrets to be passed on",
    ),
    (re.compile(_SECRET_FILES, _I), "medium", _MENTION),
    (
        re.compile(
            rf"{_TRANSFER}\s+(?:(?:it|them|this)\s+(?:along\s+)?(?:with|to)\s+)?(?:(?:all\s+|any\s+|every\s+)?"
            r"(?:the|your|their|my|our|(?:the\s+)?users?'?s?)\s+(?:[\w-]+\s+){0,3}?|(?:all|any|every)\s+(?:[\w-]+\s+)?)?"
            r"(api[\s_-]?keys?|passwords?|secrets?|(access|auth|bearer|session|refresh|api)[\s_-]+tokens?|"
            r"credentials|conversation\s+history|chat\s+history|(the|this|our|entire|full|whole|current)\s+"
            r"(conversation|chat)|system\s+prompt|previous\s+messages)\b",
            _I,
        ),
        "high",
        "asks for secrets or the conversation to be sent somewhere",
    ),
    (
        re.compile(
            r"(^|[.!:>\n]\s*|\b(always|must|first)\s+)(before|after|instead of|whenever|every time)\s+"
            r"(using|calling|invoking|you use|you call)\b.{0,20}\b(any|other|another|all|every)\b.{0,15}\btools?\b",
            _I,
        ),
        "high",
        "dictates how the model must use other tools",
    ),
    (
        re.compile(
            r"\b(you are now|pretend to be|new instructions|jailbreak|developer mode)\b|"
            r"\bact as (an? )?(admin|administrator|root|superuser|system|developer|unrestricted|jailbroken)\b",
            _I,
        ),
        "high",
        "tries to change the model's role",
    ),
    (
        re.compile(r"\binstructions?\s+(for|to)\s+(the\s+)?(ai|assistant|model|llm|language model)\b", _I),
        "medium",
        "addresses instructions to the model",
    ),
    (
        re.compile(
            r"\b(curl|wget|iwr|invoke-webrequest)\b[^\n|]{0,200}\|\s*(sudo\s+)?(ba|z|k|da)?sh\b|"
            r"\bbase64\s+(-d|--decode)\b[^\n]{0,40}\|\s*(ba|z)?sh\b",
            _I,
        ),
        "high",
        "asks the model to run a downloaded or encoded script",
    ),
    (re.compile(r"/dev/tcp/|\bnc\s+(-\w+\s+)*-e\b|\bbash\s+-i\s*>&", _I), "high", "a reverse shell"),
    (
        re.compile(r"\b(system prompt|system message|assistant must|the assistant should)\b", _I),
        "medium",
        "addresses the model's instructions",
    ),
    (re.compile(r"<!--.*?-->", _I), "medium", "hidden HTML comment"),
    (re.compile(r"\b(other|another|all)\s+(mcp\s+)?servers?\b", _I), "medium", "refers to other servers"),
]

_NEGATABLE = {
    "asks for a secret or credential file to be read or passed on",
    "asks for secrets to be passed on",
    "asks for secrets or the conversation to be sent somewhere",
}
_NEGATED = re.compile(
    r"\b(do\s*n[o']?t|never|must\s+not|should\s+not|shouldn't|avoid|without|no\s+need\s+to|not)\b", _I
)


def _negated(text: str, match: re.Match[str]) -> bool:
    return _NEGATED.search(text, max(0, match.start() - 30), match.start()) is not None


_PREFERENCE = re.compile(
    r"\b(better|preferred|prefer this|official|recommended|improved|upgraded|replaces?|instead|always use|"
    r"use this one|fixed version|new version|more reliable|the only)\b",
    _I,
)

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
    (0xFFA0, 0xFFA0, "Hangul filler"),
)
_ZWJ, _ZWNJ, _BLACK_FLAG, _CANCEL_TAG = 0x200D, 0x200C, 0x1F3F4, 0xE007F

# Letters of other scripts that pass for Latin ones (Unicode confusables, the common part).
_LOOKALIKES = {
    **dict(zip("аеорсухіјѕԁһӏԛԝүАВЕКМНОРСТХУІЈЅԜ", "aeopcyxijsdhlqwyABEKMHOPCTXYIJSW", strict=True)),
    **dict(zip("οαρνιτκυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "oapvitkuxABEZHIKMNOPTYX", strict=True)),
    **dict(zip("օսոհ", "ounh", strict=True)),
}
_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/:]*")
"""A tool name as it appears in text; ASCII only, so `调用send_email时` still yields `send_email`."""
_PLAIN_WORD = re.compile(r"[a-z]+|[A-Z][a-z]+|[A-Z]+")


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


_EMOJI_BASES = frozenset((0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D, 0x3297, 0x3299))


def _is_pictographic(ch: str) -> bool:
    """An emoji or symbol that an emoji sequence (selector, joiner, skin tone) may follow."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) == "So"
        or 0x1F000 <= cp <= 0x1FAFF
        or 0x2190 <= cp <= 0x2BFF
        or cp in _EMOJI_BASES
        or ch in "#*0123456789"
    )


def _joins_letters(prev: str, nxt: str) -> bool:
    """ZWJ/ZWNJ between two letters of a script that uses them (Arabic, Persian, Indic, ...)."""
    return prev.isalpha() and nxt.isalpha() and not (prev.isascii() or nxt.isascii())


_ZERO_WIDTH = frozenset((0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF))


def _hidden(text: str) -> tuple[list[str], int]:
    """Labels of the invisible characters in `text` that no ordinary text needs, and the count of
    zero-width characters that sit between words rather than inside one (pasted-in prose has a few)."""
    labels: list[str] = []
    loose = 0
    if text.isascii():
        return labels, loose
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        cp = ord(ch)
        prev = text[i - 1] if i else ""
        nxt = text[i + 1] if i + 1 < n else ""
        if cp == _BLACK_FLAG:
            # A subdivision flag: black flag, a few tag letters, cancel tag (England, Scotland, Wales).
            j = i + 1
            while j < n and 0xE0061 <= ord(text[j]) <= 0xE007A and j - i <= 6:
                j += 1
            if j < n and ord(text[j]) == _CANCEL_TAG and j > i + 1:
                i = j + 1
                continue
        elif cp in (0xFE0E, 0xFE0F) and prev and (_is_pictographic(prev) or prev == "\u20e3"):
            pass
        elif (
            0xE0100 <= cp <= 0xE01EF
            and prev
            and unicodedata.name(prev, "").startswith("CJK")
            and not (nxt and 0xE0100 <= ord(nxt) <= 0xE01EF)
        ):
            pass  # one ideographic variation selector after a kanji/hanzi
        elif (
            cp == _ZWJ
            and prev
            and nxt
            and (_is_pictographic(prev) or 0x1F3FB <= ord(prev) <= 0x1F3FF or prev in "\ufe0f")
            and _is_pictographic(nxt)
        ):
            pass  # a joiner inside an emoji sequence
        elif cp in (_ZWJ, _ZWNJ) and prev and nxt and _joins_letters(prev, nxt):
            pass
        elif cp in _ZERO_WIDTH and not (
            prev.isalnum() and nxt.isalnum() and (prev.isascii() or nxt.isascii())
        ):
            loose += 1  # between words, or a break hint in Thai/CJK text; inside a Latin word it hides
        else:
            for low, high, label in _INVISIBLE_RANGES:
                if low <= cp <= high:
                    labels.append(label)
                    break
            else:
                if (
                    unicodedata.category(ch) == "Cf"
                    and ch != "\u00ad"
                    and not (0x0600 <= cp <= 0x0605 or cp == 0x061C or cp == 0x06DD)
                ):
                    labels.append("invisible formatting character")
        i += 1
    return labels, loose


def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    try:
        return unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return "UNKNOWN"


def _skeleton(text: str) -> str:
    """NFKC plus the look-alike table: what `text` reads as."""
    return "".join(_LOOKALIKES.get(ch, ch) for ch in unicodedata.normalize("NFKC", text))


def _unicode_findings(server: str, tool: str, path: str, text: str, is_name: bool) -> list[Finding]:
    found: list[Finding] = []

    def add(kind: Kind, severity: Severity, evidence: str, message: str) -> None:
        found.append(
            Finding(
                server=server,
                tool=tool,
                kind=kind,
                severity=severity,
                path=path,
                evidence=evidence,
                message=message,
            )
        )

    hidden, loose = _hidden(text)
    # In a name or an identifier-like value (`imp<U+2060>erial`) any zero-width character hides.
    identifier = not any(ch.isspace() or not (ch.isascii() or ord(ch) in _ZERO_WIDTH) for ch in text)
    if loose and (is_name or identifier or loose > 3 or hidden):
        hidden.append("zero-width characters")
    elif loose:
        add("invisible_unicode", "medium", _show(text), f"{loose} zero-width character(s) between words")
    if hidden:
        add("invisible_unicode", "high", _show(text), "contains " + ", ".join(sorted(set(hidden))))
    if text.isascii():
        return found
    for word in _WORD.findall(text):
        if any(ch in _LOOKALIKES for ch in word) and any(ch.isascii() and ch.isalpha() for ch in word):
            scripts = {s for s in map(_script, word) if s is not None}
            add(
                "confusable",
                "high",
                _show(word),
                f"mixes look-alike scripts in one word ({', '.join(sorted(scripts))})",
            )
            break
    if is_name:
        visible = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
        skeleton = _skeleton(visible)
        if skeleton != visible and skeleton.isascii():
            add("confusable", "high", _show(text), f"a name that looks like the ASCII name {skeleton!r}")
        elif not hidden:
            add("confusable", "medium", _show(text), "a name with non-ASCII characters")
        return found
    lookalike = [
        ch
        for ch in text
        if ch.isalnum()
        and not ch.isascii()
        and (norm := unicodedata.normalize("NFKC", ch)).isascii()
        and norm != ch
    ]
    if lookalike and not hidden:
        add(
            "confusable",
            "medium",
            _show("".join(lookalike)),
            "letters that change under NFKC (look-alike forms)",
        )
    return found


@functools.lru_cache(maxsize=8192)
def _instructions(text: str) -> tuple[tuple[Severity, str, str], ...]:
    """`(severity, message, evidence)` for each instruction rule `text` trips (schemas repeat a lot)."""
    hits: list[tuple[Severity, str, str]] = []
    for pattern, severity, message in _INSTRUCTION_RULES:
        match = pattern.search(text)
        if match and message in _NEGATABLE and _negated(text, match):
            # "Do not include API keys in the query" is advice to the model, not a request.
            match = next((m for m in pattern.finditer(text, match.end()) if not _negated(text, m)), None)
        if match and message == _MENTION and any(h[0] == "high" for h in hits):
            continue  # the same text already asks for the file: one finding, at high
        if match:
            hits.append((severity, message, _show(match.group(0))))
    return tuple(hits)


def _distinctive(name: str) -> bool:
    """A tool name that is not a dictionary word: `send_email`, `getUser`, `brave_web_search`."""
    return len(name) > 3 and not _PLAIN_WORD.fullmatch(name)


def _around(name: str, *, events_only: bool = False) -> re.Pattern[str]:
    """Instruction phrasing wrapped around one tool name (case-sensitive for the name itself).

    A distinctive name (`send_email`) is steered by any usage verb around it; a dictionary word
    (`search`, `query`) is also a noun of ordinary prose ("before executing the search"), so for
    it only the verbs of calling a tool count, bound tightly ("before you call search"). With
    `events_only` (a name the scanned server offers too, so "use this instead of list_incidents"
    may be routing between its own tools) only event-handler phrasing counts: "when send_email is
    used, ...", "a side effect on send_email", "send_email must ...".
    """
    n = rf"[`'\"*]?{re.escape(name)}[`'\"*]?(?![A-Za-z0-9_-])"
    pre = r"(?<![A-Za-z0-9_.\-/:])"
    events = (
        rf"{pre}{n}(?i:(?:\s+tool)?\s+(?:is|are|gets?|has\s+been)\s+(?:called|used|invoked|run|executed|triggered))"
        rf"|(?i:\b(?:side[\s-]effects?\s+on|overrides?|redirects?|intercepts?)\s+(?:the\s+)?"
        rf"(?:\w+\s+){{0,3}}){pre}{n}"
    )
    if not _distinctive(name.rpartition(".")[2]):
        call = r"(?:call|calling|invoke|invoking)"
        return re.compile(
            rf"{pre}{n}(?i:\s+(?:tool\s+)?(?:is|gets?|has\s+been)\s+(?:called|invoked))"
            if events_only
            else rf"(?i:\b(?:before|after|whenever|every\s+time|each\s+time|instead\s+of|rather\s+than)\s+"
            rf"(?:you\s+|the\s+(?:model|assistant|agent)\s+)?{call}\s+){pre}{n}"
            rf"|(?i:\b(?:do\s+not|don'?t|never|must\s+not|always|first|also|must)\s+{call}\s+){pre}{n}"
            rf"|{pre}{n}(?i:\s+(?:tool\s+)?(?:is|gets?|has\s+been)\s+(?:called|invoked))"
        )
    if events_only:
        return re.compile(rf"{events}|{pre}{n}(?i:(?:\s+tool)?\s+(?:must|shall|will\s+now)\b)")
    return re.compile(
        rf"(?i:\b(?:before|after|whenever|every\s+time|each\s+time|once)\s+"
        rf"(?:you\s+|the\s+(?:model|assistant|agent)\s+)?{_VERBS}\s+(?:the\s+)?){pre}{n}"
        rf"|(?i:\b(?:instead\s+of|rather\s+than|in\s+place\s+of)\s+(?:{_VERBS}\s+)?(?:the\s+)?){pre}{n}"
        rf"|(?i:\b(?:do\s+not|don'?t|never|must\s+not|avoid|stop)\s+(?:{_VERBS}|relying\s+on|rely\s+on)\s+"
        rf"(?:the\s+)?){pre}{n}"
        rf"|(?i:\b(?:always|first|also|must|should)\s+{_VERBS}\s+(?:the\s+)?){pre}{n}"
        rf"|{events}|{pre}{n}(?i:(?:\s+tool)?\s+(?:must|should|shall|will\s+now)\b)"
        rf"|(?i:\breplaces?\s+(?:the\s+)?(?:\w+\s+){{0,3}}){pre}{n}"
    )


def _references(
    text: str, foreign: Mapping[str, str], foreign_servers: Mapping[str, frozenset[str]]
) -> Iterator[tuple[str, str, bool]]:
    """`(tool, server, namespaced)` for each other server's tool the text names."""
    seen: set[str] = set()
    for token in _TOKEN.findall(text):
        token = token.rstrip(".:/-")
        for sep in (".", "/", ":", "__"):
            prefix, found, rest = token.rpartition(sep)
            if found and prefix:
                prefix = prefix.removeprefix("mcp__").removesuffix(sep)
                if rest in foreign_servers.get(prefix, ()) and token not in seen:
                    seen.add(token)
                    yield rest, prefix, True
                    break
        else:
            if token in foreign and token not in seen:
                seen.add(token)
                yield token, foreign[token], False


def scan_tool(
    tool: Mapping[str, Any],
    *,
    server: str,
    own_tools: Iterable[str] = (),
    foreign_tools: Mapping[str, str] | None = None,
    foreign_servers: Mapping[str, Iterable[str]] | None = None,
) -> list[Finding]:
    """Scan one wire-shaped tool definition (`name`, `description`, `inputSchema`, ...).

    Args:
        tool: The definition as the server sent it.
        server: The namespace it is imported under.
        own_tools: Names of the other tools on the same server (a mention is worth a low note).
        foreign_tools: `{tool name: server}` for tools offered by *other* servers. Naming one as
            that server's tool, or wrapping an instruction around its name, is how a malicious
            server steers calls it does not own: a high finding.
        foreign_servers: `{server: its tool names}` for the other servers, to recognise namespaced
            references (`mail.send_email`); derived from `foreign_tools` when not given.
    """
    name = str(tool.get("name", ""))
    findings: list[Finding] = []
    own = {t for t in own_tools} | {name}
    # A name this server offers too (a shadow) is still the other server's tool when steered.
    foreign = {k: v for k, v in (foreign_tools or {}).items() if v != server and k != name}
    if foreign_servers is None:
        by_server: dict[str, set[str]] = defaultdict(set)
        for tool_name, other in foreign.items():
            by_server[other].add(tool_name)
        servers = {k: frozenset(v) for k, v in by_server.items()}
    else:
        servers = {k: frozenset(v) for k, v in foreign_servers.items() if k != server}

    def add(kind: Kind, severity: Severity, path: str, evidence: str, message: str) -> None:
        findings.append(
            Finding(
                server=server,
                tool=name,
                kind=kind,
                severity=severity,
                path=path,
                evidence=evidence,
                message=message,
            )
        )

    for path, text, is_key in _strings(dict(tool), ""):
        is_name = path == "name" or (is_key and ".properties." in f".{path}")
        findings.extend(_unicode_findings(server, name, path, text, is_name))
        if is_key:
            # A property name is read by the model too: `content_from_reading_ssh_id_rsa`.
            text = re.sub(r"[_\-]+|(?<=[a-z])(?=[A-Z])", " ", text)
        hits = _instructions(text)
        instructed = any(severity == "high" for severity, _, _ in hits)
        for severity, message, evidence in hits:
            add("hidden_instruction", severity, path, evidence, message)
        if path == "name" or is_key:
            continue
        for other, other_server, namespaced in _references(text, foreign, servers):
            shared = other in own and not namespaced
            steering = _around(f"{other_server}.{other}" if namespaced else other, events_only=shared).search(
                text
            ) or (namespaced and _around(other).search(text))
            if namespaced or steering or (instructed and _distinctive(other) and not shared):
                why = (
                    "names another server's tool"
                    if namespaced and not steering
                    else "an instruction around another server's tool"
                    if steering
                    else "mentions another server's tool beside an instruction"
                )
                add("cross_reference", "high", path, other, f"{why}: {other!r} of server {other_server!r}")
            elif _distinctive(other) and not shared:
                add(
                    "cross_reference",
                    "medium",
                    path,
                    other,
                    f"mentions {other!r}, a tool of server {other_server!r}",
                )
        for token in set(_TOKEN.findall(text)):
            token = token.rstrip(".:/-")
            if token in own and token != name and len(token) > 3:
                add("cross_reference", "low", path, token, f"mentions {token!r} on the same server")
    return findings


_GENERIC_WORDS = frozenset(
    [
        "get",
        "list",
        "create",
        "update",
        "delete",
        "set",
        "add",
        "remove",
        "search",
        "find",
        "read",
        "write",
        "fetch",
        "run",
        "execute",
        "query",
        "show",
        "describe",
        "new",
        "by",
        "to",
        "of",
        "the",
        "and",
        "a",
        "all",
        "for",
        "from",
        "with",
        "in",
        "on",
        "mcp",
        "tool",
        "multiple",
        "or",
        "info",
        "details",
    ]
)


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(name: str) -> set[str]:
    """The specific words of a tool name: `list_issues` -> {"issue"} (verbs like get/list left out)."""
    parts = re.split(r"[_\-.]+|(?<=[a-z])(?=[A-Z])", name)
    return {_stem(w.lower()) for w in parts if w} - _GENERIC_WORDS


def _fits(name: str, siblings: Iterable[str]) -> bool:
    """Whether a tool belongs with its server's other tools: its name shares a specific word with one
    (gitlab's `create_issue` beside `list_issues`), or has no specific word at all (`search`)."""
    words = _words(name)
    return not words or any(words & _words(s) for s in siblings if s != name)


def scan_servers(servers: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Finding]:
    """Scan several servers' definitions together: adds cross-server references and shadowing.

    `servers` is ordered: the first server to offer a tool name owns it. A later server offering the
    same name is namespaced apart by the client, so the collision is a medium note on both - unless
    the later one's tool has a distinctive name and does not belong with the rest of its server's
    tools (a facts server offering `send_email`): that is a shadow, high. Peers may be given by
    name only (`{"name": ...}`), as the client does for servers already imported.
    """
    listed = {server: list(tools) for server, tools in servers.items()}
    owners: dict[str, list[str]] = defaultdict(list)
    names_of: dict[str, list[str]] = {}
    for server, tools in listed.items():
        names_of[server] = [str(t.get("name", "")) for t in tools]
        for name in names_of[server]:
            owners[name].append(server)
    findings: list[Finding] = []
    for server, tools in listed.items():
        foreign = {
            name: others[0] for name, servs in owners.items() if (others := [s for s in servs if s != server])
        }
        peers = {s: names for s, names in names_of.items() if s != server}
        for tool in tools:
            findings += scan_tool(
                tool, server=server, own_tools=names_of[server], foreign_tools=foreign, foreign_servers=peers
            )
    for name, servs in sorted(owners.items()):
        if len(servs) < 2:
            continue
        for i, server in enumerate(servs):
            shadowed_by = ", ".join(s for s in servs if s != server)
            message = f"the same tool name is offered by {shadowed_by}"
            shadow = bool(i) and _distinctive(name) and not _fits(name, names_of[server])
            if shadow:
                message += f", and it is unlike the rest of {server}'s tools: a shadow"
                tool = next(t for t in listed[server] if str(t.get("name", "")) == name)
                claim = _PREFERENCE.search(str(tool.get("description", "")))
                if claim:
                    message += f" that claims to be the one to use ({claim.group(0)!r})"
            else:
                message += " (namespaced apart)"
            findings.append(
                Finding(
                    server=server,
                    tool=name,
                    kind="shadowing",
                    severity="high" if shadow else "medium",
                    path="name",
                    evidence=name,
                    message=message,
                )
            )
    return findings
