"""The approval console: a server-rendered web page where a signed-in person decides pending calls.

It reads and writes the same stores as the gate (SQLite or Postgres), so it runs beside
`maitre serve` or an `Agent`. Pages are Jinja2 templates with autoescaping and no inline script;
every form carries a CSRF token; a decision goes through the gate's own `ApprovalService` as the
signed-in account (marked `via=console`) and is appended to the audit chain.

Needs the `console` extra (`pip install 'maitre[console]'`): jinja2, argon2-cffi, itsdangerous,
and starlette from the `mcp` extra.
"""

from __future__ import annotations

from .accounts import (
    CONSOLE_SCHEMA,
    Account,
    AccountStore,
    MemoryAccountStore,
    SQLAccountStore,
    account_store,
)

__all__ = [
    "Account",
    "AccountStore",
    "CONSOLE_SCHEMA",
    "MemoryAccountStore",
    "SQLAccountStore",
    "account_store",
]
