"""The records of long-term memory and the small pure helpers every backend shares.

A *fact* is one statement about a user: `city = Bengaluru`, true from `valid_from` (valid time, when
it became true in the world), learned at `recorded_at` (system time, when we stored it), from a
`source` (a message id, a tool, an import), either `stated` by the user or `inferred` by the system.
Keeping both times is what lets a replayed January import arrive in November and still lose to the
March move (seed 000), and what answers "where did I live in February?".

A *slot* is what facts compete for: the key for a single-valued key (`city`), the key plus the
normalised value for a multi-valued key (`allergy = peanuts` and `allergy = shellfish` are both
current). A *retraction* is a fact that says a slot stopped being true ("I no longer eat meat");
it competes like any other fact, so an older replay cannot undo it either.

Normalisation, the tombstone digest and the secret filter live here because they must be identical
on every backend.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any

from ..exceptions import UserError
from . import secret_shape
from .identity import DEFAULT_VOCABULARY, KeyVocabulary, require_text

__all__ = [
    "Candidate",
    "DEFAULT_MULTI_VALUED",
    "DEFAULT_PROFILE_KEYS",
    "DEFAULT_TENANT",
    "DeleteReport",
    "Episode",
    "Fact",
    "Hit",
    "KEY_HINTS",
    "MemoryHit",
    "MemoryPolicy",
    "Origin",
    "Profile",
    "Status",
    "Summary",
    "WriteAction",
    "WriteOutcome",
    "fact_text",
    "from_micros",
    "looks_secret",
    "normalise_key",
    "normalise_value",
    "require_storable",
    "to_datetime",
    "to_micros",
    "tombstone_digest",
]

DEFAULT_TENANT = "default"

#: Keys that hold several current values at once unless the policy says otherwise.
DEFAULT_MULTI_VALUED = frozenset(
    {"allergy", "language", "pet", "hobby", "child", "sibling", "skill", "goal", "medication", "interest"}
)
#: Keys whose current values make up the always-loaded profile, in this order.
DEFAULT_PROFILE_KEYS = (
    "name",
    "preferred_name",
    "pronouns",
    "city",
    "timezone",
    "language",
    "occupation",
    "employer",
    "diet",
    "allergy",
    "medication",
)


class Origin(StrEnum):
    """Who said it. A stated fact outranks an inferred one (see `maitre.memory.rules`)."""

    STATED = "stated"
    INFERRED = "inferred"


class Status(StrEnum):
    """Where a fact stands in its slot."""

    CURRENT = "current"
    SUPERSEDED = "superseded"
    DELETED = "deleted"


class WriteAction(StrEnum):
    """What a write did, so callers (extraction, tools, benchmarks) can tell the cases apart."""

    INSERTED = "inserted"
    """Stored and now current (it may have superseded the previous current fact)."""
    STORED_SUPERSEDED = "stored_superseded"
    """Stored for history, already superseded: it lost to the current fact (older or inferred)."""
    DUPLICATE = "duplicate"
    """The same fact (value, valid_from, origin) is already stored; nothing changed."""
    CONFIRMED = "confirmed"
    """A newer restatement of the current value: stored and current, the value is unchanged."""
    IGNORED = "ignored"
    """A retraction of a value that is not the current one; nothing changed."""
    BLOCKED = "blocked"
    """The user asked to forget this fact; a tombstone stops it from coming back."""


@dataclass(kw_only=True)
class Fact:
    """One stored statement about a user."""

    id: str
    """Stable public id (hex)."""
    tenant: str
    """Isolation boundary; nothing crosses tenants."""
    user: str
    """The user the fact is about."""
    key: str
    """Normalised key, e.g. `city`, `favourite_colour`."""
    value: str
    """The value as written (trimmed). Empty for a retraction of a single-valued key."""
    valid_from: datetime
    """Valid time: when it became true in the world (UTC)."""
    recorded_at: datetime
    """System time: when this store learned it (UTC)."""
    source: str
    """Where it came from: a message id, `tool:memory.save_memory`, `import:crm-2026-01`."""
    origin: Origin
    """`stated` by the user or `inferred` by the system."""
    status: Status
    """`current`, `superseded` (kept as history) or `deleted` (only on objects returned by a delete)."""
    superseded_by: str | None = None
    """Id of the fact that replaced this one, if superseded."""
    superseded_at: datetime | None = None
    """System time at which it was superseded."""
    retracted: bool = False
    """True if this fact says the slot stopped being true (for example "I no longer eat meat")."""
    seq: int | None = field(default=None, compare=False, repr=False)
    """Storage order (None until stored): the last tie-break of the conflict order, so of two facts
    alike in origin, valid time and system time the one stored later wins (`maitre.memory.rules`)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (ISO-8601 times)."""
        return {
            "id": self.id,
            "tenant": self.tenant,
            "user": self.user,
            "key": self.key,
            "value": self.value,
            "valid_from": self.valid_from.isoformat(),
            "recorded_at": self.recorded_at.isoformat(),
            "source": self.source,
            "origin": str(self.origin),
            "status": str(self.status),
            "superseded_by": self.superseded_by,
            "superseded_at": self.superseded_at.isoformat() if self.superseded_at else None,
            "retracted": self.retracted,
        }


@dataclass(kw_only=True)
class Candidate:
    """A fact proposed by an extractor or a tool, before the conflict rules see it."""

    key: str
    """Key (normalised by the store)."""
    value: str
    """Value as said; for a retraction of a single-valued key it may be empty."""
    valid_from: datetime | date | str | None = None
    """When it became true (the message time, usually); None means now."""
    source: str = ""
    """Where it came from: a message id, `tool:...`, `import:...`."""
    origin: Origin = Origin.STATED
    """`stated` if the user said it about themselves, `inferred` if the system concluded it."""
    retract: bool = False
    """True if the candidate says the value stopped being true."""
    episode_id: str | None = None
    """The episode (stored with `MemoryStore.add_episodes`) it was extracted from: the stored fact
    is linked to it, and forgetting the fact forgets that episode too. Extractors set it to the
    turn's id (`ConversationTurn.id`)."""


