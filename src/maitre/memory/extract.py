"""The application-driven write path: turn conversation messages into candidate facts.

Seed 000: "run an explicit write step that extracts candidate facts and stores each with a user id,
a timestamp and its source". An `Extractor` reads messages and proposes `Candidate`s; the store's
conflict rules, secret filter and tombstones decide what is kept. Every candidate carries the id of
the message it came from (its source) and that message's time (its valid_from), so a replayed
January conversation loses to a March one however late it is processed.

- `RuleExtractor` (the default) is deterministic: first-person patterns in *user* messages only
  ("I moved to Bengaluru", "I'm allergic to peanuts and shellfish", "remember that my dentist is
  Dr Rao"). It never reads assistant or tool messages: text a tool returned is not the user speaking
  and may carry injected instructions. It prefers missing a fact to inventing one.
- `ModelExtractor` (`maitre.memory.model_extractor`, re-exported here) asks any `maitre` Model
  adapter, or an async `complete(prompt) -> str`, for structured facts, validates them with pydantic
  and only keeps candidates that point at a real user message: the model cannot invent a source or
  a time.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .model import Candidate, Origin
from .model_extractor import ModelExtractor

__all__ = ["AsyncExtractor", "ConversationTurn", "Extractor", "Found", "ModelExtractor", "RuleExtractor"]

log = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    if name == "Message":
        warnings.warn(
            "maitre.memory.Message is deprecated; it is ConversationTurn (the agent's messages are "
            "maitre.messages)",
            DeprecationWarning,
            stacklevel=2,
        )
        return ConversationTurn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(kw_only=True)
class ConversationTurn:
    """One turn of a conversation (who said what, when), as the extraction step reads it.

    Not the agent loop's `maitre.messages.Message`: this is the application's record of what was
    said, with an id and a time for provenance. It was called `Message`; that name still imports
    from here and from `maitre.memory`, with a `DeprecationWarning`.
    """

    role: str
    """`user`, `assistant`, `tool` or `system`; only `user` messages are read by `RuleExtractor`."""
    content: str
    """The text."""
    id: str = ""
    """Message id; becomes the candidates' source (`message:<id>`)."""
    at: datetime | None = None
    """When it was said; becomes the candidates' valid_from (None: the time of the write)."""


@runtime_checkable
class Extractor(Protocol):
    """Proposes candidate facts from messages, synchronously."""

    def extract(self, messages: Sequence[ConversationTurn]) -> list[Candidate]:
        """Candidates, each with key, value, source and valid_from taken from its message."""
        ...


@runtime_checkable
class AsyncExtractor(Protocol):
    """Proposes candidate facts from messages, asynchronously (a model call)."""

    async def extract(self, messages: Sequence[ConversationTurn]) -> list[Candidate]:
        """Candidates, each with key, value, source and valid_from taken from its message."""
        ...


_END = r"(?=\s*(?:[,.!?;:)]|$)|\s+[a-z])"
_PLACE = r"((?!I\b|I')[A-Z][\w'-]*(?:\s(?!I\b|I')[A-Z][\w'-]*){0,3})"
_ORG = r"((?!I\b|I')[A-Z][\w&'-]*(?:\s(?!I\b|I')[A-Z][\w&'-]*){0,3})"
_LIST = r"([\w'-]+(?:(?:\s*,\s*|\s+and\s+|\s+or\s+|\s+)[\w'-]+){0,7})"
_DIETS = (
    r"(vegetarian|vegan|pescatarian|eggetarian|jain|gluten[- ]free|lactose[- ]intolerant|halal|kosher|keto)"
)
_I = r"\b(?:I|i)"
_IM = r"\b(?:I|i)(?:'m| am)"
#: Keys that a plain "my X is Y" may set (anything else needs "remember that my X is Y").
_MY_KEYS = frozenset(
    {
        "dentist",
        "doctor",
        "gp",
        "manager",
        "partner",
        "spouse",
        "wife",
        "husband",
        "birthday",
        "anniversary",
        "employer",
        "company",
        "team",
        "hometown",
        "blood_type",
        "shoe_size",
        "car",
        "gym",
        "school",
        "university",
        "landlord",
        "accountant",
        "therapist",
        "mechanic",
        "budget",
        "airline",
        "seat_preference",
    }
)
_SPLIT = re.compile(r"\s*,\s*|\s+and\s+|\s+or\s+")
_FILLER = frozenset({"also", "too", "as", "well", "really", "very", "quite", "all", "some", "any", "the"})

Found = list[tuple[str, str, bool]]


def _clean(value: str) -> str:
    return " ".join(value.strip().strip(".,;!?\"'").split())


def _one(key: str, *, retract: bool = False, lower: bool = False) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        value = _clean(m.group(1))
        return [(key, value.lower() if lower else value, retract)] if value else []

    return handle


def _many(key: str, *, retract: bool = False) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        out: Found = []
        for part in _SPLIT.split(_clean(m.group(1))):
            words = [w for w in part.split() if w.lower() not in _FILLER]
            if words:
                out.append((key, " ".join(words), retract))
        return out

    return handle


def _role_at(m: re.Match[str]) -> Found:
    return [("occupation", _clean(m.group(1)).lower(), False), ("employer", _clean(m.group(2)), False)]


def _pet(m: re.Match[str]) -> Found:
    return [("pet", f"{m.group(1).lower()} named {m.group(2)}", False)]


def _keyed(*, allow: frozenset[str] | None) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        key = re.sub(r"\s+", "_", m.group(1).strip().lower()).replace("favorite", "favourite")
        value = _clean(m.group(2))
        if not value or (allow is not None and key not in allow):
            return []
        return [(key, value, False)]

    return handle


