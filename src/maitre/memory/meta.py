"""The store's own settings in `memory_meta`: the tombstone secret and the embedder's identity.

Both are checked when a store is opened or first embeds, because a mismatch breaks a promise
silently rather than loudly:

- **The tombstone secret** keys the HMAC of every tombstone. Opened with another secret, the store
  would stop recognising what a user asked it to forget. A secret passed by the application is
  never stored: only a digest to check it against (`secret_check`); without one, a random secret is
  generated and kept in the database (`hmac_secret`).
- **The embedder** (`name/dimension`) made every stored vector. Opened with another, similarity
  would compare vectors of two different spaces; `MemoryStore.reindex` re-embeds and records it.

These run inside the caller's write transaction.
"""

from __future__ import annotations

import secrets

from ..embeddings import Embedder
from ..exceptions import UserError
from .backend import Db
from .model import tombstone_digest

__all__ = ["check_embedder", "embedder_identity", "record_embedder", "tombstone_secret"]

_SECRET_CHECK = "maitre-memory-secret-check"


def tombstone_secret(db: Db, secret: bytes | None) -> bytes:
    """The secret to key tombstones with: `secret` once checked against the store, else the stored one."""
    meta = dict(db.execute("SELECT name, value FROM memory_meta"))
    if secret is None:
        stored = meta.get("hmac_secret")
        if stored is None and "secret_check" in meta:
            raise UserError(
                "This memory store was created with an external tombstone secret; pass the same "
                "`secret=` (or --secret-env for the CLI)."
            )
        if stored is None:
            stored = secrets.token_hex(32)
            db.execute("INSERT INTO memory_meta (name, value) VALUES (?, ?)", ("hmac_secret", stored))
        return bytes.fromhex(stored)
    check = tombstone_digest(secret, "", "", "", _SECRET_CHECK)
    if "secret_check" not in meta and "hmac_secret" not in meta:
        db.execute("INSERT INTO memory_meta (name, value) VALUES (?, ?)", ("secret_check", check))
    elif meta.get("secret_check") != check:
        raise UserError(
            "The tombstone secret does not match the one this memory store was created with; "
            "tombstones would stop matching. Pass the original secret."
        )
    return secret


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
