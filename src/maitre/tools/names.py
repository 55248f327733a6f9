"""Names from other catalogues, mapped reversibly onto maitre's tool-name rule.

maitre's rule (`Tool`): a name is letters, digits, `_` and `-`, starting with a letter, with `.`
only between namespace parts, at most 128 characters. Real catalogues break it all the time: MCP
servers send `repo::search`, `files/read`, `get weather`, `天气`; BFCL has `__get_all_user_list`;
OpenAPI operation ids have spaces and slashes.

`canonical_name(name)` is a valid name for any string, the same every time: a valid name is kept
as it is, any other becomes a readable ASCII slug plus `-` and 8 hex digits of the SHA-256 of the
original (so `a::b` and `a/b` never share a name). It is the same mapping as
`maitre.tools.tool.base_name_for` (same slug, same digest), so a name mapped here matches the one an
imported tool gets.

A digest cannot be parsed back, so the reverse direction is a table: `NameMap` records each
original beside its canonical name, answers both ways, refuses two originals that would share one
canonical name, and round-trips through a plain dict (`to_dict` / `from_dict`) so the mapping can be
stored with whatever was indexed. A search hit's canonical name turns back into the name a call to
that catalogue must send with `NameMap.original`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Mapping

from ..exceptions import ToolDefinitionError

__all__ = ["MAX_NAME_LENGTH", "NameMap", "canonical_name", "is_valid_base_name", "is_valid_name"]

MAX_NAME_LENGTH = 128
"""Characters in a canonical tool name, namespace included (as `maitre.tools.tool`)."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*(\.[A-Za-z][A-Za-z0-9_\-]*)*$")
_BASE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]+")
_DIGEST = 8


def is_valid_name(name: str) -> bool:
    """Does `name` follow the rule as a full canonical name (namespace dots allowed)?"""
    return bool(_NAME.match(name)) and len(name) <= MAX_NAME_LENGTH


def is_valid_base_name(name: str, *, max_length: int = 64) -> bool:
    """Does `name` follow the rule as one part (no dots), within `max_length`?"""
    return bool(_BASE.match(name)) and len(name) <= max_length


def canonical_name(name: str, *, max_length: int = 64) -> str:
    """A valid base name (no dots) for any string: kept when valid, else slug + `-` + digest."""
    if is_valid_base_name(name, max_length=max_length):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = _UNSAFE.sub("_", ascii_name).strip("_-")
    slug = re.sub(r"_{2,}", "_", slug)  # `__` is how a namespace dot is spelled to providers
    if not slug[:1].isalpha():
        slug = f"tool_{slug}" if slug else "tool"
    room = max(max_length - len(digest) - 1, 1)
    return f"{slug[:room].rstrip('_-')}-{digest}"


class NameMap:
    """Originals and canonical names of one catalogue, both ways.

    Args:
        namespace: prefix every canonical name with `namespace.` (the original is then one base
            name: its own dots are mapped too, as an imported tool's are).
        keep_dots: without a namespace, keep an original that is already a valid dotted name
            (`orders.get_order`) as it is; False maps it to one base name.

    Example:
        ```python
        names = NameMap()
        names.add("repo::search")       # 'repo_search-b5df18ba'
        names.original("repo_search-b5df18ba")   # 'repo::search'
        ```
    """

    def __init__(self, *, namespace: str | None = None, keep_dots: bool = True) -> None:
        if namespace is not None and not is_valid_name(namespace):
            raise ToolDefinitionError(f"namespace {namespace[:200]!r} does not follow the name rule")
        self.namespace = namespace
        self.keep_dots = keep_dots
        self._to_canonical: dict[str, str] = {}
        self._to_original: dict[str, str] = {}

    def map(self, original: str) -> str:
        """The canonical name `original` gets (without recording it)."""
        if self.namespace is not None:
            room = MAX_NAME_LENGTH - len(self.namespace) - 1
            return f"{self.namespace}.{canonical_name(original, max_length=room)}"
        if self.keep_dots and is_valid_name(original):
            return original
        return canonical_name(original, max_length=MAX_NAME_LENGTH)

    def add(self, original: str) -> str:
        """Record `original` and return its canonical name (the same one on every call).

        Raises ToolDefinitionError when another original already holds that canonical name.
        """
        known = self._to_canonical.get(original)
        if known is not None:
            return known
        canonical = self.map(original)
        holder = self._to_original.get(canonical)
        if holder is not None and holder != original:
            raise ToolDefinitionError(
                f"tool names {holder[:100]!r} and {original[:100]!r} both map to {canonical!r}"
            )
        self._to_canonical[original] = canonical
        self._to_original[canonical] = original
        return canonical

    def canonical(self, original: str) -> str:
        """The canonical name recorded for `original` (KeyError when it was never added)."""
        return self._to_canonical[original]

    def original(self, canonical: str) -> str:
        """The original spelling behind a canonical name (KeyError when unknown)."""
        return self._to_original[canonical]

    def discard(self, original: str) -> None:
        canonical = self._to_canonical.pop(original, None)
        if canonical is not None:
            self._to_original.pop(canonical, None)

    def __contains__(self, original: object) -> bool:
        return original in self._to_canonical

    def __len__(self) -> int:
        return len(self._to_canonical)

    def __iter__(self) -> Iterator[str]:
        return iter(self._to_canonical)

    def items(self) -> list[tuple[str, str]]:
        """(original, canonical) pairs in the order they were added."""
        return list(self._to_canonical.items())

    def to_dict(self) -> dict[str, object]:
        """Plain JSON: the settings and every (original -> canonical) pair."""
        return {"namespace": self.namespace, "keep_dots": self.keep_dots, "names": dict(self._to_canonical)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> NameMap:
        """The map `to_dict` wrote; each pair is checked against the mapping, not trusted."""
        namespace = data.get("namespace")
        names = cls(
            namespace=namespace if isinstance(namespace, str) else None,
            keep_dots=data.get("keep_dots") is not False,
        )
        pairs = data.get("names")
        if isinstance(pairs, Mapping):
            for original, canonical in pairs.items():
                if names.add(str(original)) != canonical:
                    raise ToolDefinitionError(f"{original!r} does not map to {canonical!r} here")
        return names

    def __repr__(self) -> str:
        return f"NameMap(names={len(self)}, namespace={self.namespace!r})"
