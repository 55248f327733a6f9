"""What makes two spellings of a fact *the same fact* for a tombstone, and the digest that records it.

A tombstone must hold against the ways a forgotten value comes back looking different but reading
the same (issue 16): a zero-width space or a soft hyphen inside it, a Cyrillic "е" for a Latin "e",
surrounding or typographic quotes, other case, other spacing, a synonym key (`home city` for
`city`), a US spelling or a plural of the key. So both halves are folded before hashing:

- **The value** (`value_identity`): NFKC, case folding, removal of default-ignorable and format
  characters (ZWSP, ZWJ, soft hyphen, bidi controls, variation selectors: Unicode `Cf` plus the
  `Default_Ignorable_Code_Point` ranges), the confusable skeleton of Unicode TS #39 (the maintained
  `disarm` library: Cyrillic "е" and Latin "e" share one skeleton; digits are kept apart from
  letters, so "1O0" and "100" stay different values), quotes folded to one apostrophe and stripped
  at both ends, whitespace collapsed, trailing punctuation dropped. Values are *not* spelling- or
  plural-folded: a value is mostly a name ("Paris", "Agnes"), and stripping an "s" would make
  forgetting one value block another. US/UK spelling and plurals are folded on *keys*, through the
  declared vocabulary.
- **The key** (`KeyVocabulary.canonical`): the normalised snake_case key, each word's US spelling
  mapped to the UK one (`favorite_color` -> `favourite_colour`), plural key words made singular
  (`allergies` -> `allergy`), then declared synonyms mapped to their canonical key
  (`home_city` -> `city`). The store applies the same vocabulary to every write, read and delete,
  so a synonym is one slot, not only one tombstone.

The digest (`tombstone_digest`) is an HMAC-SHA256 over length-prefixed fields, so no choice of
tenant, user, key or value can shift a separator: tenant `a` / user `b\\x1fc` and tenant `a\\x1fb` /
user `c` are different messages. `legacy_tombstone_digest` is the version-1 digest (fields joined
with `\\x1f`, the old value normalisation), kept so tombstones written before this module still block
(a digest cannot be recomputed without the value it stands for, so they cannot be migrated).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..exceptions import UserError

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "DEFAULT_KEY_SYNONYMS",
    "DEFAULT_VOCABULARY",
    "KeyVocabulary",
    "identity_version",
    "legacy_tombstone_digest",
    "require_text",
    "tombstone_digest",
    "value_identity",
]


@cache
def _disarm() -> ModuleType:
    """The confusables library, imported on first use (its tables take ~0.2 s to load)."""
    import disarm

    return disarm


def _skeleton(text: str) -> str:
    return str(_disarm().skeleton_key(text))


def identity_version() -> str:
    """Names the value folding and digest layout; recorded in `memory_meta` so a change is noticed.

    It changes when `disarm`'s key schema or confusables table changes (a pinned upgrade)."""
    lib = _disarm()
    return f"2/disarm-{lib.KEY_SCHEMA_VERSION}/confusables-{lib.CONFUSABLES_VERSION}"


_DIGEST_DOMAIN = b"maitre-memory-tombstone-v2"


def require_text(what: str, text: str) -> str:
    """`text` if it can be stored as UTF-8; a `UserError` naming `what` for a lone surrogate.

    Python strings can hold lone surrogates (from `surrogateescape` decoding or a JSON `\\ud800`
    escape); no database can store them, and encoding them raises a bare `UnicodeEncodeError`
    deep in a driver. Checked at the door instead, so the caller (and a model, as
    INVALID_ARGUMENTS) hears which argument is wrong.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"Memory {what} contains a character that is not valid Unicode text "
            f"(a lone surrogate {text[exc.start]!r} at position {exc.start}); send UTF-8 text."
        ) from None
    return text


def _is_ignorable(ch: str) -> bool:
    """Default-ignorable or format character (Unicode `Cf` and the DICP ranges of DerivedCoreProperties)."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) == "Cf"
        or cp in (0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x180B, 0x180C, 0x180D, 0x180E, 0x180F)
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0xE0000 <= cp <= 0xE0FFF  # tags and variation selectors supplement
        or 0x2060 <= cp <= 0x206F
        or 0x1BCA0 <= cp <= 0x1BCA3
    )


_QUOTES = re.compile(
    r"[\"'`\u00b4\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2032\u2033\u00ab\u00bb\u2039\u203a]+"
)
_SPACES = re.compile(r"\s+")
_EDGE = " '.,;:!?"


def value_identity(value: str) -> str:
    """The identity of a value for tombstones and deletion (see the module docstring)."""
    text = unicodedata.normalize("NFKC", require_text("value", value)).casefold()
    text = "".join(ch for ch in text if not _is_ignorable(ch))
    text = _skeleton(text)
    text = _QUOTES.sub("'", text)
    return _SPACES.sub(" ", text).strip(_EDGE)


def _field(text: str) -> bytes:
    data = text.encode("utf-8")
    return len(data).to_bytes(8, "big") + data


def tombstone_digest(secret: bytes, tenant: str, user: str, key: str, value: str) -> str:
    """HMAC-SHA256 of (tenant, user, canonical key, value identity), each field length-prefixed.

    `key` must already be canonical (`KeyVocabulary.canonical`); `value` is folded here.
    """
    message = _DIGEST_DOMAIN + b"".join(_field(part) for part in (tenant, user, key, value_identity(value)))
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def legacy_tombstone_digest(secret: bytes, tenant: str, user: str, key: str, value: str) -> str:
    """The version-1 digest (before issue 16), so tombstones written then still block.

    Frozen: it must stay byte-for-byte what version 1 computed (`model.tombstone_digest` of
    `model.normalise_value`), which a test pins."""
    norm = _SPACES.sub(" ", unicodedata.normalize("NFKC", value).casefold()).strip().strip(".!,;").strip()
    message = "\x1f".join((tenant, user, key, norm)).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


