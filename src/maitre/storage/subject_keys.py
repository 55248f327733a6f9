"""Per-subject keys for personal data in the gate's stores: crypto-shredding that `forget` can do.

A tool may declare that its arguments and result are personal data (`Tool.personal`, e.g. the memory
tools). The gate then writes those values into its stores (idempotency records, the audit log,
result handles, approval requests) only as

- **sealed values** (`pd1.<key id>.<base64>`): AES-256-GCM under the *subject's* key, with the
  subject, the key id and the purpose (`idempotency.result`, `audit.arguments`, ...) as associated
  data, so a sealed value cannot be moved to another user's row or another field and still open;
- **subject digests** (`pk1.<key id>.<hex>`): HMAC-SHA256 under the subject's key, where only
  equality matters (the audit log's argument and result digests);
- **index digests**: HMAC-SHA256 under a key derived from the store's master secret, where a
  lookup must keep working after a forget (the idempotency key of a personal call, its fingerprint).

A subject is one user of one tenant, written as two length-prefixed fields (tenant `a` / user `b:c`
and tenant `a:b` / user `c` are two subjects). Its key is 32 random bytes, kept in the table
`maitre_subject_keys` only *wrapped* (AES-GCM under a key derived from the master secret), under
a keyed id of the subject. `erase(tenant, user)` deletes the row: from then on every value sealed
for that subject is unreadable and every subject digest unconfirmable - in every copy, every backup
and the WAL - while the audit chain, whose hashes cover the sealed text, still verifies. The next
personal call of that subject gets a new key.

The master secret never lives in the database. It comes from, in order: `secret=` / `secret_file=`,
the environment (`MAITRE_GATE_SECRET` / `MAITRE_GATE_SECRET_FILE`, else memory's
`MAITRE_MEMORY_SECRET` / `MAITRE_MEMORY_SECRET_FILE`), and for an embedded SQLite file a generated
key file `<database>.key` beside it (mode 0600, the same file and format `maitre.memory` uses). A
PostgreSQL store must be configured; without a secret the first personal call fails with a clear
error, and nothing personal is written. In-process stores use a random secret that dies with them.
Only personal tools ever touch any of this: no other call reads the table or derives a key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from maitre.exceptions import StoreError
from maitre.storage.engine.base import Engine, Migration, Schema
from maitre.storage.erasure import BackgroundEraser
from maitre.storage.keyfile import create_key_file, parse_secret_text

__all__ = [
    "GATE_SECRET_ENV",
    "GATE_SECRET_FILE_ENV",
    "MasterSecret",
    "MemorySubjectKeys",
    "SEALED_PREFIX",
    "SQLSubjectKeys",
    "SUBJECT_DIGEST_PREFIX",
    "SUBJECT_KEYS_SCHEMA",
    "SubjectKey",
    "SubjectKeys",
    "is_sealed",
    "master_secret",
    "subject_field",
]

log = logging.getLogger(__name__)

GATE_SECRET_ENV = "MAITRE_GATE_SECRET"
"""Environment variable holding the gate's master secret (`hex:...` or text)."""
GATE_SECRET_FILE_ENV = "MAITRE_GATE_SECRET_FILE"
"""Environment variable naming a file that holds it."""
_MEMORY_ENVS = ("MAITRE_MEMORY_SECRET", "MAITRE_MEMORY_SECRET_FILE")

SEALED_PREFIX = "pd1."
"""A sealed personal value: `pd1.<key id>.<urlsafe base64 of nonce + ciphertext>`."""
SUBJECT_DIGEST_PREFIX = "pk1."
"""A subject digest: `pk1.<key id>.<64 hex>`."""

_WRAP_INFO = b"maitre-gate-subject-wrap-v1"
_INDEX_INFO = b"maitre-gate-index-v1"
_SUBJECT_INFO = b"maitre-gate-subject-id-v1"


def subject_field(text: str) -> bytes:
    """One length-prefixed field (8-byte big-endian length, then UTF-8; lone surrogates kept
    distinct): no choice of ids can shift a boundary."""
    data = text.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(8, "big") + data


def _subject(tenant: str, user: str) -> bytes:
    return subject_field(tenant) + subject_field(user)


def is_sealed(value: object) -> bool:
    """True for a sealed personal value (`pd1.`)."""
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


