"""`maitre console add-user`: an account in the store's own database, its password only as a hash."""

from __future__ import annotations

import sqlite3
from typing import Any

import anyio
from typer.testing import CliRunner

from maitre.cli import app
from maitre.console.accounts import account_store, verify_password
from maitre.stores import open_stores


def make_store(path: str) -> None:
    async def create() -> None:
        await (await open_stores(path)).close()

    anyio.run(create)


def account(path: str, name: str) -> Any:
    async def read() -> Any:
        async with await open_stores(path) as stores:
            return await account_store(stores).get(name)

    return anyio.run(read)


def test_add_user_stores_an_argon2_hash_with_tenant_and_roles(tmp_path):
    path = str(tmp_path / "shop.db")
    make_store(path)
    args = ["console", "add-user", "bob", "--tenant", "acme", "--role", "approver", "--stores", path]
    result = CliRunner().invoke(app, [*args, "--password-stdin"], input="a long password\n")
    assert result.exit_code == 0, result.output
    assert "created console account bob" in result.output
    bob = account(path, "bob")
    assert bob.tenant == "acme" and bob.roles == frozenset({"approver"})
    assert verify_password(bob.password_hash, "a long password")
    with sqlite3.connect(path) as conn:  # nowhere in the file in plain text
        dump = "\n".join(conn.iterdump())
    assert "a long password" not in dump and "$argon2id$" in dump
    again = CliRunner().invoke(
        app, [*args[:-4], "--stores", path, "--password-stdin"], input="another password\n"
    )
    assert again.exit_code == 0 and "replaced" in again.output
    assert account(path, "bob").roles == frozenset()  # replaced: the new command's roles only


def test_add_user_refuses_a_short_password_and_a_missing_store(tmp_path):
    path = str(tmp_path / "shop.db")
    make_store(path)
    short = CliRunner().invoke(
        app,
        ["console", "add-user", "bob", "--tenant", "acme", "--stores", path, "--password-stdin"],
        input="short\n",
    )
    assert short.exit_code == 2 and account(path, "bob") is None
    missing = tmp_path / "typo.db"
    result = CliRunner().invoke(
        app,
        ["console", "add-user", "bob", "--tenant", "acme", "--stores", str(missing), "--password-stdin"],
        input="a long password\n",
    )
    assert result.exit_code != 0 and not missing.exists()
