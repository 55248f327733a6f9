"""Local console accounts: a name, a tenant, roles and an argon2 password hash (never the password).

For a single machine, `maitre console add-user` creates them. They live in the stores' own
database, in the `console` component's table (`maitre_console_accounts`), declared here as a
`Schema` the engine migrates like any other component's; in-memory stores get a dict instead.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..exceptions import UserError
from ..storage.engine.base import Engine, Migration, Schema

__all__ = [
    "Account",
    "AccountStore",
    "CONSOLE_SCHEMA",
    "MemoryAccountStore",
    "SQLAccountStore",
    "account_store",
    "burn_verification",
    "hash_password",
    "verify_password",
]

_TABLE = """CREATE TABLE IF NOT EXISTS {s}.maitre_console_accounts (
    name TEXT PRIMARY KEY, tenant TEXT NOT NULL, roles TEXT NOT NULL, password_hash TEXT NOT NULL,
    created_at {REAL} NOT NULL)"""

CONSOLE_SCHEMA = Schema(
    component="console",
    migrations=(Migration(version=1, statements=(_TABLE,)),),
    tables=frozenset({"maitre_console_accounts"}),
)
"""The console's one table, as forward migrations."""


@dataclass(frozen=True, kw_only=True)
class Account:
    """A person who may sign in to the console.

    A local account is a row of the table. A person signed in with OIDC is an `Account` too, made
    from the session (`Console.signed_in`), with an empty `password_hash`: it is never stored, and
    no password can match it (`verify_password` refuses an unreadable hash).
    """

    name: str
    tenant: str
    roles: frozenset[str] = field(default_factory=frozenset)
    password_hash: str = field(repr=False, default="")
    created_at: float = 0.0


def _hasher() -> Any:
    from argon2 import PasswordHasher

    return PasswordHasher()


def hash_password(password: str) -> str:
    """The argon2id hash of `password` (salted; parameters are argon2-cffi's current defaults)."""
    if not password:
        raise UserError("a console password cannot be empty")
    hashed: str = _hasher().hash(password)
    return hashed


def verify_password(password_hash: str, password: str) -> bool:
    """True when `password` matches; False for a wrong password or an unreadable hash."""
    from argon2.exceptions import InvalidHashError, VerificationError

    try:
        return bool(_hasher().verify(password_hash, password))
    except (VerificationError, InvalidHashError):
        return False


_DUMMY_HASH: str | None = None


def burn_verification(password: str) -> None:
    """Spend one verification's time for an unknown account, so timing does not tell names apart."""
    global _DUMMY_HASH
    if _DUMMY_HASH is None:
        _DUMMY_HASH = hash_password("no such account")
    verify_password(_DUMMY_HASH, password)


class AccountStore(Protocol):
    """**Protocol:** where console accounts are kept."""

    async def get(self, name: str) -> Account | None: ...

    async def put(self, account: Account) -> None:
        """Create the account, or replace the one of that name (a new password, new roles)."""
        ...


class MemoryAccountStore:
    """Accounts in a dict (tests; in-memory stores)."""

    def __init__(self) -> None:
        self._accounts: dict[str, Account] = {}

    async def get(self, name: str) -> Account | None:
        return self._accounts.get(name)

    async def put(self, account: Account) -> None:
        self._accounts[account.name] = account


class SQLAccountStore:
    """Accounts in the stores' database (SQLite or Postgres), migrated on first use (the engine
    renders the portable SQL: `{s}.`, `?`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._ready = False

    async def _migrate(self) -> None:
        if not self._ready:
            await self._engine.migrate(CONSOLE_SCHEMA)
            self._ready = True

    async def get(self, name: str) -> Account | None:
        await self._migrate()
        sql = (
            "SELECT name, tenant, roles, password_hash, created_at FROM {s}.maitre_console_accounts "
            "WHERE name = ?"
        )
        row = await self._engine.fetchone(sql, (name,))
        if row is None:
            return None
        return Account(
            name=row[0],
            tenant=row[1],
            roles=frozenset(json.loads(row[2])),
            password_hash=row[3],
            created_at=float(row[4]),
        )

    async def put(self, account: Account) -> None:
        await self._migrate()
        params = (
            account.tenant,
            json.dumps(sorted(account.roles)),
            account.password_hash,
            account.created_at or time.time(),
            account.name,
        )
        changed = await self._engine.execute(
            (
                "UPDATE {s}.maitre_console_accounts SET tenant = ?, roles = ?, password_hash = ?, "
                "created_at = ? WHERE name = ?"
            ),
            params,
        )
        if not changed:
            await self._engine.execute(
                (
                    "INSERT INTO {s}.maitre_console_accounts (tenant, roles, password_hash, created_at, name) "
                    "VALUES (?, ?, ?, ?, ?)"
                ),
                params,
            )


def account_store(stores: Any) -> AccountStore:
    """The account store beside `stores`: its database when it has one (`stores.db`), else memory."""
    engine = getattr(stores, "db", None)
    if isinstance(engine, Engine):
        return SQLAccountStore(engine)
    return MemoryAccountStore()