_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Found]], ...] = (
    (
        re.compile(
            _I
            + r"(?:'ve| have)?\s+(?:just\s+|recently\s+)?(?:moved|relocated|shifted)\s+(?:back\s+)?to\s+"
            + _PLACE
            + _END
        ),
        _one("city"),
    ),
    (re.compile(_I + r"\s+(?:now\s+|currently\s+)?live\s+in\s+" + _PLACE + _END), _one("city")),
    (re.compile(_IM + r"\s+(?:now\s+)?(?:based|living|settled)\s+in\s+" + _PLACE + _END), _one("city")),
    (
        re.compile(_I + r"\s+(?:no longer|don't|do not)\s+live\s+in\s+" + _PLACE + _END),
        _one("city", retract=True),
    ),
    (
        re.compile(
            _IM + r"\s+(?:a\s+|strictly\s+|now\s+)?" + _DIETS + r"\b(?!\s+(?:friend|restaurant|place))",
            re.IGNORECASE,
        ),
        _one("diet", lower=True),
    ),
    (
        re.compile(_I + r"\s+(?:only\s+)?eat\s+(?:only\s+)?" + _DIETS + r"(?:\s+food)?", re.IGNORECASE),
        _one("diet", lower=True),
    ),
    (
        re.compile(_IM + r"\s+(?:not|no longer)\s+(?:a\s+)?" + _DIETS + r"\b", re.IGNORECASE),
        _one("diet", retract=True, lower=True),
    ),
    (
        re.compile(_IM + r"\s+(?:severely\s+|very\s+|mildly\s+)?allergic\s+to\s+" + _LIST, re.IGNORECASE),
        _many("allergy"),
    ),
    (
        re.compile(_IM + r"\s+no longer\s+allergic\s+to\s+" + _LIST, re.IGNORECASE),
        _many("allergy", retract=True),
    ),
    (
        re.compile(_I + r"\s+(?:can\s+)?speak\s+([A-Z]\w+(?:(?:\s*,\s*|\s+and\s+)[A-Z]\w+){0,5})"),
        _many("language"),
    ),
    (re.compile(r"\b[Mm]y name is\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){0,2})"), _one("name")),
    (re.compile(r"\b(?:[Cc]all me|I go by)\s+([A-Z][\w'-]+)"), _one("preferred_name")),
    (
        re.compile(r"\bmy pronouns are\s+([a-z]+/[a-z]+(?:/[a-z]+)?)", re.IGNORECASE),
        _one("pronouns", lower=True),
    ),
    (re.compile(r"\bmy time\s?zone is\s+([\w/+:-]+)", re.IGNORECASE), _one("timezone")),
    (re.compile(_I + r"\s+work\s+as\s+(?:an?\s+)?([a-z][\w -]{1,40}?)\s+(?:at|for)\s+" + _ORG), _role_at),
    (re.compile(_IM + r"\s+an?\s+([a-z][a-z -]{2,30}?)\s+(?:at|for)\s+" + _ORG), _role_at),
    (
        re.compile(_I + r"\s+work\s+as\s+(?:an?\s+)?([a-z][\w -]{1,40}?)" + _END),
        _one("occupation", lower=True),
    ),
    (re.compile(_I + r"\s+(?:work|am working)\s+(?:at|for)\s+" + _ORG), _one("employer")),
    (
        re.compile(
            _I
            + r"\s+have\s+an?\s+(dog|cat|parrot|rabbit|hamster|turtle|horse)\s+(?:named|called)\s+([A-Z]\w+)",
            re.IGNORECASE,
        ),
        _pet,
    ),
    (
        re.compile(
            r"\bremember\s+(?:that\s+)?my\s+([a-z]+(?:\s+[a-z]+)?)\s+is\s+([^.!?;]{1,80})", re.IGNORECASE
        ),
        _keyed(allow=None),
    ),
    (
        re.compile(r"\bmy\s+(favou?rite\s+[a-z]+(?:\s+[a-z]+)?)\s+is\s+([^.!?;,]{1,60})", re.IGNORECASE),
        _keyed(allow=None),
    ),
    (
        re.compile(r"\bmy\s+([a-z]+(?:\s+[a-z]+)?)\s+is\s+([^.!?;,]{1,60})", re.IGNORECASE),
        _keyed(allow=_MY_KEYS),
    ),
)


class RuleExtractor:
    """Deterministic first-person patterns over user messages (see the module docstring)."""

    def extract(self, messages: Sequence[ConversationTurn]) -> list[Candidate]:
        """Candidates from every user message, in message order."""
        out: list[Candidate] = []
        for index, msg in enumerate(messages):
            if msg.role != "user" or not msg.content:
                continue
            source = f"message:{msg.id}" if msg.id else f"message:#{index}"
            for key, value, retract in self.facts(msg.content):
                out.append(
                    Candidate(
                        key=key,
                        value=value,
                        valid_from=msg.at,
                        source=source,
                        origin=Origin.STATED,
                        retract=retract,
                    )
                )
        return out

    def facts(self, text: str) -> list[tuple[str, str, bool]]:
        """(key, value, retract) triples found in one user message, without repeats."""
        found: Found = []
        keys: set[str] = set()
        for pattern, handle in _RULES:
            for m in pattern.finditer(text):
                for key, value, retract in handle(m):
                    # The first (more specific) rule for a single key wins within one message.
                    if (key, value.casefold(), retract) in {(k, v.casefold(), r) for k, v, r in found}:
                        continue
                    if not retract and key in keys and key not in {"allergy", "language", "pet"}:
                        continue
                    found.append((key, value, retract))
                    keys.add(key)
        return found