def _hkdf(secret: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 (RFC 5869) of `secret`, 32 bytes for `info`."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)


def _aead(key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


@dataclass(frozen=True)
class SubjectKey:
    """One subject's live key: seals values and takes digests for that subject only."""

    key_id: str
    """Random id, written into every sealed value and digest (a value of an erased key is known
    as forgotten, not as corrupt)."""
    material: bytes = field(repr=False)
    subject: bytes = field(repr=False)
    """The length-prefixed (tenant, user) the key belongs to (associated data of every seal)."""

    def _aad(self, purpose: str) -> bytes:
        return subject_field(purpose) + self.subject + subject_field(self.key_id)

    def seal(self, text: str, purpose: str) -> str:
        """`text` encrypted for this subject and `purpose` (AES-256-GCM, a random 96-bit nonce)."""
        nonce = secrets.token_bytes(12)
        sealed = _aead(self.material).encrypt(
            nonce, text.encode("utf-8", "surrogatepass"), self._aad(purpose)
        )
        body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")
        return f"{SEALED_PREFIX}{self.key_id}.{body}"

    def open(self, sealed: str, purpose: str) -> str | None:
        """The text of a value this key sealed for `purpose`; None when another key sealed it (an
        erased one). Raises `StoreError` when it is this key's but does not open (tampered)."""
        key_id, body = _split(sealed, SEALED_PREFIX)
        if key_id != self.key_id:
            return None
        from cryptography.exceptions import InvalidTag

        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        try:
            plain: bytes = _aead(self.material).decrypt(raw[:12], raw[12:], self._aad(purpose))
        except InvalidTag:
            raise StoreError(
                f"a sealed personal value ({purpose}) does not open under its subject's key: it was "
                "altered, or copied from another user's record"
            ) from None
        return plain.decode("utf-8", "surrogatepass")

    def digest(self, text: str, purpose: str) -> str:
        """HMAC-SHA256 of `text` for `purpose` under this subject's key (unconfirmable once erased)."""
        mac = hmac.new(self.material, subject_field(purpose) + subject_field(text), hashlib.sha256)
        return f"{SUBJECT_DIGEST_PREFIX}{self.key_id}.{mac.hexdigest()}"


def _split(value: str, prefix: str) -> tuple[str, str]:
    if not value.startswith(prefix) or value.count(".") < 2:
        raise StoreError(f"not a sealed personal value: {value[:24]!r}")
    key_id, _, body = value[len(prefix) :].partition(".")
    return key_id, body


# ------------------------------------------------------------------------------------ the master secret


@dataclass(frozen=True)
class MasterSecret:
    """The master secret and where it came from (named in errors, never the secret itself)."""

    secret: bytes = field(repr=False)
    where: str


def _parse(text: str, where: str) -> bytes:
    return parse_secret_text(text, where, what="the gate secret", error=StoreError)


def _read(path: Path, where: str) -> bytes:
    try:
        return _parse(path.read_text(encoding="utf-8", errors="surrogateescape"), where)
    except FileNotFoundError:
        raise StoreError(f"the gate secret file {path} ({where}) does not exist") from None


def _key_file(path: Path) -> bytes:
    """The secret in the key file beside the database, created (0600, atomically) if missing."""
    where = f"the key file {path}"
    if path.exists():
        return _read(path, where)
    return create_key_file(path, None, read=lambda found: _read(found, where))


def master_secret(
    secret: bytes | str | None = None,
    secret_file: str | os.PathLike[str] | None = None,
    *,
    database: str | None = None,
) -> Callable[[], MasterSecret]:
    """How a store finds its master secret (resolved on first use, see the module docstring).

    `database` is an embedded SQLite file's path (a key file may be generated beside it), `":memory:"`
    for a process-local secret, or None for a server database that must be configured.
    """
    resolved: list[MasterSecret] = []
    lock = threading.Lock()

    def resolve() -> MasterSecret:
        with lock:
            if not resolved:
                resolved.append(_resolve(secret, secret_file, database))
            return resolved[0]

    return resolve


def _resolve(
    secret: bytes | str | None, secret_file: str | os.PathLike[str] | None, database: str | None
) -> MasterSecret:
    if isinstance(secret, bytes):
        if not secret:
            raise StoreError("the gate secret from secret= is empty")
        return MasterSecret(secret, "secret=")
    if secret is not None:
        return MasterSecret(_parse(secret, "secret="), "secret=")
    if secret_file is not None:
        return MasterSecret(_read(Path(secret_file), "secret_file="), f"secret_file={secret_file}")
    for env, env_file in ((GATE_SECRET_ENV, GATE_SECRET_FILE_ENV), _MEMORY_ENVS):
        if os.environ.get(env):
            return MasterSecret(_parse(os.environ[env], env), f"${env}")
        if os.environ.get(env_file):
            named = os.environ[env_file]
            return MasterSecret(_read(Path(named), env_file), f"${env_file}={named}")
    if database == ":memory:":
        return MasterSecret(secrets.token_bytes(32), "this process")
    if database is not None:
        path = Path(f"{database}.key")
        return MasterSecret(_key_file(path), f"the key file {path}")
    raise StoreError(
        "a personal tool's data is sealed under a master secret kept outside the database, and this "
        f"server store has none: set ${GATE_SECRET_ENV} (or ${GATE_SECRET_FILE_ENV}, or memory's "
        "MAITRE_MEMORY_SECRET) to 'hex:' + 64 random hex digits, or pass secret= to the stores"
    )


# ----------------------------------------------------------------------------------------- the stores


@runtime_checkable
class SubjectKeys(Protocol):
    """**Protocol:** per-subject keys (see the module docstring)."""

    def index_digest(self, text: str, purpose: str) -> str:
        """HMAC-SHA256 hex of `text` under the master-derived index key (stable across erasures)."""
        ...

    async def key(self, tenant: str, user: str, *, create: bool = True) -> SubjectKey | None:
        """The subject's live key; a new one when it has none and `create` (else None)."""
        ...

    async def erase(self, tenant: str, user: str) -> bool:
        """Destroy the subject's key (True if it had one): everything sealed for it is unreadable."""
        ...


class _Keys:
    """What both backends share: the derived keys, wrapping and the keyed subject id."""

    def __init__(self, secret: Callable[[], MasterSecret]) -> None:
        self._secret = secret
        self._derived: tuple[bytes, bytes, bytes] | None = None

    def _keys(self) -> tuple[bytes, bytes, bytes]:
        derived = self._derived
        if derived is None:
            master = self._secret().secret
            derived = self._derived = (
                _hkdf(master, _WRAP_INFO),
                _hkdf(master, _INDEX_INFO),
                _hkdf(master, _SUBJECT_INFO),
            )
        return derived

    @property
    def where(self) -> str:
        """Where the master secret came from."""
        return self._secret().where

    def index_digest(self, text: str, purpose: str) -> str:
        mac = hmac.new(self._keys()[1], subject_field(purpose) + subject_field(text), hashlib.sha256)
        return mac.hexdigest()

    def subject_id(self, tenant: str, user: str) -> str:
        return hmac.new(self._keys()[2], _subject(tenant, user), hashlib.sha256).hexdigest()

    def _new(self, tenant: str, user: str) -> tuple[SubjectKey, str]:
        key = SubjectKey(secrets.token_hex(8), secrets.token_bytes(32), _subject(tenant, user))
        return key, self._wrap(key)

    def _wrap(self, key: SubjectKey) -> str:
        nonce = secrets.token_bytes(12)
        sealed = _aead(self._keys()[0]).encrypt(nonce, key.material, key.subject + subject_field(key.key_id))
        return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def _unwrap(self, tenant: str, user: str, key_id: str, wrapped: str) -> SubjectKey:
        from cryptography.exceptions import InvalidTag

        subject = _subject(tenant, user)
        raw = base64.urlsafe_b64decode(wrapped)
        try:
            material: bytes = _aead(self._keys()[0]).decrypt(
                raw[:12], raw[12:], subject + subject_field(key_id)
            )
        except InvalidTag:
            raise StoreError(
                f"the gate secret from {self.where} does not open this store's subject keys: it is "
                "not the secret the store was used with (restore it; a new one reads every personal "
                "record as forgotten)"
            ) from None
        return SubjectKey(key_id, material, subject)


class MemorySubjectKeys(_Keys):
    """Subject keys in process memory (with a process-local master secret unless one is given)."""

    def __init__(self, secret: Callable[[], MasterSecret] | None = None) -> None:
        super().__init__(secret or master_secret(database=":memory:"))
        self._rows: dict[str, tuple[str, str]] = {}

    async def key(self, tenant: str, user: str, *, create: bool = True) -> SubjectKey | None:
        sid = self.subject_id(tenant, user)
        row = self._rows.get(sid)
        if row is None:
            if not create:
                return None
            key, wrapped = self._new(tenant, user)
            row = self._rows.setdefault(sid, (key.key_id, wrapped))
        return self._unwrap(tenant, user, *row)

    async def erase(self, tenant: str, user: str) -> bool:
        return self._rows.pop(self.subject_id(tenant, user), None) is not None


_TABLE = """CREATE TABLE IF NOT EXISTS {s}.maitre_subject_keys (
    subject TEXT PRIMARY KEY, key_id TEXT NOT NULL, wrapped TEXT NOT NULL, created_at {REAL} NOT NULL)"""

SUBJECT_KEYS_SCHEMA = Schema(
    component="subject_keys",
    migrations=(Migration(version=1, statements=(_TABLE,)),),
    tables=frozenset({"maitre_subject_keys"}),
)
"""The subject keys table (migrated on first use, beside the gate's tables)."""

_GET = "SELECT key_id, wrapped FROM {s}.maitre_subject_keys WHERE subject = ?"
_ADD = (
    "INSERT INTO {s}.maitre_subject_keys (subject, key_id, wrapped, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (subject) DO NOTHING"
)
_DELETE = "DELETE FROM {s}.maitre_subject_keys WHERE subject = ?"
_CHECK_ROW = "check"
"""The row that holds the master secret's check (subject ids are 64 hex digits: never this)."""


class SQLSubjectKeys(_Keys):
    """Subject keys in the stores' own database (SQLite or Postgres).

    On SQLite an erasure zeroes the freed cells (`secure_delete`) and a background checkpoint empties
    the WAL once no reader pins it (never in the request path: `maitre.storage.erasure`). The
    wrapped key is useless without the master secret in any case.
    """

    def __init__(self, engine: Engine, secret: Callable[[], MasterSecret]) -> None:
        super().__init__(secret)
        self.engine = engine
        self._ready = False
        self._eraser: BackgroundEraser | None = None

    async def _migrate(self) -> None:
        if not self._ready:
            self._keys()  # no secret, no table: fail before writing anything
            await self.engine.migrate(SUBJECT_KEYS_SCHEMA)
            await self._check_secret()
            self._ready = True

    async def _check_secret(self) -> None:
        """The first use records a check of the master secret (an HMAC, never the secret); a later
        open with another secret is refused, rather than reading every personal record as
        forgotten and writing new ones nobody with the first secret could read."""
        check = self.index_digest("check", "master-secret")
        await self.engine.execute(_ADD, (_CHECK_ROW, "check", check, time.time()))
        row = await self.engine.fetchone(_GET, (_CHECK_ROW,))
        if row is None or str(row[1]) != check:
            raise StoreError(
                f"the gate secret from {self.where} is not the one this store's personal records were "
                "sealed with: configure the original secret (or restore its key file)"
            )

    async def key(self, tenant: str, user: str, *, create: bool = True) -> SubjectKey | None:
        await self._migrate()
        sid = self.subject_id(tenant, user)
        row = await self.engine.fetchone(_GET, (sid,))
        if row is None:
            if not create:
                return None
            key, wrapped = self._new(tenant, user)
            await self.engine.execute(_ADD, (sid, key.key_id, wrapped, time.time()))
            row = await self.engine.fetchone(_GET, (sid,))  # another process may have won the race
            if row is None:
                raise StoreError("a subject key vanished while it was being created (erased meanwhile)")
        return self._unwrap(tenant, user, str(row[0]), str(row[1]))

    async def erase(self, tenant: str, user: str) -> bool:
        await self._migrate()
        sid = self.subject_id(tenant, user)
        conn = getattr(self.engine, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            await self.engine.execute("PRAGMA secure_delete = ON")
        erased = await self.engine.execute(_DELETE, (sid,)) > 0
        if erased and isinstance(conn, sqlite3.Connection) and getattr(self.engine, "path", "") != ":memory:":
            if self._eraser is None:
                self._eraser = BackgroundEraser(self._checkpoint, name="maitre-gate-key-checkpoint")
            self._eraser.request()
        return erased

    def wait_erased(self, timeout: float) -> bool:
        """Block until the erased keys left the SQLite WAL (True), or `timeout` seconds passed."""
        return self._eraser is None or self._eraser.wait(timeout)

    def _checkpoint(self) -> bool:
        """One `wal_checkpoint(TRUNCATE)` on its own short-lived connection that gives up at once
        when a reader pins the WAL (the eraser retries)."""
        path = str(getattr(self.engine, "path", ""))
        conn = sqlite3.connect(path, isolation_level=None, timeout=0.05)
        try:
            conn.execute("PRAGMA busy_timeout = 50")
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            log.debug("gate key checkpoint of %s: %s", path, exc)
            return False
        finally:
            conn.close()
        return not busy

    async def close(self) -> None:
        """Stop the background checkpoint (one last attempt if an erasure is pending)."""
        if self._eraser is not None:
            self._eraser.close()
