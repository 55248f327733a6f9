"""Split a multi-step request into its steps, by rules, so each step's tool gets searched for.

"Search the web for reviews, summarise them and post the summary in #hardware" needs a search
tool and a chat tool; embedded whole, the first step dominates the vector and the chat tool
never ranks. `split_request` cuts such a request where people chain steps - "then", "and then",
"after that", "and if so", ";", a new line, and an "and" or a comma followed by an action verb -
and keeps only parts with at least two content words (so "black and white photos" is not split:
"white" starts no step). A new sentence is not a cut: in BFCL's live questions the sentences
before the request give its context ("I'm in Berlin. Find me a dentist"); splitting there too cost
0.002 hit@5 on live_multiple's dev part and gained nothing on the MCP dev tasks. It is a few regular expressions: no model, microseconds per request.

What the index does with the parts (`ToolIndex(decompose=True)`) is in `index.py`: the whole
request and every part are searched, and the rankings are merged so each part places its best
tools in the answer.
"""

from __future__ import annotations

import re

from .text import STOP_WORDS

__all__ = ["ACTION_VERBS", "MAX_PARTS", "split_request"]

MAX_PARTS = 4
"""At most this many parts (the rest stays in the last one)."""

ACTION_VERBS = frozenset(
    """add append approve archive ask assign attach book build calculate check close combine commit compare
    compute convert copy count crawl create delete deploy download draft draw edit email export extract
    fetch file fill find fix forward generate get grab install invite label launch let list load log look
    make mark merge message move notify open order pay pick plot post print publish pull push put read
    record remind remove rename reply report reschedule resize restart review run save scale schedule
    scan search send set share show sign sketch sort start store summarise summarize sync take tag tell
    text track transcribe translate turn tweet update upload validate verify write""".split()  # noqa: SIM905
)
"""Verbs that start a step after "and" or a comma ("..., translate it and email it")."""

_VERBS = "|".join(sorted(ACTION_VERBS, key=len, reverse=True))
_SPLIT = re.compile(
    r"\s*(?:"
    r"[;\n]+"  # "; " or a new line
    r"|,?\s+(?:and\s+)?then\s+"  # "then", ", then", "and then"
    r"|,?\s+after\s+that,?\s+|,?\s+afterwards,?\s+|,?\s+finally,?\s+"
    r"|,?\s+(?:and\s+)?if\s+(?:so|not),?\s+"  # "... and if so post ..."
    rf"|(?:,\s*(?:and\s+)?|\s+and\s+)(?=(?:{_VERBS})\b)"  # ", translate" / "and email"
    r")\s*",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+")


def _content_words(text: str) -> int:
    return sum(1 for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1)


def split_request(text: str) -> list[str]:
    """The steps of a request; `[text]` when it is one step (or too short to split)."""
    pieces = [p.strip(" ,.") for p in _SPLIT.split(text) if p and p.strip(" ,.")]
    if len(pieces) <= 1:
        return [text]
    parts: list[str] = []
    for piece in pieces:
        if parts and _content_words(piece) < 2:
            parts[-1] = f"{parts[-1]} {piece}"  # too short to be a step: it belongs to the previous one
        elif not parts and _content_words(piece) < 2 and len(pieces) > 1:
            parts.append(piece)  # merged with what follows, below
        else:
            if parts and _content_words(parts[-1]) < 2:
                parts[-1] = f"{parts[-1]} {piece}"
            else:
                parts.append(piece)
    if len(parts) > MAX_PARTS:
        parts = [*parts[: MAX_PARTS - 1], " ".join(parts[MAX_PARTS - 1 :])]
    return parts if len(parts) > 1 else [text]
