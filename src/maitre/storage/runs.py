"""Serialised agent runs in the `runs` table, for every SQL engine.

`save` is one upsert that updates a run only for its own tenant (`WHERE r.tenant = excluded.tenant`):
a run id taken by another tenant changes no row and is refused, never overwritten.

`save(..., user=...)` seals the state (a transcript is personal data) under that user's key:
the row holds `{"$sealed_for": user, "$sealed": "pd1..."}`, `load` opens it while the key lives and
answers None (no such run) once a forget erased it.
"""

from __future__ import annotations

import builtins
import json

from maitre.storage._rows import run_filter, run_from_row
from maitre.storage.base import RunState, RunSummary, StoreError, now_or
from maitre.storage.engine.base import Engine
from maitre.storage.subject_keys import SubjectKeys

__all__ = ["SQLRunStore"]

_SAVE = (
    "INSERT INTO {s}.runs AS r (run_id, tenant, status, state_json, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
    "state_json = excluded.state_json, updated_at = excluded.updated_at WHERE r.tenant = excluded.tenant"
)
_LOAD = "SELECT status, state_json, tenant FROM {s}.runs WHERE run_id = ?"


class SQLRunStore:
    """`RunStore` over an engine (`subject_keys` seal a state saved with its `user`)."""

    def __init__(self, engine: Engine, subject_keys: SubjectKeys | None = None) -> None:
        self._engine = engine
        self._keys = subject_keys

    async def save(
        self,
        run_id: str,
        *,
        tenant: str,
        status: str,
        state_json: str,
        now: float | None = None,
        user: str | None = None,
    ) -> None:
        at = now_or(now)
        if user is not None and self._keys is not None:
            key = await self._keys.key(tenant, user)
            assert key is not None  # created when missing
            state_json = json.dumps(
                {_FOR: user, _SEALED: key.seal(state_json, _purpose(run_id))}, separators=(",", ":")
            )
        if await self._engine.execute(_SAVE, (run_id, tenant, status, state_json, at, at)) != 1:
            raise StoreError(f"run {run_id!r} belongs to another tenant")

    async def load(self, run_id: str, *, tenant: str | None = None) -> RunState | None:
        row = await self._engine.fetchone(_LOAD, (run_id,))
        found = run_from_row(row, tenant)
        if found is None or not found.state_json.startswith(_SEALED_START) or self._keys is None:
            return found
        assert row is not None
        sealed = json.loads(found.state_json)
        key = await self._keys.key(str(row[2]), str(sealed[_FOR]), create=False)
        opened = None if key is None else key.open(str(sealed[_SEALED]), _purpose(run_id))
        return None if opened is None else RunState(found.status, opened)

    async def list(
        self, *, status: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> builtins.list[RunSummary]:
        where, params = run_filter(status=status, tenant=tenant)
        sql = f"SELECT run_id, status, updated_at FROM {{s}}.runs{where} ORDER BY updated_at DESC, run_id LIMIT ?"
        params.append(limit)
        return [RunSummary(*row) for row in await self._engine.fetchall(sql, params)]


_FOR = "$sealed_for"
_SEALED = "$sealed"
_SEALED_START = '{"$sealed_for":'


def _purpose(run_id: str) -> str:
    return f"runs.state:{run_id}"
