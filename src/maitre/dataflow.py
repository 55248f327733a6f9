"""Data-flow taint: after untrusted content, which argument values could have come from it?

The whole-run rule (`DefaultPolicy(taint="run")`) asks for approval of every open-world write
once a run has read anything untrusted, which stops injected instructions and most legitimate
work with them. `Provenance` lets the policy ask a narrower question, stated the safe way round:

    after untrusted content, an argument leaf needs approval unless it can be traced to text the
    run trusts - the user's request, the developer's system prompt, or a trusted tool's result.

It never tries to recognise the attacker's values; it only recognises the trusted ones, so a
value it cannot place (model-composed text, a date the model computed, an IBAN that appeared only
in a web page) asks a human.

How a leaf of the arguments is traced (`Provenance.untraced`):

- Text is normalised before comparing: NFKC, lower-cased (not case-folded: `ß` stays `ß`, since
  `straße.de` and `strasse.de` are two domains), format and default-ignorable
  characters (zero-width spaces, bidi controls, variation selectors, tag characters) and control
  characters dropped, runs of whitespace collapsed to one space. The trusted corpus is normalised
  the same way.
- `None`, `True`, `False` and the empty string are traced (they carry no data). A string made only
  of invisible or space characters is not (it could spell bits).
- A value equal to an `enum` member, a `const` or the `default` of its place in the tool's input
  schema is traced: the developer wrote it.
- A string is traced when its normalised form occurs in the trusted corpus aligned on token
  boundaries (it does not start or end inside a word: `evil` is not found in `medieval`), allowing
  a space to be added or removed next to a digit (a user's `DE89 3704 ...` traces the model's
  `DE893704...`) but not between two letters (`x.com or` does not trace `x.comor`). An address
  (a value with `@`, `.` or `/`) must not start after a letter, digit, `.`, `-` or `+` of the
  trusted text, nor stop before a letter, digit, `-`, `+`, `@` or a dot that goes on: the tail of
  `emma.johnson@gmail.com` (`johnson@gmail.com`) is another mailbox. Spaces are the
  only such transformation: splitting, re-encoding
  (base64, hex, URL-encoding), reversing or re-assembling an untrusted value never yields text
  the trusted corpus contains, so those come out untraced.
- A number (or a string that is a plain number) is traced when the same value occurs as a number
  in the trusted text: `100`, `100.0`, `"100.00"` and `1,000.00` / `1.000,00` (both readings of a
  separator are kept; a separator groups thousands only in groups of three, so `[12,50,100]` and
  `192.168.1.20` are not one number). A negative value needs its minus sign in the text.
- Dictionary keys the schema does not declare are leaves too (a model-chosen key can carry data).
- Anything else is untraced, and reported by its path: `recipient`, `lines[2].iban`,
  `metadata.x (key)`.

Laundering through a trusted tool: a trusted tool can echo its arguments (`lookup("DE89...")`
answering "no account DE89... found", or `write_note` then `read_notes`), which would put an
untrusted value into trusted text. So in a tainted run the gate calls `note_arguments` after every
executed call: the untraced leaves of that call become *suspects*, and every occurrence of a
suspect (4 characters or more; numbers 3 digits or more) in a later trusted result is masked out
before that result joins the corpus. The result of a call that itself carried an untraced value
does not join it at all (`note_arguments` returns True): such a tool may echo part of the value or
pieces of several, which masking would miss. Past 512 suspects every call counts as untraced.

Bounds: at most `max_chars` (256 Ki characters) of trusted text are kept. The request (user
messages and system prompt) is kept first and never dropped for results; when results overflow,
the oldest results are dropped first, and a text longer than the whole budget keeps its start.
Dropping text can only make more values untraced, so overflow fails safe (more approvals).

Limits, stated honestly:

- It follows values, not intent. An injected instruction can still make the agent do a write
  whose every value is trusted: pay the user's own landlord twice, mail a trusted document to a
  trusted colleague, delete a file the user named. Destructive tools need approval by the risk
  matrix regardless; `egress` and open-world writes with only traced values are allowed.
- A traced value may differ from the trusted text in case, width, spacing and invisible
  characters; those differences could carry a few bits, but only to a destination the trusted
  text names, never to one that only untrusted content named.
- Short, common values (a 4-letter word, `10`) are easy to find in a large corpus: a value the
  attacker wants that is already in the user's request or a trusted result is traced by design.
- Each leaf is traced on its own. A destination a tool assembles from several arguments (`user`
  and `domain`, or a list of letters) can be spelled out of trusted pieces the attacker picked;
  keep a destination in one argument (an address, a URL, an IBAN) so it is traced whole.
- Laundering masks only echoes that keep the suspect's characters (case, width and spacing aside);
  a trusted tool that re-encodes its input (returns it base64-encoded, reversed, split over fields
  with other text between) is not recognised. Label such tools untrusted.
- At MCP and gateway doors nobody sees the user's request, so there is no provenance and the
  coarse per-principal rule applies (`RunContext.provenance is None`).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["MAX_TRUSTED_CHARS", "Provenance", "normalise_text"]

MAX_TRUSTED_CHARS = 256 * 1024
"""Characters of trusted text a `Provenance` keeps (the request first, then the newest results)."""

_MAX_DEPTH = 32
_MAX_LEAVES = 2_000
_MAX_BRANCHES = 256
"""Subschemas one `$ref` / combinator expansion may visit (see `_expand`)."""
_MAX_SUSPECTS = 512
_MIN_SUSPECT_CHARS = 4
_MIN_SUSPECT_DIGITS = 3
_MAX_REPORTED = 200
"""Paths `untraced` returns at most (the last one then says how many more)."""
_SEPARATOR = "\x00"
"""Joins corpus segments; normalised text never contains it, so no match spans two texts."""
_MASK = " \ufffc "
"""Stands where a suspect was masked out of a trusted result: it survives normalisation and is no
word character, so nothing matches across it into a word."""

_WHITESPACE = re.compile(r"\s+")
_NUMBER_TEXT = re.compile(r"(?<![\d.,])(-?)(\d+(?:[.,]\d+)*)")
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_ASCII_CONTROLS = {i: None for i in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
"""Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties), which also render as
nothing but are not all in category Cf (variation selectors, Hangul fillers)."""


@functools.lru_cache(maxsize=4096)
def _dropped(char: str) -> bool:
    """True for a character normalisation removes: format, control (not whitespace), ignorable."""
    if char.isspace():
        return False
    if unicodedata.category(char) in ("Cf", "Cc", "Cs", "Co", "Cn"):
        return True
    point = ord(char)
    return any(low <= point <= high for low, high in _IGNORABLE_RANGES)


def normalise_text(text: str) -> str:
    """`text` as tracing compares it: NFKC, lower-cased, invisible characters dropped, spaces collapsed."""
    if text.isascii():
        text = text.translate(_ASCII_CONTROLS).lower()
    else:
        text = "".join(char for char in text if char.isascii() or not _dropped(char))
        # lower(), not casefold(): casefold turns ß into ss, and straße.de is not strasse.de.
        text = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).lower())
        text = "".join(char for char in text if char.isascii() or not _dropped(char))
        text = text.translate(_ASCII_CONTROLS)
    return _WHITESPACE.sub(" ", text).strip()


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _spaced_pattern(normalised: str, *, any_spacing: bool = False) -> re.Pattern[str]:
    """A pattern for `normalised` on token boundaries (the corpus holds single spaces only).

    Next to a digit a space may be added or removed (`DE89 3704` is `DE893704`, `+49 30 12` is
    `+493012`); elsewhere the value's own spacing must match, so two trusted words cannot be run
    together into a new one (`x.com or` is not `x.comor`). `any_spacing` lets a space come or go
    anywhere: what masking uses, to catch an echo however it was re-spaced."""
    chars = normalised.replace(" ", "")
    spaced_after: list[bool] = []
    for index, char in enumerate(normalised):
        if char == " ":
            continue
        spaced_after.append(normalised[index + 1 : index + 2] == " ")
    body = re.escape(chars[0])
    for index in range(1, len(chars)):
        before, char = chars[index - 1], chars[index]
        if any_spacing or before.isdigit() or char.isdigit():
            body += " ?"
        elif spaced_after[index - 1]:
            body += " "
        body += re.escape(char)
    if any(char in "@./" for char in chars):
        # An address (mail, host, URL): its tail is another address (johnson@gmail.com in
        # emma.johnson@gmail.com, a mailbox anyone can register), and so is a stem cut before a
        # dot (emma.johnson@gmail of ...gmail.com). A sentence's full stop may still follow it.
        start = r"(?<![\w.\-+])"
        end = r"(?![\w\-+@]|\.\w)"
    else:
        start = r"(?<!\w)" if _word(chars[0]) else ""
        end = r"(?!\w)" if _word(chars[-1]) else ""
    return re.compile(start + body + end)


_US_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+")
_EU_GROUPED = re.compile(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d+,\d+")
_ONE_SEPARATOR = re.compile(r"\d+[.,]\d+")


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def _readings(digits: str) -> Iterator[Decimal]:
    """Every value a number written in text may mean (`1,000.50`, `1.000,50`, `12,5`, `2024`)."""
    if "," not in digits and "." not in digits:
        candidates = [digits]
    else:
        # A separator groups thousands only in groups of three (`1,250.00`, `1.250,00`); a list
        # or an address is not one number (`12,50,100` is not 1250100, `192.168.1.20` no number).
        candidates = []
        if _US_GROUPED.fullmatch(digits):
            candidates.append(digits.replace(",", ""))  # `,` groups thousands, `.` is the decimal point
        if _EU_GROUPED.fullmatch(digits):
            candidates.append(digits.replace(".", "").replace(",", "."))  # the European reading
        if _ONE_SEPARATOR.fullmatch(digits):
            candidates.append(digits.replace(",", "."))
    for candidate in candidates:
        if candidate.count(".") > 1:
            continue
        value = _decimal(candidate)
        if value is not None:
            yield value


def _number_key(value: Decimal) -> str:
    """A canonical text of a number's value (`100`, `100.0` and `1E+2` share it)."""
    if value == 0:
        return "0"
    value = value.normalize()
    if abs(value.adjusted()) > 60:  # never written out in full: `1e999999` stays short
        return str(value)
    return format(value, "f")


