"""DBOS in this process: one system database, one explicit executor id, launched once.

DBOS Transact keeps its state in a *system database* of its own. maitre keeps it apart from the
gate's database, so maitre's schema checks keep meaning what they say:

| maitre's stores                 | DBOS's system database (default)                 |
|---------------------------------|--------------------------------------------------|
| `/var/lib/maitre/maitre.db`     | `sqlite:////var/lib/maitre/maitre.dbos.sqlite`   |
| `postgresql://host/db`          | `postgresql://host/db_dbos` (its own database)   |

`launch(system_database_url, executor_id=...)` configures and launches DBOS; it must run after
every `DurableAgent` of the process is built (DBOS recovers this executor's pending workflows at
launch, and a recovered workflow looks its agent up by name). From inside a running event loop,
recovered workflows run on that loop. `launch` alone holds no executor lease, so only a restart
under the same executor id recovers the process's workflows; `maitre.durable.executor(...)`
takes the lease too, so that any worker recovers them when the process dies.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dbos import DBOS, DBOSConfig

from ..exceptions import UserError

__all__ = [
    "APPLICATION_VERSION",
    "default_executor_id",
    "executor_id",
    "is_launched",
    "launch",
    "shutdown",
    "system_database_for",
    "system_database_url",
]

logger = logging.getLogger("maitre.durable")

APPLICATION_VERSION = "maitre-durable-1"
"""Every maitre process on one system database declares this version, so any of them may recover
another's workflows (DBOS recovers only workflows of its own application version)."""

_launched: dict[str, str] = {}


def system_database_for(stores_url: str) -> str:
    """The DBOS system database beside the maitre stores at `stores_url` (see the module docstring)."""
    if stores_url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(stores_url)
        database = parts.path.lstrip("/") or "postgres"
        return urlunsplit(parts._replace(path=f"/{database}_dbos", query=""))
    if stores_url.startswith("sqlite://"):
        parts = urlsplit(stores_url)
        path = parts.netloc + parts.path
    elif "://" in stores_url or stores_url in (":memory:",):
        raise UserError(f"durable runs need durable stores (a SQLite file or Postgres), not {stores_url!r}")
    else:
        path = stores_url
    file = Path(path).resolve()
    return f"sqlite:///{file.with_name(file.stem + '.dbos.sqlite')}"


def default_executor_id() -> str:
    """`MAITRE_EXECUTOR_ID` if set, else one new id for this process (host, pid, random)."""
    configured = os.environ.get("MAITRE_EXECUTOR_ID")
    if configured:
        return configured
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


def launch(
    system_database_url: str,
    *,
    executor_id: str | None = None,
    log_level: str = "WARNING",
    extra: dict[str, Any] | None = None,
    queue_poll_s: float | None = None,
) -> str:
    """Configure and launch DBOS for this process; returns its executor id. Launching again with
    the same database and executor id does nothing; with others it is a `UserError`.

    `queue_poll_s`: how often DBOS's internal queue - where recovered workflows wait for an
    executor - is polled (DBOS's default, 1 s, when None; `MAITRE_DURABLE_QUEUE_POLL_S` sets it too).
    """
    chosen = executor_id or default_executor_id()
    if _launched:
        if _launched == {"url": system_database_url, "executor": chosen} or executor_id is None:
            return _launched["executor"]
        raise UserError(
            f"DBOS is already launched in this process (executor {_launched['executor']!r} on "
            f"{_launched['url']!r}); call maitre.durable.shutdown() first"
        )
    config: DBOSConfig = {
        "name": "maitre",
        "system_database_url": system_database_url,
        "executor_id": chosen,
        "application_version": APPLICATION_VERSION,
        "log_level": log_level,
    }
    if system_database_url.startswith("sqlite:///") and not (extra and "system_database_engine" in extra):
        config["system_database_engine"] = _sqlite_engine(system_database_url)
    if extra:
        config.update(extra)  # type: ignore[typeddict-item]
    dbos = DBOS(config=config)
    poll = queue_poll_s if queue_poll_s is not None else _env_float("MAITRE_DURABLE_QUEUE_POLL_S")
    if poll is not None:
        if poll <= 0:
            raise ValueError("queue_poll_s must be > 0")
        # DBOS 3.4 has no setting for its internal queue's interval; the queue object holds it.
        queue = dbos._registry.get_internal_queue()
        queue._polling_interval_sec = poll
    try:
        DBOS.launch()
    except BaseException:
        DBOS.destroy()
        raise
    _launched.update(url=system_database_url, executor=chosen)
    logger.info("DBOS launched: executor %s on %s", chosen, _redacted(system_database_url))
    return chosen


def shutdown() -> None:
    """Stop DBOS in this process (its threads, its connections); a later `launch` starts afresh."""
    if _launched:
        DBOS.destroy()
        _launched.clear()


def is_launched() -> bool:
    return bool(_launched)


def executor_id() -> str:
    """This process's executor id (`launch` must have run)."""
    if not _launched:
        raise UserError("DBOS is not launched in this process: call maitre.durable.launch(...) first")
    return _launched["executor"]


def system_database_url() -> str:
    if not _launched:
        raise UserError("DBOS is not launched in this process: call maitre.durable.launch(...) first")
    return _launched["url"]


def _sqlite_engine(url: str) -> Any:
    """DBOS's SQLite engine as DBOS builds it (IMMEDIATE transactions, a long busy timeout, foreign
    keys), in WAL mode with `synchronous=NORMAL` - maitre's own SQLite settings: durable across a
    process crash, one fsync per checkpoint instead of the rollback journal's several per commit."""
    import sqlalchemy as sa

    Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        dbapi_conn.isolation_level = "IMMEDIATE"

    return engine


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    return float(value) if value else None


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
