"""The store's own settings in `memory_meta`: the tombstone secret's check and the embedder's identity.

Both are checked when a store is opened or first embeds, because a mismatch breaks a promise
silently rather than loudly:

- **The tombstone secret** keys the HMAC of every tombstone. Opened with another secret, the store
  would stop recognising what a user asked it to forget. The secret itself is never in the database
  (`maitre.memory.keyfile` says where it comes from); `memory_meta` holds only `secret_check`, a
  keyed digest of a constant that tells the right secret from a wrong one. A store written before
  the secret moved out kept it in `hmac_secret`: on first open it is moved to the key file (SQLite)
  or must be configured (PostgreSQL), and deleted from the database.
- **The tombstone identity** (`tombstone_identity`) names how values are folded and digested
  (`maitre.memory.identity.identity_version`). Tombstones written before it (version 1) cannot be
  re-digested without the values they stand for, so the store keeps checking them with the old digest
  too (`legacy_tombstones`).
- **The embedder** (`name/dimension`) made every stored vector. Opened with another, similarity
  would compare vectors of two different spaces; `MemoryStore.reindex` re-embeds and records it.

These run inside the caller's write transaction.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..embeddings import Embedder
from ..exceptions import UserError
from .backend import Db
from .identity import identity_version
from .keyfile import SECRET_ENV, SECRET_FILE_ENV, SecretSource, create_key_file, read_key_file
from .model import tombstone_digest

__all__ = [
    "TombstoneKeys",
    "check_embedder",
    "embedder_identity",
    "record_embedder",
    "tombstone_keys",
    "tombstone_secret",
]

log = logging.getLogger(__name__)

_SECRET_CHECK = "maitre-memory-secret-check"
_CONFIGURE = (
    f"pass `secret=` or `secret_file=` to MemoryStore, or set ${SECRET_ENV} (the secret, "
    f"'hex:...' for hex) or ${SECRET_FILE_ENV} (a file holding it)"
)


@dataclass(frozen=True)
class TombstoneKeys:
    """The tombstone secret and whether version-1 tombstones must be checked too."""

    secret: bytes
    legacy: bool
    moved_out: bool = False
    """True if this open deleted a legacy in-database secret (its bytes still need erasing)."""


def _check(secret: bytes) -> str:
    # The version-1 digest of a constant: stores that already have a `secret_check` keep it valid.
    return tombstone_digest(secret, "", "", "", _SECRET_CHECK)


def tombstone_keys(
    db: Db, configured: SecretSource | None, *, key_file: Path | None, ephemeral: bool
) -> TombstoneKeys:
    """The secret to key tombstones with, checked against the store; moves a legacy in-database secret out.

    `key_file` is the generated key file of an embedded database (None for a server database);
    `ephemeral` is True for a database that dies with the process (`:memory:`).
    """
    meta = dict(db.execute("SELECT name, value FROM memory_meta"))
    stored_hex = meta.get("hmac_secret")
    check = meta.get("secret_check")
    legacy_secret = bytes.fromhex(stored_hex) if stored_hex is not None else None
    if configured is not None:
        secret, where = configured.secret, configured.where
        if legacy_secret is not None and legacy_secret != secret:
            raise UserError(
                f"The tombstone secret from {where} is not the one this memory store was created with "
                "(it is kept in the database, from before secrets moved out). Unset it to move the "
                f"stored one to the key file, or configure 'hex:' + memory_meta.hmac_secret."
            )
    elif legacy_secret is not None:
        if key_file is None and not ephemeral:
            raise UserError(
                "This memory store keeps its tombstone secret inside the database, where a copy of the "
                "database can test guesses against its tombstones. Configure it instead: set "
                f"${SECRET_ENV} to 'hex:' followed by the `hmac_secret` value of its memory_meta table; "
                "the store then deletes it from the database."
            )
        secret, where = legacy_secret, "the database"
        if key_file is not None:
            secret, where = create_key_file(key_file, legacy_secret), f"the key file {key_file}"
            if secret != legacy_secret:
                raise UserError(
                    f"{key_file} holds another key than the one this memory store was created with; "
                    "move that file away (it belongs to another database) and open the store again."
                )
    else:
        from_file = read_key_file(key_file) if key_file is not None else None
        if from_file is not None:
            secret, where = from_file, f"the key file {key_file}"
        elif check is not None:
            looked = f"its key file {key_file} is missing, and " if key_file is not None else ""
            raise UserError(
                f"This memory store was created with a tombstone secret, but {looked}no secret is "
                f"configured; without it forgotten facts could come back. Restore the key file, or {_CONFIGURE}."
            )
        elif key_file is not None:
            secret, where = create_key_file(key_file), f"the key file {key_file}"
        elif ephemeral:
            secret, where = secrets.token_bytes(32), "this process"
        else:
            raise UserError(
                "A memory store on a server database needs a tombstone secret from configuration "
                f"(kept outside the database, so a copy of it cannot test guesses): {_CONFIGURE}."
            )
    if check is not None and check != _check(secret):
        raise UserError(
            f"The tombstone secret from {where} does not match the one this memory store was created "
            "with; tombstones would stop matching. Use the original secret."
        )
    if check is None:
        db.execute("INSERT INTO memory_meta (name, value) VALUES (?, ?)", ("secret_check", _check(secret)))
    if stored_hex is not None:
        db.execute("DELETE FROM memory_meta WHERE name = 'hmac_secret'")
        log.info("memory: moved the tombstone secret out of the database (now from %s)", where)
    return TombstoneKeys(secret=secret, legacy=_note_identity(db, meta), moved_out=stored_hex is not None)


def _note_identity(db: Db, meta: dict[str, str]) -> bool:
    """Record the tombstone identity; True if version-1 tombstones exist and must be checked too."""
    recorded, current = meta.get("tombstone_identity"), identity_version()
    if recorded is None:
        if db.execute("SELECT 1 FROM memory_tombstones LIMIT 1"):
            db.execute("INSERT INTO memory_meta (name, value) VALUES ('legacy_tombstones', '1')")
            meta["legacy_tombstones"] = "1"
        db.execute("INSERT INTO memory_meta (name, value) VALUES ('tombstone_identity', ?)", (current,))
    elif recorded != current:
        log.warning(
            "memory: tombstones were written with value folding %s, this maitre folds with %s; a forgotten "
            "value whose folding changed between the two may not be recognised",
            recorded,
            current,
        )
        db.execute("UPDATE memory_meta SET value = ? WHERE name = 'tombstone_identity'", (current,))
    return meta.get("legacy_tombstones") == "1"


def tombstone_secret(db: Db, secret: bytes | None) -> bytes:
    """The tombstone secret (kept for callers of the old name; the store uses `tombstone_keys`)."""
    configured = SecretSource(secret, "secret=") if secret is not None else None
    return tombstone_keys(db, configured, key_file=None, ephemeral=True).secret


def embedder_identity(embedder: Embedder) -> str:
    """`name/dimension` of an embedder, as recorded beside the vectors it made."""
    return f"{getattr(embedder, 'name', type(embedder).__name__)}/{embedder.dim}"


def check_embedder(db: Db, identity: str) -> None:
    """Record `identity` if no embedder is recorded yet; a `UserError` if another one is."""
    rows = db.execute("SELECT value FROM memory_meta WHERE name = 'embedder'")
    if not rows:
        db.execute("INSERT INTO memory_meta (name, value) VALUES ('embedder', ?)", (identity,))
    elif rows[0][0] != identity:
        raise UserError(
            f"This memory store's vectors were made by {rows[0][0]!r} but the store was opened with "
            f"{identity!r}. Open it with the same embedder, or call reindex() to re-embed every fact."
        )


def record_embedder(db: Db, identity: str) -> None:
    """Record `identity` as the embedder of every stored vector (after a reindex)."""
    db.execute("DELETE FROM memory_meta WHERE name = 'embedder'")
    db.execute("INSERT INTO memory_meta (name, value) VALUES ('embedder', ?)", (identity,))