class _Segment:
    """One trusted text, normalised once and with the numbers it contains read once."""

    __slots__ = ("numbers", "text")

    def __init__(self, raw: str) -> None:
        self.text = normalise_text(_unescaped(raw))
        numbers: set[str] = set()
        for match in _NUMBER_TEXT.finditer(self.text):
            sign, digits = match.group(1), match.group(2)
            for value in _readings(digits):
                numbers.add(_number_key(value))
                if sign:
                    numbers.add(_number_key(-value))
        self.numbers = numbers


class _Corpus:
    """The normalised trusted text, joined, with the numbers it contains."""

    __slots__ = ("compact", "numbers", "text")

    def __init__(self, segments: list[_Segment]) -> None:
        self.text = _SEPARATOR.join(segment.text for segment in segments)
        self.compact = self.text.replace(" ", "")
        self.numbers: set[str] = set().union(*(segment.numbers for segment in segments))

    def has_text(self, normalised: str) -> bool:
        compact = normalised.replace(" ", "")
        if compact not in self.compact:  # a linear-time filter before the (spaced) pattern
            return False
        return _spaced_pattern(normalised).search(self.text) is not None

    def has_number(self, value: Decimal) -> bool:
        return _number_key(value) in self.numbers


class Provenance:
    """The trusted text of one run, and the test of whether an argument value came from it.

    The agent loop seeds it with the user's messages and the system prompt (`add_request`); the
    gate adds every trusted tool result after the call (`add_trusted`) and, in a tainted run, the
    untraced values of every executed call (`note_arguments`, see the module docstring). Adding
    is cheap (the text is kept as given); normalisation happens the first time a value is traced.
    """

    def __init__(self, *, max_chars: int = MAX_TRUSTED_CHARS) -> None:
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        self.max_chars = max_chars
        self._request: list[str] = []
        self._results: list[str] = []
        self._request_chars = 0
        self._result_chars = 0
        self._suspects: list[str] = []
        self._segments: dict[int, _Segment] = {}
        """Normalised segments by the id of the text they were made from (built when tracing)."""
        self._corpus: _Corpus | None = None

    # -- what the run trusts ------------------------------------------------------------------------

    def add_request(self, text: str) -> None:
        """Text the person or the developer wrote (user messages, the system prompt): kept first,
        and never dropped to make room for results."""
        if not text:
            return
        room = self.max_chars - self._request_chars
        if room <= 0:
            return
        text = text[:room]
        self._request.append(text)
        self._request_chars += len(text)
        while self._results and self._request_chars + self._result_chars > self.max_chars:
            self._drop_oldest_result()
        self._corpus = None

    def add_trusted(self, text: str) -> None:
        """A trusted tool's result (as the model read it); the oldest results go when over budget.

        Cheap while nothing is suspect (the text is kept as given); in a tainted run with
        suspects, the text is normalised and the suspects masked out of it now."""
        if not text:
            return
        room = self.max_chars - self._request_chars
        if room <= 0:
            return
        if self._suspects:
            text = _masked(text, self._suspects)
        text = text[:room]
        while self._results and self._request_chars + self._result_chars + len(text) > self.max_chars:
            self._drop_oldest_result()
        self._results.append(text)
        self._result_chars += len(text)
        self._corpus = None

    def _drop_oldest_result(self) -> None:
        dropped = self._results.pop(0)
        self._result_chars -= len(dropped)
        self._segments.pop(id(dropped), None)

    def note_arguments(self, arguments: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> bool:
        """After an executed call in a tainted run: its untraced values become suspects, masked
        out of every later trusted result (a trusted tool echoing them does not launder them).

        Returns True when some value was untraced: the gate then leaves that call's own result
        out of the trusted text altogether, since masking finds an echo only as the value was
        sent, not a part of it ("no payee matches GB33...") or pieces the tool glued together.
        Past `_MAX_SUSPECTS` every call counts as untraced (the list fails closed, not open)."""
        corpus = self._built()
        untraced = False
        for _path, value in _leaves(arguments, schema):
            if _leaf_traced(value, _schemas_of(_path, schema), corpus):
                continue
            untraced = True
            if len(self._suspects) >= _MAX_SUSPECTS:
                continue
            suspect = _suspect_text(value)
            if suspect is not None and suspect not in self._suspects:
                self._suspects.append(suspect)
        return untraced or len(self._suspects) >= _MAX_SUSPECTS

    # -- the question ------------------------------------------------------------------------------

    def untraced(self, arguments: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> list[str]:
        """Paths of the argument leaves that cannot be traced to trusted text (empty: all traced).

        `schema` is the tool's input schema: values it fixes (enum, const, default) are traced,
        and dictionary keys it declares are not leaves.
        """
        corpus = self._built()
        paths: list[str] = []
        for path, value in _leaves(arguments, schema):
            if not _leaf_traced(value, _schemas_of(path, schema), corpus):
                paths.append(_render(path))
                if len(paths) >= _MAX_REPORTED:
                    paths.append("... (more values not traced)")
                    break
        return paths

    def traced(self, value: Any) -> bool:
        """Whether one value (no schema) can be traced to trusted text."""
        return _leaf_traced(value, [], self._built())

    # -- state -------------------------------------------------------------------------------------

    @property
    def chars(self) -> int:
        """Characters of trusted text kept (as given, before normalisation)."""
        return self._request_chars + self._result_chars

    def _built(self) -> _Corpus:
        corpus = self._corpus
        if corpus is None:
            cache = self._segments
            segments: list[_Segment] = []
            for text in (*self._request, *self._results):
                segment = cache.get(id(text))
                if segment is None:
                    segment = cache[id(text)] = _Segment(text)
                segments.append(segment)
            corpus = self._corpus = _Corpus(segments)
        return corpus

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "max_chars": self.max_chars,
            "request": list(self._request),
            "results": list(self._results),
            "suspects": list(self._suspects),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        provenance = cls(max_chars=int(data.get("max_chars") or MAX_TRUSTED_CHARS))
        for text in data.get("request") or ():
            provenance.add_request(str(text))
        for text in data.get("results") or ():  # masked when they were added: kept as they are
            provenance.add_trusted(str(text))
        provenance._suspects = [str(s) for s in data.get("suspects") or ()][:_MAX_SUSPECTS]
        return provenance

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Provenance) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Provenance(chars={self.chars}, request={len(self._request)}, results={len(self._results)}, "
            f"suspects={len(self._suspects)})"
        )


# -- walking the arguments ---------------------------------------------------------------------------

_Path = tuple[Any, ...]
"""A leaf's place: keys and indexes; a trailing `_KEY` marks the key itself as the leaf."""
_KEY = object()


def _leaves(arguments: Any, schema: Mapping[str, Any] | None) -> Iterator[tuple[_Path, Any]]:
    """Every leaf of `arguments` with its path, in order, undeclared dictionary keys included.

    The top level's keys are the tool's parameters: without a schema they are taken as declared."""
    count = 0
    stack: list[tuple[_Path, Any, int]] = [((), arguments, 0)]
    while stack:
        path, value, depth = stack.pop()
        count += 1
        if count > _MAX_LEAVES or depth > _MAX_DEPTH:
            yield path, _TooBig()
            return
        if isinstance(value, Mapping):
            declared = _declared_keys(path, schema)
            children: list[tuple[_Path, Any, int]] = []
            for key, item in value.items():
                key = str(key)
                if (declared is None and path) or (declared is not None and key not in declared):
                    yield (*path, key, _KEY), key
                children.append(((*path, key), item, depth + 1))
            stack.extend(reversed(children))
        elif isinstance(value, (list, tuple)):
            stack.extend(((*path, index), value[index], depth + 1) for index in range(len(value) - 1, -1, -1))
        else:
            yield path, value


class _TooBig:
    """Stands for arguments too deep or too many to trace: never traced."""


def _declared_keys(path: _Path, schema: Mapping[str, Any] | None) -> set[str] | None:
    """The property names the schema declares at `path` (None: no schema to say)."""
    if schema is None:
        return None
    keys: set[str] = set()
    for node in _schemas_of(path, schema):
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            keys.update(str(k) for k in properties)
    return keys


def _schemas_of(path: _Path, schema: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The subschemas that describe the value at `path` (all branches of anyOf / oneOf / allOf)."""
    if schema is None:
        return []
    if path and path[-1] is _KEY:
        return []
    nodes = _expand(schema, schema, 0)
    for step in path:
        children: list[Mapping[str, Any]] = []
        for node in nodes:
            child: Any = None
            if isinstance(step, int):
                prefix = node.get("prefixItems")
                child = prefix[step] if isinstance(prefix, list) and step < len(prefix) else node.get("items")
            else:
                properties = node.get("properties")
                if isinstance(properties, Mapping) and step in properties:
                    child = properties[step]
                else:
                    child = node.get("additionalProperties")
            if isinstance(child, Mapping):
                children.extend(_expand(child, schema, 0))
        nodes = children
        if not nodes:
            break
    return nodes


def _expand(
    node: Mapping[str, Any], root: Mapping[str, Any], depth: int, seen: set[int] | None = None
) -> list[Mapping[str, Any]]:
    """`node` with local `$ref`s followed and combinators flattened into a list of branches.

    Each subschema is expanded once (`seen`), and at most `_MAX_BRANCHES` come back: a schema an
    MCP server wrote with self-referring `$ref`s under `anyOf` would otherwise grow as branches to
    the power of the depth (seconds of CPU per call, found by an attack of our own)."""
    if seen is None:
        seen = set()
    if depth > 16 or id(node) in seen or len(seen) >= _MAX_BRANCHES:
        return []
    seen.add(id(node))
    out: list[Mapping[str, Any]] = [node]
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = (
                target.get(part.replace("~1", "/").replace("~0", "~"))
                if isinstance(target, Mapping)
                else None
            )
        if isinstance(target, Mapping):
            out.extend(_expand(target, root, depth + 1, seen))
    for combinator in ("anyOf", "oneOf", "allOf"):
        branches = node.get(combinator)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, Mapping):
                    out.extend(_expand(branch, root, depth + 1, seen))
    return out


def _render(path: _Path) -> str:
    """`lines[2].iban`, `metadata.x (key)`, `['odd key']`; `(arguments)` for the root itself."""
    text = ""
    is_key = bool(path) and path[-1] is _KEY
    for step in path[:-1] if is_key else path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}", step):
            text += f".{step}" if text else step
        else:
            text += f"[{_short(step)!r}]"
    if is_key:
        text += " (key)"
    return text or "(arguments)"


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


# -- one leaf ----------------------------------------------------------------------------------------


def _same_json(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _fixed_by_schema(value: Any, nodes: list[Mapping[str, Any]]) -> bool:
    for node in nodes:
        if "const" in node and _same_json(node["const"], value):
            return True
        if "default" in node and _same_json(node["default"], value):
            return True
        enum = node.get("enum")
        if isinstance(enum, list) and any(_same_json(member, value) for member in enum):
            return True
    return False


def _as_decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return _decimal(repr(value))
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, str):
        stripped = value.strip()
        if _PLAIN_NUMBER.fullmatch(stripped):
            return _decimal(stripped)
    return None


def _leaf_traced(value: Any, nodes: list[Mapping[str, Any]], corpus: _Corpus) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, _TooBig):
        return False
    if nodes and _fixed_by_schema(value, nodes):
        return True
    number = _as_decimal(value)
    if number is not None and corpus.has_number(number):
        return True
    if isinstance(value, (int, float, Decimal)):
        return False
    if not isinstance(value, str):
        return False
    if value == "":
        return True
    normalised = normalise_text(value)
    if not normalised:
        return False  # only invisible or space characters: they could spell bits
    return corpus.has_text(normalised)


def _suspect_text(value: Any) -> str | None:
    """The normalised text to mask for an untraced value, or None when too short to mask safely."""
    number = _as_decimal(value)
    if number is not None and not isinstance(value, str):
        text = _number_key(number).lstrip("-")
        return text if sum(c.isdigit() for c in text) >= _MIN_SUSPECT_DIGITS else None
    if not isinstance(value, str):
        return None
    normalised = normalise_text(value)
    return normalised if len(normalised.replace(" ", "")) >= _MIN_SUSPECT_CHARS else None


def _unescaped(text: str) -> str:
    """`text`, plus the strings inside it when it is JSON with escapes (`\\n`, `\\"`, `\\u00e9`): a
    result's content is JSON text, and the model copies the string, not its escaped spelling."""
    if "\\" not in text or text[:1] not in '{["':
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return text
    strings: list[str] = []
    stack = [data]
    while stack and len(strings) < _MAX_LEAVES:
        item = stack.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            strings.extend(str(key) for key in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return text + "\n" + "\n".join(reversed(strings))


def _masked(text: str, suspects: list[str]) -> str:
    """`text` normalised with every occurrence of a suspect replaced by the separator."""
    if not suspects:
        return text
    normalised = normalise_text(_unescaped(text))
    for suspect in suspects:
        if suspect.replace(" ", "").replace(".", "").isdigit():
            pattern = re.compile(r"(?<!\d)" + r"[.,]?".join(re.escape(c) for c in suspect) + r"(?!\d)")
        else:
            pattern = _spaced_pattern(suspect, any_spacing=True)
        normalised = pattern.sub(_MASK, normalised)
    return normalised