@dataclass(kw_only=True)
class Hit:
    """One retrieval result: a current fact and why it ranked."""

    fact: Fact
    """The current fact."""
    score: float
    """Reciprocal-rank-fusion score (higher is better; comparable only within one query)."""
    similarity: float | None = None
    """Cosine similarity of the query and fact embeddings, if the fact was a dense candidate."""
    lexical: bool = False
    """True if the fact matched the query's words (BM25 / full text)."""

    @property
    def key(self) -> str:
        """The fact's key."""
        return self.fact.key

    @property
    def value(self) -> str:
        """The fact's value."""
        return self.fact.value

    @property
    def valid_from(self) -> datetime:
        """When the fact became true."""
        return self.fact.valid_from

    @property
    def source(self) -> str:
        """Where the fact came from."""
        return self.fact.source


@dataclass(kw_only=True)
class Episode:
    """One raw conversation turn (or message) kept beside the facts: who said what, when, where.

    Facts extracted from an episode are linked to it (`fact_ids`; a `Candidate.episode_id` makes the
    link when it is written), and forgetting a fact forgets the episodes it came from: the raw text
    holds the value too (`maitre.memory.forget`)."""

    id: str
    """Caller-chosen id (a message id), unique per (tenant, user)."""
    tenant: str
    """Isolation boundary."""
    user: str
    """Whose memory it is (the owner; the speaker may be someone else)."""
    speaker: str
    """Who said it: a name, or a role such as `user`."""
    text: str
    """What was said."""
    at: datetime
    """When it was said (UTC)."""
    session: str = ""
    """The conversation or session it belongs to."""
    role: str = "user"
    """`user`, `assistant`, `tool` or another speaker's role."""
    source: str = ""
    """Where it came from: a channel, an import, a transcript id."""
    recorded_at: datetime | None = None
    """When this store learned it."""
    context: str = ""
    """The turn before it in its session, indexed and embedded with it (an answer such as
    "Hollybrook Primary, near the harbour" is found by the question it answers). Set by the store."""
    fact_ids: list[str] = field(default_factory=list)
    """Ids of the facts extracted from it."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (ISO-8601 times)."""
        return {
            "id": self.id,
            "tenant": self.tenant,
            "user": self.user,
            "speaker": self.speaker,
            "text": self.text,
            "at": self.at.isoformat(),
            "session": self.session,
            "role": self.role,
            "source": self.source,
            "recorded_at": self.recorded_at.isoformat() if self.recorded_at else None,
            "fact_ids": list(self.fact_ids),
        }


