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


def closed_port_url() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_console_with_an_unreachable_issuer_exits_2_with_one_line_before_serving(tmp_path, monkeypatch):
    path = str(tmp_path / "shop.db")
    make_store(path)
    config = tmp_path / "maitre.toml"
    issuer = closed_port_url()
    config.write_text(f'[console]\noidc_issuer = "{issuer}"\noidc_client_id = "maitre-console"\n')
    monkeypatch.setenv("MAITRE_CONFIG", str(config))
    monkeypatch.setenv("MAITRE_CONSOLE_SECRET", "a-stable-console-secret")
    result = CliRunner().invoke(app, ["console", "--stores", path, "--port", "1"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "OIDC discovery" in lines[0] and "cannot reach the issuer" in lines[0]
    assert "maitre console on" not in result.output  # it never started


def test_console_section_mistakes_are_refused_when_the_file_is_read(tmp_path, monkeypatch):
    config = tmp_path / "maitre.toml"
    monkeypatch.setenv("MAITRE_CONFIG", str(config))
    for text, says in [
        ("[console]\nlocal_accounts = false\n", "nobody could sign in"),
        ('[console]\noidc_issuer = "https://id.example.com"\n', "needs oidc_client_id"),
        ('[console]\noidc_issuer = "http://id.example.com"\noidc_client_id = "c"\n', "https://"),
        ('[console]\nsecret = "short"\n', "at least 16 characters"),
    ]:
        config.write_text(text)
        result = CliRunner().invoke(app, ["config", "show"])
        assert result.exit_code == 2 and says in result.output, (text, result.output)


def test_config_show_masks_the_console_secret_and_the_oidc_client_secret(tmp_path, monkeypatch):
    import json

    config = tmp_path / "maitre.toml"
    config.write_text(
        "[console]\n"
        'secret = "session-signing-secret-123"\n'
        'oidc_issuer = "https://id.example.com"\n'
        'oidc_client_id = "maitre-console"\n'
        'oidc_client_secret = "client-secret-456"\n'
        "local_accounts = false\n"
    )
    monkeypatch.setenv("MAITRE_CONFIG", str(config))
    shown = CliRunner().invoke(app, ["config", "show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert "session-signing-secret-123" not in shown.output and "client-secret-456" not in shown.output
    values = json.loads(shown.stdout)["values"]
    assert values["console.secret"] == "***" and values["console.oidc_client_secret"] == "***"
    assert (
        values["console.oidc_issuer"] == "https://id.example.com"
        and values["console.local_accounts"] is False
    )
    assert values["console.name_claim"] == "sub" and values["console.sign_in_limit"] == 5
