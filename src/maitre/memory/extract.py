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

__all__ = [
    "AsyncExtractor",
    "ConversationTurn",
    "Extractor",
    "Found",
    "ModelExtractor",
    "RuleExtractor",
    "stated_text",
]

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
#: A title whose full stop does not end the value: "my doctor is Dr. Otieno".
_TITLE = r"(?:(?:Dr|Mr|Mrs|Ms|Prof|St)\.\s*)?"
_LIST_MAX = 160
_LIST = r"([^.!?;:()]{1," + str(_LIST_MAX) + "})"
_DIETS = (
    r"(vegetarian|vegan|pescatarian|eggetarian|jain|gluten[- ]free|lactose[- ]intolerant|halal|kosher|keto)"
)
_I = r"\b(?:I|i)"
_IM = r"\b(?:I|i)(?:'m|’m| am)"
#: The user, alone or with the household: "we moved again" is the user's move too.
_WE = r"\b(?:I|i|[Ww]e)"
_WERE = r"(?:\b(?:I|i)(?:'m|’m| am)|\b[Ww]e(?:'re|’re| are))"
_OCCUPATIONS = frozenset(
    [
        "engineer",
        "developer",
        "designer",
        "nurse",
        "doctor",
        "physician",
        "surgeon",
        "teacher",
        "professor",
        "lecturer",
        "manager",
        "analyst",
        "lawyer",
        "solicitor",
        "attorney",
        "accountant",
        "architect",
        "consultant",
        "student",
        "scientist",
        "researcher",
        "writer",
        "author",
        "editor",
        "journalist",
        "chef",
        "cook",
        "baker",
        "pharmacist",
        "dentist",
        "electrician",
        "plumber",
        "carpenter",
        "mechanic",
        "pilot",
        "photographer",
        "programmer",
        "artist",
        "musician",
        "actor",
        "driver",
        "farmer",
        "librarian",
        "paramedic",
        "firefighter",
        "secretary",
        "receptionist",
        "cashier",
        "clerk",
        "technician",
        "therapist",
        "psychologist",
        "psychiatrist",
        "veterinarian",
        "vet",
        "economist",
        "banker",
        "trader",
        "entrepreneur",
        "founder",
        "director",
        "executive",
        "administrator",
        "coordinator",
        "specialist",
        "translator",
        "interpreter",
        "tutor",
        "coach",
        "trainer",
        "midwife",
        "carer",
        "caregiver",
        "cleaner",
        "waiter",
        "waitress",
        "barista",
        "bartender",
        "soldier",
        "nanny",
        "intern",
        "freelancer",
        "copywriter",
        "illustrator",
        "animator",
        "dietitian",
        "nutritionist",
        "optician",
        "physiotherapist",
        "surveyor",
        "statistician",
        "mathematician",
        "physicist",
        "chemist",
        "biologist",
        "historian",
        "curator",
        "producer",
        "realtor",
        "broker",
        "recruiter",
        "officer",
    ]
)
_NOT_ROLE_WORDS = frozenset(
    {"of", "the", "a", "an", "to", "for", "with", "and", "fan", "big", "huge", "little", "bit", "friend"}
)
_OCCUPATION = (
    r"((?:[a-z][\w-]*\s+){0,3}?(?:" + "|".join(sorted(_OCCUPATIONS, key=len, reverse=True)) + r"))\b"
)
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
#: Of those, the keys whose value is a person: "my wife is Elena", never "my wife is allergic to ...".
_PERSON_KEYS = frozenset(
    {
        "dentist",
        "doctor",
        "gp",
        "manager",
        "partner",
        "spouse",
        "wife",
        "husband",
        "landlord",
        "accountant",
        "therapist",
        "mechanic",
    }
)
#: A "my X is ..." whose value starts like this describes X; it does not name a value for X.
_NOT_A_VALUE = frozenset(
    [
        "still",
        "in",
        "at",
        "on",
        "from",
        "not",
        "no",
        "also",
        "allergic",
        "going",
        "moving",
        "coming",
        "very",
        "so",
        "really",
        "too",
        "being",
        "getting",
        "always",
        "never",
        "late",
        "bad",
        "good",
        "great",
        "fine",
        "ok",
        "okay",
        "busy",
        "away",
        "sick",
        "ill",
        "off",
        "out",
        "over",
        "here",
        "there",
        "back",
        "vegan",
        "vegetarian",
        "pescatarian",
    ]
)
_SPLIT = re.compile(r"\s*,\s*|\s+and\s+|\s+or\s+|\s*&\s*")
_FILLER = frozenset(
    {"also", "too", "as", "well", "really", "very", "quite", "all", "some", "any", "the", "to"}
)
#: A word that ends an allergen list: "shellfish and sesame, just so you know" -> shellfish, sesame.
_LIST_STOP = frozenset(
    [
        "just",
        "so",
        "sadly",
        "unfortunately",
        "but",
        "because",
        "since",
        "though",
        "although",
        "which",
        "who",
        "that",
        "when",
        "while",
        "where",
        "what",
        "how",
        "why",
        "after",
        "before",
        "please",
        "thanks",
        "thank",
        "apparently",
        "actually",
        "now",
        "anymore",
        "more",
        "again",
        "either",
        "in",
        "general",
        "i",
        "i'm",
        "it",
        "it's",
        "is",
        "are",
        "was",
        "were",
        "for",
        "me",
        "my",
        "you",
        "know",
        "not",
        "no",
        "if",
        "then",
        "severely",
        "mildly",
        "badly",
    ]
)
_ANIMALS = r"(dog|puppy|cat|kitten|parrot|budgie|rabbit|bunny|hamster|guinea pig|turtle|tortoise|horse|fish|snake|lizard|ferret)"

