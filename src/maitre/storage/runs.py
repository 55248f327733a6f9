"""Serialised agent runs in the `runs` table, for every SQL engine.

`save` is one upsert that updates a run only for its own tenant (`WHERE r.tenant = excluded.tenant`):
a run id taken by another tenant changes no row and is refused, never overwritten.
"""

from __future__ import annotations

import builtins

from maitre.storage._rows import run_filter, run_from_row
from maitre.storage.base import RunState, RunSummary, StoreError, now_or
from maitre.storage.engine.base import Engine

__all__ = ["SQLRunStore"]

_SAVE = (
    "INSERT INTO {s}.runs AS r (run_id, tenant, status, state_json, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
    "state_json = excluded.state_json, updated_at = excluded.updated_at WHERE r.tenant = excluded.tenant"
)
_LOAD = "SELECT status, state_json, tenant FROM {s}.runs WHERE run_id = ?"


class SQLRunStore:
    """`RunStore` over an engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def save(
        self, run_id: str, *, tenant: str, status: str, state_json: str, now: float | None = None
    ) -> None:
        at = now_or(now)
        if await self._engine.execute(_SAVE, (run_id, tenant, status, state_json, at, at)) != 1:
            raise StoreError(f"run {run_id!r} belongs to another tenant")

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        return run_from_row(await self._engine.fetchone(_LOAD, (run_id,)), tenant)

    async def list(
        self, *, status: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> builtins.list[RunSummary]:
        where, params = run_filter(status=status, tenant=tenant)
        sql = f"SELECT run_id, status, updated_at FROM {{s}}.runs{where} ORDER BY updated_at DESC, run_id LIMIT ?"
        params.append(limit)
        return [RunSummary(*row) for row in await self._engine.fetchall(sql, params)]
