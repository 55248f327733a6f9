"""What the tool index reads: a tool's searchable fields, its embedding text, and a query's terms.

Every choice here was measured on BFCL's pooled catalogue (1,853 functions; see
`benchmarks/tool_search_bench.py`), tuning on the categories other than live_multiple:

- Identifiers are split into words (`get_order` -> "get order", `GetWeather` -> "get weather",
  `Weather_1` -> "weather 1"). SQLite's unicode61 tokenizer already splits on `_` and `.`, but not
  on camelCase, and a query never says "getweather". The raw name is indexed too, so the name's words
  count twice: names are the densest signal a tool has.
- Parameter names, descriptions and enum values are indexed. Enum values matter: without them
  lexical hit@5 on live_multiple drops from 0.82 to 0.75 (queries name the values - a genre, a city).
- Query stop words are dropped for BM25 (they only add noise under OR semantics); the embedder gets
  the query as written.
- Value types in the query become terms: a date in the query ("March 5th", "2023-04-15", "Saturday")
  adds the term `date`, a clock time adds `time`, an address adds `email` / `url`. Users state
  values, tools declare parameters; this bridges the two for BM25 (+0.013 hit@5 on live_multiple,
  +0.008 on live_simple, neutral elsewhere).
- The embedding text is `name (name words): description Parameters: p1; p2. descriptions and enum
  values`. Adding the parameters to the embedding text raised dense hit@5 on live_multiple from
  0.78 to 0.87; adding the split name beside the raw name helped a little more. The tokenizer cuts
  at 256 tokens, so the name and description always fit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "STOP_WORDS",
    "embedding_text",
    "example_request",
    "first_sentence",
    "parameter_fields",
    "query_terms",
    "split_identifier",
    "value_type_terms",
]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_DIGIT_EDGE = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")
_NON_WORD = re.compile(r"[\W_]+")
_WORD = re.compile(r"[^\W_]+")

_MAX_ENUM_CHARS = 300
_MAX_DEPTH = 4
_MAX_QUERY_TERMS = 64

STOP_WORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto about as is are was
    were be been being do does did doing have has had having i me my mine we our ours you your yours he
    him his she her it its they them their this that these those what which who whom whose where when
    why how can could would should will shall may might must please help want need like get give tell
    show find make let lets using use via also just some any all each every there here so than too
    very not no yes hi hello thanks thank im""".split()  # noqa: SIM905 - a word list reads better as text
)
"""Dropped from BM25 queries. Verbs like get/find/show are here on purpose: they occur in hundreds
of tool names, so they rank nothing, while an OR query still matches on them."""


def split_identifier(name: str) -> str:
    """`orders.getOrder_v2` -> "orders get order v 2": lower-case words of an identifier."""
    text = _NON_WORD.sub(" ", name)
    text = _CAMEL.sub(" ", text)
    text = _DIGIT_EDGE.sub(" ", text)
    return " ".join(text.split()).lower()


def _properties(schema: Any, depth: int = 0) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, spec in props.items():
            spec = spec if isinstance(spec, Mapping) else {}
            yield str(name), spec
            yield from _properties(spec, depth + 1)
            yield from _properties(spec.get("items"), depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key) or ():
            yield from _properties(option, depth + 1)
    for definition in (schema.get("$defs") or {}).values() if depth == 0 else ():
        yield from _properties(definition, depth + 1)


def parameter_fields(schema: Any) -> tuple[list[str], list[str]]:
    """(parameter names as words, parameter descriptions and enum values) of a JSON Schema."""
    names: list[str] = []
    texts: list[str] = []
    for name, spec in _properties(schema):
        names.append(split_identifier(name))
        description = spec.get("description")
        if isinstance(description, str) and description:
            texts.append(description)
        enum = spec.get("enum")
        if enum is None and isinstance(spec.get("items"), Mapping):
            enum = spec["items"].get("enum")
        if isinstance(enum, list) and enum:
            texts.append(" ".join(str(v) for v in enum)[:_MAX_ENUM_CHARS])
    return names, texts


def embedding_text(name: str, description: str, schema: Any, *, namespace: str | None = None) -> str:
    """The text a tool is embedded as (see the module docstring for why this shape).

    With `namespace` (the server or catalogue the tool comes from), its words are added at the
    end: "(from: google workspace)" tells "email" tools of one product from another's.
    """
    names, texts = parameter_fields(schema)
    text = f"{name} ({split_identifier(name)}): {description}"
    if names:
        text += " Parameters: " + "; ".join(names) + ". " + " ".join(texts)
    if namespace:
        text += f" (from: {split_identifier(namespace)})"
    return text.strip()


_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")
_MAX_EXAMPLE_WORDS = 24


def first_sentence(description: str) -> str:
    """The description's first sentence (or line), at most 24 words."""
    head = _SENTENCE_END.split(description.strip(), maxsplit=1)[0] if description.strip() else ""
    return " ".join(head.split()[:_MAX_EXAMPLE_WORDS])


def example_request(name: str, description: str, schema: Any, *, namespace: str | None = None) -> str:
    """A short request-like text for a tool, from a template over its name, description and parameters.

    Users ask in a few words ("post in the #ops channel"); a tool's full text is long, and its
    parameters dilute the few words that say what it does. This template keeps those words: the
    name's words (without the namespace), the first sentence of the description and the names of
    at most three parameters - "slack post message: Post a new message to a Slack channel (channel
    id, text)". The index embeds it as a second vector per tool and scores a tool by the better of
    its two cosines (`ToolIndex(examples=True)`).
    """
    base = name.rpartition(".")[2]
    names, _ = parameter_fields(schema)
    text = f"{split_identifier(base)}: {first_sentence(description)}"
    if names:
        text += " (" + ", ".join(names[:3]) + ")"
    if namespace:
        text += f" [{split_identifier(namespace)}]"
    return text


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
_DAY = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|tonight|yesterday|weekend)"
)
_VALUE_TYPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            rf"\b\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}\b|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b"
            rf"|\b{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}\b"
            rf"|\b{_DAY}\b",
            re.IGNORECASE,
        ),
        "date",
    ),
    (re.compile(r"\b\d{1,2}(?::\d{2})? ?(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b", re.IGNORECASE), "time"),
    (re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b"), "email"),
    (re.compile(r"https?://\S+|\bwww\.\S+", re.IGNORECASE), "url"),
)


def value_type_terms(query: str) -> list[str]:
    """Parameter-type words implied by values in the query: a date -> "date", an address -> "email"."""
    return [term for pattern, term in _VALUE_TYPES if pattern.search(query)]


def query_terms(query: str) -> list[str]:
    """BM25 terms of a query: words (camelCase split), lower-cased, stop words and 1-letter words
    dropped, de-duplicated in order, at most 64, then the value-type terms."""
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(_CAMEL.sub(" ", query)):
        word = word.lower()
        if len(word) < 2 or word in STOP_WORDS or word in seen:
            continue
        seen.add(word)
        terms.append(word)
        if len(terms) >= _MAX_QUERY_TERMS:
            break
    terms.extend(t for t in value_type_terms(query) if t not in seen)
    return terms