#: "a dog, a retired greyhound, called Pip": the breed between the animal and its name.
_BREED = r"(?:,\s+an?\s+(?:[\w-]+\s+){0,2}[\w-]+,?)?"

#: What makes a clause a hypothetical, a wish, a plan or a question about one: no fact in it.
_HYPOTHETICAL = re.compile(
    r"\b(?:if|what if|suppose|supposing|imagine|assuming|in case)\s+(?:i|we)\b"
    r"|\bi(?:'d|’d|\s+would)(?:n't|n’t)?\s+(?:(?:love|like|want|prefer)\s+to|have\s+to|be|say)\b"
    r"|\bi\s+(?:wish|might|may)\b|\bwould(?:n't|n’t)?\s+(?:i|we|it|that)\b"
    r"|\b(?:thinking|thought)\s+(?:about|of)\b|\bconsidering\b|\bplanning\s+(?:to|on)\b"
    r"|\bhoping\s+to\b|\bone\s+day\b|\bsomeday\b|\bshould\s+(?:i|we)\b"
    r"|\bmaybe\s+(?:i|we)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(
    r"(?<=[.!?;:])(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bSt\.)(?<!\bProf\.)\s+|\n+"
)
#: Clause breaks: "but", "though", a semicolon, and a comma before a new clause of the user's
#: ("I want a table for two, I'm vegan").
_CLAUSE = re.compile(r",?\s+(?:but|though|although)\s+|;\s+|,\s+(?=(?:I|I'm|I’m|[Ww]e|[Mm]y)\b)")

Found = list[tuple[str, str, bool]]


def _clean(value: str) -> str:
    return " ".join(value.strip().strip(".,;!?\"'").split())


def stated_text(text: str) -> str:
    """The clauses of a message that state something: hypotheticals, wishes and plans left out.

    "If I moved to Madrid I'd learn Spanish" and "I'd love sushi, but I'm sticking with
    vegetarian" keep nothing of the first and only "I'm sticking with vegetarian" of the second.
    """
    kept = []
    for sentence in _SENTENCE.split(text):
        for clause in _CLAUSE.split(sentence):
            if clause.strip() and not _HYPOTHETICAL.search(clause):
                kept.append(clause.strip())
    return "\n".join(kept)


def _one(key: str, *, retract: bool = False, lower: bool = False) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        value = _clean(m.group(1))
        return [(key, value.lower() if lower else value, retract)] if value else []

    return handle


def _const(key: str, value: str, *, retract: bool = False) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        return [(key, value, retract)]

    return handle


def _items(text: str) -> list[str]:
    """The leading items of an allergen-like list, up to the first word that is not part of it."""
    out: list[str] = []
    for part in _SPLIT.split(_clean(text)):
        words: list[str] = []
        stopped = False
        for word in part.split():
            low = word.lower()
            if low in _LIST_STOP:
                stopped = True
                break
            if low not in _FILLER:
                words.append(word)
        if words and len(words) <= 3:
            out.append(" ".join(words))
        if stopped or not words or len(words) > 3:
            break
    return out