@dataclass(kw_only=True)
class MemoryHit:
    """One result of `MemoryStore.search`: an episode or a fact, and why it ranked."""

    kind: str
    """`episode` or `fact`."""
    score: float
    """Weighted reciprocal-rank-fusion score (comparable only within one query)."""
    episode: Episode | None = None
    """The episode, for `kind == "episode"`."""
    fact: Fact | None = None
    """The fact, for `kind == "fact"`."""
    similarity: float | None = None
    """Cosine similarity of query and text, if it was a dense candidate."""
    lexical: bool = False
    """True if it matched the query's words."""

    @property
    def id(self) -> str:
        """The episode's or the fact's id."""
        item = self.episode if self.episode is not None else self.fact
        return item.id if item is not None else ""

    @property
    def text(self) -> str:
        """What it says: the episode's text (with its speaker), or `key: value`."""
        if self.episode is not None:
            return f"{self.episode.speaker}: {self.episode.text}"
        if self.fact is not None:
            return f"{self.fact.key}: {self.fact.value}"
        return ""

    @property
    def at(self) -> datetime | None:
        """When it was said (episode) or became true (fact)."""
        if self.episode is not None:
            return self.episode.at
        return self.fact.valid_from if self.fact is not None else None


@dataclass(kw_only=True)
class WriteOutcome:
    """The result of one write: what happened and which fact is now current for the slot."""

    action: WriteAction
    """What the write did."""
    current: Fact | None
    """The fact now current for the slot (None if there is none, e.g. after a retraction)."""
    stored: Fact | None = None
    """The row this write stored, if it stored one."""


@dataclass(kw_only=True)
class Summary:
    """A text derived from facts (the profile, or an application's summary), with its lineage."""

    id: str
    """Stable id; the profile's id is `profile`."""
    tenant: str
    """Tenant of the user."""
    user: str
    """The user it summarises."""
    kind: str
    """`profile` or an application-chosen kind."""
    text: str
    """The derived text."""
    sources: list[str] = field(default_factory=list)
    """Ids of the facts it was built from; deleting any of them removes or rebuilds it."""
    created_at: datetime | None = None
    """When it was (re)built."""


@dataclass(kw_only=True)
class Profile:
    """The small, deterministic, always-loaded view of a user for the start of a session."""

    text: str
    """One `key: value` line per profile key, in policy order; empty if nothing is known."""
    facts: list[Fact]
    """The current facts it was built from (its lineage)."""
    tokens: int
    """cl100k_base token count of `text` (at most the policy's `profile_max_tokens`)."""


@dataclass(kw_only=True)
class DeleteReport:
    """What a deletion removed. Counts only: the deleted text is never echoed back."""

    facts: int = 0
    """Fact rows removed (current and history), with their embeddings and full-text entries."""
    summaries_removed: int = 0
    """Derived summaries removed because they were built from a deleted fact."""
    profile_rebuilt: bool = False
    """True if the profile depended on a deleted fact and was rebuilt without it."""
    tombstones: int = 0
    """Tombstones written (one per distinct forgotten value)."""
    episodes: int = 0
    """Episodes removed: those the deleted facts were extracted from, and those whose text holds a
    forgotten value."""


@dataclass(kw_only=True, frozen=True)
class MemoryPolicy:
    """Per-store rules that are about the data, not the backend."""

    multi_valued: frozenset[str] = DEFAULT_MULTI_VALUED
    """Keys whose distinct values are all current at once."""
    profile_keys: tuple[str, ...] = DEFAULT_PROFILE_KEYS
    """Keys shown in the profile, in this order."""
    profile_max_tokens: int = 300
    """Token cap of the profile text; lines beyond it are left out."""
    reject_secrets: bool = True
    """Refuse values that look like secrets (card numbers, passwords, API keys)."""
    max_value_chars: int = 1000
    """Longest value accepted."""
    vocabulary: KeyVocabulary = DEFAULT_VOCABULARY
    """Which spellings of a key are one key: US/UK spellings, plurals and declared synonyms
    (`home city` = `city`); applied to every write, read and delete (`maitre.memory.identity`)."""

    def canonical_key(self, key: str) -> str:
        """The key as stored: normalised, then folded through `vocabulary`; a `UserError` if invalid."""
        return self.vocabulary.canonical(key)