#: Declared synonyms: alias key -> canonical key (after spelling and plural folding of both).
DEFAULT_KEY_SYNONYMS: Mapping[str, str] = MappingProxyType(
    {
        "home_city": "city",
        "current_city": "city",
        "city_of_residence": "city",
        "residence_city": "city",
        "home_town_now": "city",
        "place_of_residence": "city",
        "full_name": "name",
        "nickname": "preferred_name",
        "time_zone": "timezone",
        "tz": "timezone",
        "job": "occupation",
        "profession": "occupation",
        "job_title": "occupation",
        "company": "employer",
        "workplace": "employer",
        "diet_preference": "diet",
        "dietary_preference": "diet",
        "dietary_restriction": "diet",
        "food_allergy": "allergy",
        "spoken_language": "language",
        "date_of_birth": "birthday",
        "dob": "birthday",
        "birth_date": "birthday",
        "medicine": "medication",
    }
)

#: US -> UK spellings of key words (the store's keys are British: `favourite_colour`).
_US_UK: Mapping[str, str] = MappingProxyType(
    {
        "favorite": "favourite",
        "color": "colour",
        "flavor": "flavour",
        "neighbor": "neighbour",
        "neighborhood": "neighbourhood",
        "humor": "humour",
        "honor": "honour",
        "center": "centre",
        "theater": "theatre",
        "organization": "organisation",
        "license": "licence",
        "gray": "grey",
        "jewelry": "jewellery",
        "pajamas": "pyjamas",
        "catalog": "catalogue",
        "mom": "mum",
    }
)

#: Plural key words -> singular. Explicit, not an "-s" rule: `glasses`, `news` and `address`
#: would be mangled by one.
_PLURALS: Mapping[str, str] = MappingProxyType(
    {
        "allergies": "allergy",
        "languages": "language",
        "pets": "pet",
        "hobbies": "hobby",
        "children": "child",
        "kids": "child",
        "kid": "child",
        "siblings": "sibling",
        "skills": "skill",
        "goals": "goal",
        "medications": "medication",
        "medicines": "medication",
        "interests": "interest",
        "cities": "city",
        "diets": "diet",
        "names": "name",
        "colours": "colour",
        "colors": "colour",
        "foods": "food",
        "movies": "movie",
        "films": "film",
        "books": "book",
        "songs": "song",
        "sports": "sport",
        "teams": "team",
        "friends": "friend",
        "employers": "employer",
        "occupations": "occupation",
        "birthdays": "birthday",
    }
)

_KEY_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")


@dataclass(frozen=True)
class KeyVocabulary:
    """The declared key vocabulary: which spellings of a key are one key.

    `synonyms` maps an alias to its canonical key (both written as keys, e.g. `home_city` -> `city`);
    `spellings` maps one word of a key to another (US to UK by default); `plurals` a plural key word
    to its singular. Pass your own to `MemoryPolicy(vocabulary=...)`, e.g.
    `DEFAULT_VOCABULARY.with_synonyms({"residence": "city"})`.
    """

    synonyms: Mapping[str, str] = field(default_factory=lambda: DEFAULT_KEY_SYNONYMS)
    spellings: Mapping[str, str] = field(default_factory=lambda: _US_UK)
    plurals: Mapping[str, str] = field(default_factory=lambda: _PLURALS)

    def with_synonyms(self, extra: Mapping[str, str]) -> KeyVocabulary:
        """This vocabulary plus `extra` synonyms (alias -> canonical)."""
        return KeyVocabulary(
            synonyms=MappingProxyType({**self.synonyms, **extra}),
            spellings=self.spellings,
            plurals=self.plurals,
        )

    def _words(self, key: str) -> str:
        words = key.split("_")
        return "_".join(self.plurals.get(w, self.spellings.get(w, w)) for w in words)

    def canonical(self, key: str) -> str:
        """`"Favorite Colors"` -> `favourite_colour`, `"home city"` -> `city`; a `UserError` if invalid."""
        raw = require_text("key", key)
        folded = "".join(ch for ch in unicodedata.normalize("NFKC", raw) if not _is_ignorable(ch))
        # The skeleton maps a look-alike letter of another script (a Cyrillic "е") to its Latin
        # prototype, so a spoofed key is the key it imitates (ASCII keys are their own skeleton).
        norm = re.sub(r"[\s\-./]+", "_", _skeleton(folded.strip().casefold())).strip("_")
        if not _KEY_RE.fullmatch(norm):
            raise UserError(
                f"Memory key {key!r} is not valid: use 1-64 characters, a letter first, then letters, "
                "digits or underscores, for example 'city' or 'favourite_colour'."
            )
        words = self._words(norm)
        return self._folded_synonyms.get(words, words)

    @cached_property
    def _folded_synonyms(self) -> dict[str, str]:
        """Synonyms with both sides spelling- and plural-folded, so `home_cities` finds `city`."""
        return {self._words(alias): self._words(canonical) for alias, canonical in self.synonyms.items()}

    def aliases(self) -> Iterable[str]:
        """Every declared alias (for documentation and tests)."""
        return self.synonyms.keys()


DEFAULT_VOCABULARY = KeyVocabulary()
"""The vocabulary a `MemoryPolicy` uses unless given another."""