def _many(key: str, *, retract: bool = False, group: int = 1) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        text = m.group(group)
        items = _items(text)
        if len(text) >= _LIST_MAX and items:
            items.pop()  # the window cut the last item short
        return [(key, item, retract) for item in items]

    return handle


def _languages(m: re.Match[str]) -> Found:
    return [("language", part, False) for part in _SPLIT.split(_clean(m.group(1))) if part]


def _correction_list(key: str) -> Callable[[re.Match[str]], Found]:
    """`it's X I'm allergic to, not Y`: X is current, Y retracted (group 1 new, group 2 old)."""

    def handle(m: re.Match[str]) -> Found:
        new, old = _items(m.group(1)), _items(m.group(2))
        return [(key, o, True) for o in old] + [(key, n, False) for n in new]

    return handle


def _occupation(m: re.Match[str]) -> str | None:
    role = _clean(m.group(1)).lower()
    words = role.split()
    if not words or words[-1] not in _OCCUPATIONS or any(w in _NOT_ROLE_WORDS for w in words):
        return None
    return role


def _role(m: re.Match[str]) -> Found:
    role = _occupation(m)
    return [("occupation", role, False)] if role else []


def _role_at(m: re.Match[str]) -> Found:
    role = _occupation(m)
    if role is None:
        return []
    return [("occupation", role, False), ("employer", _clean(m.group(2)), False)]


def _pets(m: re.Match[str]) -> Found:
    out: Found = []
    for animal, name in re.findall(
        r"\ban?\s+" + _ANIMALS + _BREED + r"\s+(?:named|called)\s+([A-Z][\w'-]*)", m.group(0), re.IGNORECASE
    ):
        out.append(("pet", f"{animal.lower()} named {name}", False))
    return out


def _keyed(*, allow: frozenset[str] | None) -> Callable[[re.Match[str]], Found]:
    def handle(m: re.Match[str]) -> Found:
        key = re.sub(r"\s+", "_", m.group(1).strip().lower()).replace("favorite", "favourite")
        value = _clean(m.group(2))
        if not value or (allow is not None and key not in allow):
            return []
        if allow is not None:
            first = value.split()[0]
            if key in _PERSON_KEYS and not first[:1].isupper():
                return []  # "my wife is allergic to shellfish" is a fact about the wife
            if first.lower() in _NOT_A_VALUE:
                return []  # "my team is still in Toronto" says where the team is
        return [(key, value, False)]

    return handle