_KEY_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SPACES = re.compile(r"\s+")


def normalise_key(key: str) -> str:
    """`"Favourite Colour"` -> `favourite_colour`; raises UserError if nothing valid remains.

    Syntax only; the store also folds synonyms and spellings (`MemoryPolicy.canonical_key`)."""
    norm = re.sub(r"[\s\-./]+", "_", require_storable("key", key).strip().lower()).strip("_")
    if not _KEY_RE.fullmatch(norm):
        raise UserError(
            f"Memory key {key!r} is not valid: use 1-64 characters, a letter first, then letters, "
            "digits or underscores, for example 'city' or 'favourite_colour'."
        )
    return norm


def normalise_value(value: str) -> str:
    """The identity of a value: NFKC, case-folded, single spaces, no trailing punctuation."""
    text = unicodedata.normalize("NFKC", value).casefold()
    return _SPACES.sub(" ", text).strip().strip(".!,;").strip()


#: A few words of what common keys mean, added to the indexed text so that "where do I live" or
#: "which company do I work for" find `city` and `employer` by word as well as by meaning.
KEY_HINTS: dict[str, str] = {
    "city": "where I live, home, near me",
    "hometown": "where I grew up",
    "diet": "what I eat",
    "allergy": "allergic to, must avoid",
    "budget": "how much I like to spend",
    "employer": "company I work for",
    "occupation": "job, work",
    "language": "languages I speak",
    "pet": "my pet",
    "preferred_name": "what to call me",
    "timezone": "time zone",
    "partner": "family",
    "spouse": "family, married to",
    "wife": "family, married to",
    "husband": "family, married to",
    "birthday": "date of birth",
}


def fact_text(key: str, value: str) -> str:
    """The text that is embedded and full-text indexed for a fact: `"favourite colour: blue"`.

    Keys in `KEY_HINTS` get their hint in brackets: `"city (where I live, home, near me): Bengaluru"`;
    `favourite_*` keys get "what I like".
    """
    words = key.replace("_", " ")
    hint = KEY_HINTS.get(key) or ("what I like" if key.startswith("favourite_") else None)
    return f"{words} ({hint}): {value}" if hint else f"{words}: {value}"


def tombstone_digest(secret: bytes, tenant: str, user: str, key: str, value_norm: str) -> str:
    """The version-1 tombstone digest: HMAC-SHA256 of the fields joined with `\\x1f`.

    Ambiguous (a `\\x1f` inside an id shifts the fields); new tombstones use
    `maitre.memory.identity.tombstone_digest` (length-prefixed, folded values). Kept so tombstones
    written with it still block."""
    message = "\x1f".join((tenant, user, key, value_norm)).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def require_storable(what: str, text: str) -> str:
    """`text` if both backends can store it: valid Unicode (`require_text`) and no NUL character.

    SQLite keeps a NUL inside TEXT, PostgreSQL refuses the whole statement with a driver error; a
    `UserError` at the door says which argument is wrong, the same on both backends."""
    require_text(what, text)
    if "\x00" in text:
        raise UserError(
            f"Memory {what} contains a NUL character (position {text.index(chr(0))}); send text without it."
        )
    return text


def to_datetime(
    value: datetime | date | str | None, *, default: datetime, what: str = "valid_from"
) -> datetime:
    """Accept a datetime, a date, an ISO-8601 string (`2026-01-05`) or None (default); return UTC.

    Naive datetimes are taken as UTC. `what` names the argument in the `UserError` for a string
    that is not a date, or a moment that has no UTC equivalent (year 9999 in a zone behind UTC).
    """
    if value is None:
        return default
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise UserError(f"{what} {text!r} is not an ISO-8601 date or time, e.g. '2026-01-05'.") from exc
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise UserError(f"{what} {value.isoformat()} is out of range in UTC.") from None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch (how both backends store times: sortable, portable)."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """Inverse of `to_micros`."""
    return _EPOCH + timedelta(microseconds=micros)


def looks_secret(key: str, value: str) -> bool:
    """True for things long-term memory must never hold (seed 000): card numbers, passwords, keys.

    Decided by the value's shape and the key's meaning together (`maitre.memory.secret_shape`), so a
    postal `pin_code`, a `dress_code` or a `token_budget` is not refused."""
    return secret_shape.looks_secret(key, value)
