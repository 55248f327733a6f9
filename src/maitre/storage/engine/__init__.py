"""One engine per backend, behind the `Engine` protocol the concerns are written against.

- `base`: `Engine`, `Tx` (a unit of work), `Executor`, `Dialect`, `Schema` / `Migration`, and the
  `SearchHooks` that memory and the tool index will use;
- `migrations`: the schema-version rules, written once;
- `sqlite` (the default: one file, WAL), `postgres` (`psycopg_pool`), `redis` (rate limits only).

The Postgres and Redis modules import their drivers; import them only when asked for.
"""

from __future__ import annotations

from maitre.storage.engine.base import Dialect, Engine, Executor, Migration, Schema, SearchHooks, Tx

__all__ = ["Dialect", "Engine", "Executor", "Migration", "Schema", "SearchHooks", "Tx"]