_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], Found]], ...] = (
    # -- where the user lives: moves, corrections, "we" for the household -------------------------
    (
        re.compile(
            _WE
            + r"(?:'ve|’ve| have)?\s+(?:just\s+|recently\s+|finally\s+|now\s+)?(?:moved|relocated|shifted)"
            + r"(?:\s+(?:again|back|house|home|over))?(?:\s+(?:last|this|in|earlier)\s+\w+)?,?\s+"
            + r"(?:back\s+)?to\s+"
            + _PLACE
            + _END
        ),
        _one("city"),
    ),
    (re.compile(_I + r"\s+(?:ended up|finally)\s+moving\s+to\s+" + _PLACE + _END), _one("city")),
    (re.compile(_WE + r"\s+(?:now\s+|currently\s+|still\s+)?live\s+in\s+" + _PLACE + _END), _one("city")),
    (
        re.compile(_WERE + r"\s+(?:now\s+|currently\s+)?(?:based|living|settled)\s+in\s+" + _PLACE + _END),
        _one("city"),
    ),
    (re.compile(_WERE + r"\s+now\s+in\s+" + _PLACE + _END), _one("city")),
    (
        re.compile(_WERE + r"\s+in\s+" + _PLACE + r"\s+(?:now|these days|for good)\b"),
        _one("city"),
    ),
    (
        re.compile(_WE + r"\s+(?:no longer|don't|don’t|do not)\s+live\s+in\s+" + _PLACE + _END),
        _one("city", retract=True),
    ),
    # -- diet: statements, changes and their end ---------------------------------------------------
    (
        re.compile(
            _IM + r"\s+(?:a\s+|strictly\s+|now\s+)?" + _DIETS + r"\b(?!\s+(?:friend|restaurant|place))",
            re.IGNORECASE,
        ),
        _one("diet", lower=True),
    ),
    (
        re.compile(
            _I
            + r"(?:'m|’m|'ve|’ve| am| have)?\s+(?:now\s+|just\s+)?(?:going|gone|went|turned|become|became|been|"
            + r"switched\s+to|switching\s+to|back\s+to|sticking\s+with|staying)\s+(?:being\s+|a\s+)?"
            + _DIETS
            + r"\b",
            re.IGNORECASE,
        ),
        _one("diet", lower=True),
    ),
    (
        re.compile(_I + r"\s+(?:only\s+)?eat\s+(?:only\s+)?" + _DIETS + r"(?:\s+food)?", re.IGNORECASE),
        _one("diet", lower=True),
    ),
    (
        re.compile(
            r"\bfish\s+is\s+(?:fine|ok|okay|allowed)\s+(?:for\s+me\b|now\b|again\b)"
            + r"|"
            + _I
            + r"(?:'ve|’ve| have)?\s+(?:started\s+|am\s+|'m\s+)?eat(?:ing)?\s+fish\s+(?:again|now)\b",
            re.IGNORECASE,
        ),
        _const("diet", "pescatarian"),
    ),
    (
        re.compile(_IM + r"\s+(?:not|no longer)\s+(?:a\s+)?" + _DIETS + r"\b", re.IGNORECASE),
        _one("diet", retract=True, lower=True),
    ),
    (
        re.compile(
            _I
            + r"(?:'ve|’ve| have)?\s+(?:started\s+|am\s+|'m\s+|’m\s+)?eat(?:ing)?\s+(?:meat|everything)\s+"
            + r"(?:again|now)\b",
            re.IGNORECASE,
        ),
        _const("diet", "", retract=True),
    ),
    # -- allergies: corrections and negations before plain statements ------------------------------
    (
        re.compile(
            r"\bit(?:'s|’s| is)\s+([\w' -]{2,40}?)\s+(?:that\s+)?" + _I + r"(?:'m|’m| am)\s+allergic\s+to"
            r",?\s+not\s+([^.!?;:()]{1,80})",
            re.IGNORECASE,
        ),
        _correction_list("allergy"),
    ),
    (
        re.compile(
            _IM + r"\s+(?:not|no longer|not actually|actually not)\s+allergic\s+to\s+[^.!?;:(),]{1,60}?"
            r",\s+it(?:'s|’s| is)\s+" + _LIST,
            re.IGNORECASE,
        ),
        _many("allergy"),
    ),
    (
        re.compile(
            _IM + r"\s+(?:not|no longer|not actually|actually not|never been)\s+allergic\s+to\s+" + _LIST,
            re.IGNORECASE,
        ),
        _many("allergy", retract=True),
    ),
    (
        re.compile(
            _I
            + r"\s+(?:never said|didn't say|didn’t say|did not say|never told you)\s+(?:that\s+)?"
            + r"(?:I|i)(?:'m|’m| am| was| were)\s+allergic\s+to\s+"
            + _LIST,
            re.IGNORECASE,
        ),
        _many("allergy", retract=True),
    ),
    (
        re.compile(
            _IM + r"\s+(?:severely\s+|very\s+|mildly\s+|also\s+)?allergic\s+to\s+" + _LIST, re.IGNORECASE
        ),
        _many("allergy"),
    ),
    # -- languages, names ---------------------------------------------------------------------------
    (
        re.compile(_I + r"\s+(?:can\s+)?speak\s+([A-Z]\w+(?:(?:\s*,\s*|\s+and\s+)[A-Z]\w+){0,5})"),
        _languages,
    ),
    (re.compile(r"\b[Mm]y name is\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+){0,2})"), _one("name")),
    (
        re.compile(r"(?<!n't )(?<!not )(?<!never )\b(?:[Cc]alls? me|I go by)\s+([A-Z][\w'-]+)"),
        _one("preferred_name"),
    ),
    (
        re.compile(r"\bmy pronouns are\s+([a-z]+/[a-z]+(?:/[a-z]+)?)", re.IGNORECASE),
        _one("pronouns", lower=True),
    ),
    (re.compile(r"\bmy time\s?zone is\s+([\w/+:-]+)", re.IGNORECASE), _one("timezone")),
    # -- work ---------------------------------------------------------------------------------------
    (re.compile(_I + r"\s+work\s+as\s+(?:an?\s+)?" + _OCCUPATION + r"\s+(?:at|for)\s+" + _ORG), _role_at),
    (
        re.compile(_IM + r"\s+(?:now\s+|currently\s+)?an?\s+" + _OCCUPATION + r"\s+(?:at|for)\s+" + _ORG),
        _role_at,
    ),
    (re.compile(_I + r"\s+work\s+as\s+(?:an?\s+)?" + _OCCUPATION), _role),
    (re.compile(_IM + r"\s+(?:now\s+|currently\s+)?an?\s+" + _OCCUPATION + _END), _role),
    (
        re.compile(
            _I
            + r"(?:\s+now|\s+currently)?(?:\s+work|\s+am working|'m working|’m working)\s+(?:at|for)\s+"
            + _ORG
        ),
        _one("employer"),
    ),
    # -- pets, the rest -----------------------------------------------------------------------------
    (
        re.compile(
            _WE
            + r"(?:'ve|’ve| have)?\s+(?:finally\s+|just\s+)?(?:got|have|adopted)\s+an?\s+"
            + _ANIMALS
            + _BREED
            + r"\s+(?:named|called)\s+[A-Z]"
            r"[^.!?;]*",
            re.IGNORECASE,
        ),
        _pets,
    ),
    (
        re.compile(
            r"\bremember\s+(?:that\s+)?my\s+([a-z]+(?:\s+[a-z]+)?)\s+is\s+(" + _TITLE + r"[^.!?;]{1,80})",
            re.IGNORECASE,
        ),
        _keyed(allow=None),
    ),
    (
        re.compile(r"\bmy\s+(favou?rite\s+[a-z]+(?:\s+[a-z]+)?)\s+is\s+([^.!?;,]{1,60})", re.IGNORECASE),
        _keyed(allow=None),
    ),
    (
        re.compile(r"\bmy\s+([a-z]+(?:\s+[a-z]+)?)\s+is\s+(" + _TITLE + r"[^.!?;,]{1,60})", re.IGNORECASE),
        _keyed(allow=_MY_KEYS),
    ),
)

