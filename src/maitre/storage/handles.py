"""Result pages cut by a token cap, in the `handles` table, for every SQL engine.

`put` is one upsert that replaces a row only when it has expired (`WHERE h.expires_at <=
excluded.created_at`): a live handle is never overwritten, a dead one may be reused. `get` checks the
tenant (and the user when given) in SQL, so another tenant's handle reads exactly like an unknown one.
"""

from __future__ import annotations

from typing import Any

from maitre.storage._rows import dump_json, handle_from_row
from maitre.storage.base import AlreadyExistsError, HandleData, now_or
from maitre.storage.engine.base import Engine

__all__ = ["SQLHandleStore"]

_PUT = (
    "INSERT INTO {s}.handles AS h (handle, tenant, user_id, pages, meta, created_at, expires_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (handle) DO UPDATE SET tenant = excluded.tenant, "
    "user_id = excluded.user_id, pages = excluded.pages, meta = excluded.meta, "
    "created_at = excluded.created_at, expires_at = excluded.expires_at "
    "WHERE h.expires_at <= excluded.created_at"
)
_GET = (
    "SELECT pages, meta FROM {s}.handles WHERE handle = ? AND tenant = ? AND expires_at > ? "
    "AND (CAST(? AS TEXT) IS NULL OR user_id = ?)"
)
_PURGE = "DELETE FROM {s}.handles WHERE expires_at <= ?"


class SQLHandleStore:
    """`HandleStore` over an engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def put(
        self,
        handle: str,
        *,
        tenant: str,
        user: str,
        pages: list[str],
        meta: dict[str, Any],
        now: float | None = None,
        ttl_s: float = 3600.0,
    ) -> None:
        at = now_or(now)
        params = (handle, tenant, user, dump_json(list(pages)), dump_json(meta), at, at + ttl_s)
        if await self._engine.execute(_PUT, params) != 1:
            raise AlreadyExistsError(f"handle {handle!r} already exists")

    async def get(
        self, handle: str, *, tenant: str, user: str | None = None, now: float | None = None
    ) -> HandleData | None:
        row = await self._engine.fetchone(_GET, (handle, tenant, now_or(now), user, user))
        return handle_from_row(row)

    async def purge(self, *, now: float | None = None) -> int:
        return await self._engine.execute(_PURGE, (now_or(now),))
