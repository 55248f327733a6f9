"""Where the tombstone secret comes from: configuration, or a key file beside an embedded database.

A tombstone is an HMAC of a forgotten fact. Kept in the same database as the tombstones, the secret
lets anyone holding a copy of that database confirm a guessed forgotten value ("was it Pune?") by
recomputing the HMAC (issue 16). So the secret never lives in the database:

- **Configured** (every store, and required for a durable server store such as PostgreSQL):
  `secret=` or `secret_file=` passed to `MemoryStore`, else the environment variables
  `MAITRE_MEMORY_SECRET` (the secret itself) or `MAITRE_MEMORY_SECRET_FILE` (a file holding it).
  A secret written `hex:<hex digits>` is those bytes; any other text is its UTF-8 bytes.
- **Generated key file** (an embedded SQLite file with nothing configured): `<database>.key` beside
  the database, mode 0600, created atomically on first open so `make demo` and a first
  `MemoryStore("memory.db")` still just work. Copying the database alone no longer copies the secret;
  back the key file up with it (without it, the store refuses to open rather than silently stop
  recognising what was forgotten).
- **In process** (`:memory:`): a random secret that dies with the process, like the database.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import UserError
from ..storage.keyfile import create_key_file as write_key_file
from ..storage.keyfile import parse_secret_text

log = logging.getLogger(__name__)

__all__ = [
    "SECRET_ENV",
    "SECRET_FILE_ENV",
    "SecretSource",
    "configured_secret",
    "create_key_file",
    "key_file_beside",
    "parse_secret",
    "read_key_file",
]

SECRET_ENV = "MAITRE_MEMORY_SECRET"
"""Environment variable holding the tombstone secret."""
SECRET_FILE_ENV = "MAITRE_MEMORY_SECRET_FILE"
"""Environment variable naming a file that holds the tombstone secret."""


@dataclass(frozen=True)
class SecretSource:
    """A secret and where it came from (named in error messages, never the secret itself)."""

    secret: bytes
    where: str


def parse_secret(text: str | bytes, where: str) -> bytes:
    """The secret bytes of a configured value: `hex:...` is hex, other text its UTF-8 bytes."""
    return parse_secret_text(text, where, what="The tombstone secret", error=lambda m: UserError(f"{m}."))


def _read_file(path: Path, where: str) -> bytes:
    try:
        return parse_secret(path.read_text(encoding="utf-8", errors="surrogateescape"), where)
    except FileNotFoundError:
        raise UserError(f"The tombstone secret file {path} ({where}) does not exist.") from None


def configured_secret(secret: bytes | str | None, secret_file: str | Path | None) -> SecretSource | None:
    """The configured secret (argument, then environment), or None when nothing is configured."""
    if secret is not None:
        return SecretSource(parse_secret(secret, "secret="), "secret=")
    if secret_file is not None:
        return SecretSource(_read_file(Path(secret_file), "secret_file="), f"secret_file={secret_file}")
    env = os.environ.get(SECRET_ENV)
    if env:
        return SecretSource(parse_secret(env, SECRET_ENV), f"${SECRET_ENV}")
    env_file = os.environ.get(SECRET_FILE_ENV)
    if env_file:
        return SecretSource(_read_file(Path(env_file), SECRET_FILE_ENV), f"${SECRET_FILE_ENV}={env_file}")
    return None


def key_file_beside(database: str | Path) -> Path:
    """The generated key file of an embedded database: `<database>.key`."""
    return Path(f"{database}.key")


def read_key_file(path: Path) -> bytes | None:
    """The secret in a generated key file, or None if there is none."""
    if not path.exists():
        return None
    return _read_file(path, "the store's key file")


def create_key_file(path: Path, secret: bytes | None = None) -> bytes:
    """Write `secret` (a new random one if None) to `path` with mode 0600, unless a key file exists.

    Atomic (`maitre.storage.keyfile.create_key_file`): two processes opening a new database at once
    agree on one key. Returns the key now in the file (the other process's, if it won).
    """

    def existing(found: Path) -> bytes:
        key = read_key_file(found)
        assert key is not None
        return key

    return write_key_file(path, secret, read=existing)