_MULTI = frozenset({"allergy", "language", "pet"})


class RuleExtractor:
    """Deterministic first-person patterns over user messages (see the module docstring).

    What it reads, beyond plain statements ("I live in Pune", "I'm allergic to peanuts"):

    - *relocations*, the household's too: "we moved again last month, to Leeds", "we're in Porto
      now", "we shifted to Pune", "I ended up moving to Vancouver", "we're living in Brighton";
    - *corrections*: a later statement is a new value at the later time, so the store makes it
      current ("I live in Potsdam", "please call me Sofia"); "it's amoxicillin I'm allergic to,
      not penicillin" and "I'm not allergic to peanuts, it's tree nuts" retract the wrong value
      and add the right one;
    - *diet changes*: "I'm going vegan", "I've gone pescatarian", "I'm back to being vegetarian",
      "fish is fine for me now" (pescatarian), "I eat meat again" (ends the diet);
    - *negations*: "I'm not vegan anymore", "I don't live in X anymore", "I'm no longer / not
      allergic to X", "I never said I was allergic to X" (each a retraction);
    - *hypotheticals* yield nothing: a clause with "if I", "what if", "suppose", "I'd", "I would",
      "thinking about", "planning to", "one day"... is skipped (`stated_text`);
    - *other people's facts* yield nothing: every rule needs the user ("I", "we", "my X is" for the
      user's own relations), and "my wife is allergic to shellfish" or "my team is still in
      Toronto" is not a value for `wife` or `team`. The user's relations are the user's facts:
      "my husband is Daniel" -> `husband = Daniel`.
    """

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
        stated = stated_text(text)
        found: Found = []
        seen: set[tuple[str, str, bool]] = set()
        keys: set[str] = set()
        retracted: set[str] = set()
        for pattern, handle in _RULES:
            for m in pattern.finditer(stated):
                for key, value, retract in handle(m):
                    mark = (key, value.casefold(), retract)
                    if mark in seen:
                        continue
                    # The first (more specific) rule for a single key wins within one message.
                    if not retract and key in keys and key not in _MULTI:
                        continue
                    # A value both ended and stated in one message: the first rule (the correction) wins.
                    if (key, value.casefold(), not retract) in seen:
                        continue
                    if retract and not value and key in retracted:
                        continue
                    found.append((key, value, retract))
                    seen.add(mark)
                    if retract:
                        retracted.add(key)
                    else:
                        keys.add(key)
        return found
