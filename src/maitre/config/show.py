"""The effective configuration as `maitre config show` prints it: one row per setting, secrets masked.

A password in a URL, a secret-looking query parameter, a key named `secret` or `*_secret` (the
console's session secret and OIDC client secret) and an upstream header's literal value are
replaced by `***`; a header that only names an environment variable (`Bearer $GITHUB_TOKEN`)
is shown, since the name is not the secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .files import Settings

__all__ = ["MASK", "Row", "effective_rows", "mask_url"]

MASK = "***"
"""What a masked secret reads as."""

_SECRET_PARAMS = re.compile(r"pass|secret|token|key|auth", re.IGNORECASE)
_ONLY_VARIABLES = re.compile(r"^(?:[A-Za-z]+ )?\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$")


@dataclass(frozen=True, kw_only=True)
class Row:
    """One setting of the effective configuration."""

    key: str
    """Dotted, e.g. `stores.url`."""
    value: Any
    """JSON-ready, secrets masked."""
    source: str
    """The file it was read from, or `default`."""


def mask_url(url: str) -> str:
    """`url` with a password and secret-looking query parameters replaced by `***`."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user = parts.username or ""
        host = netloc.rpartition("@")[2]
        netloc = f"{user}:{MASK}@{host}"
    query = parse_qsl(parts.query, keep_blank_values=True)
    masked = [(k, MASK if _SECRET_PARAMS.search(k) else v) for k, v in query]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(masked, safe="*")))


def _mask(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if key.rpartition(".")[2].endswith("secret"):
        return MASK
    if ".headers." in key:
        return value if _ONLY_VARIABLES.match(value) else MASK
    if key.endswith(("url", "rate_limits", "tasks", "otlp")):
        return mask_url(value)
    return value


def _leaves(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted, value


def effective_rows(settings: Settings) -> list[Row]:
    """Every setting with its value (secrets masked) and where it came from."""
    data = settings.config.model_dump(mode="json")
    return [
        Row(key=key, value=_mask(key, value), source=settings.source(key)) for key, value in _leaves(data)
    ]
