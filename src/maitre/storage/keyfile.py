"""Secrets kept outside a database: how a configured secret is read, and the key file beside one.

Two stores keep a secret that must never be inside the database it protects: memory's tombstone
secret (`maitre.memory.keyfile`) and the gate's master secret for personal tools
(`maitre.storage.subject_keys`). Both read a configured value the same way - `hex:<hex digits>` is
those bytes, any other text its UTF-8 bytes - and both generate the same kind of key file beside an
embedded SQLite database (`<database>.key`, mode 0600, created atomically). This module is that one
implementation; each caller names its secret and raises its own error type.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["create_key_file", "parse_secret_text"]

log = logging.getLogger(__name__)


def parse_secret_text(
    text: str | bytes, where: str, *, what: str, error: Callable[[str], Exception]
) -> bytes:
    """The bytes of a configured secret `text` (from `where`): `hex:...` is hex, other text its UTF-8.

    `what` names the secret in messages ("the tombstone secret"); `error` builds the exception for
    a value that is empty or not the hex it says it is. A secret under 16 bytes is used, with a warning.
    """
    if isinstance(text, bytes):
        raw = text
    else:
        stripped = text.strip()
        if stripped.startswith("hex:"):
            try:
                raw = bytes.fromhex(stripped[4:])
            except ValueError:
                raise error(f"{what} from {where} starts with 'hex:' but is not hex") from None
        else:
            raw = stripped.encode("utf-8", "surrogateescape")
    if not raw:
        raise error(f"{what} from {where} is empty")
    if len(raw) < 16:
        log.warning(
            "%s from %s is %d bytes; use at least 16 random bytes, e.g. 'hex:' + secrets.token_hex(32)",
            what,
            where,
            len(raw),
        )
    return raw


def create_key_file(path: Path, secret: bytes | None, *, read: Callable[[Path], bytes]) -> bytes:
    """Write `secret` (a new random one if None) to `path` with mode 0600, unless a key file exists.

    Atomic: the key is written and synced under a temporary name and hard-linked into place, so two
    processes opening a new database at once agree on one key and neither reads a half-written file
    (where the filesystem has no hard links: an exclusive create, written in one call). Returns the
    key now in the file - the other process's, read with `read`, if it won.
    """
    key = secret if secret is not None else secrets.token_bytes(32)
    line = f"hex:{key.hex()}\n"
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return read(path)
        except OSError:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return read(path)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return key
