"""`AsyncMemoryStore`: the async face of `MemoryStore` for the gate, the agent and the memory tools.

Every method runs the synchronous store method in an anyio worker thread (bounded by a capacity
limiter), so a slow embedding or a waiting write lock never blocks the event loop. Keeping one
implementation behind both faces means the conflict rules and the deletion guarantee cannot differ
between sync and async callers. `remember` also accepts an async extractor (a model call), which
runs on the event loop; only the store work goes to a thread.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .extract import AsyncExtractor, ConversationTurn, Extractor, RuleExtractor
from .model import (
    DEFAULT_TENANT,
    Candidate,
    DeleteReport,
    Episode,
    Fact,
    Hit,
    MemoryHit,
    Origin,
    Profile,
    Summary,
    WriteOutcome,
)
from .store import MemoryStore

__all__ = ["AsyncMemoryStore", "When"]

T = TypeVar("T")
When = datetime | date | str | None


class AsyncMemoryStore:
    """Async wrapper around a `MemoryStore`; methods mirror the sync ones."""

    def __init__(self, store: MemoryStore, *, max_threads: int = 8) -> None:
        self.store = store
        self._limiter = anyio.CapacityLimiter(max_threads)

    @classmethod
    async def open(cls, target: str | Path = "maitre-memory.db", **kwargs: Any) -> AsyncMemoryStore:
        """Open a store (SQLite path or `postgresql://` URL) without blocking the event loop."""
        store = await anyio.to_thread.run_sync(functools.partial(MemoryStore, target, **kwargs))
        return cls(store)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._limiter)

    async def write(
        self,
        user: str,
        key: str,
        value: str,
        valid_from: When = None,
        source: str = "",
        *,
        origin: Origin | str = Origin.STATED,
        tenant: str = DEFAULT_TENANT,
        unforget: bool = False,
    ) -> Fact | None:
        """See `MemoryStore.write`."""
        return await self._run(
            self.store.write,
            user,
            key,
            value,
            valid_from,
            source,
            origin=origin,
            tenant=tenant,
            unforget=unforget,
        )

    async def retract(
        self,
        user: str,
        key: str,
        value: str = "",
        valid_from: When = None,
        source: str = "",
        *,
        origin: Origin | str = Origin.STATED,
        tenant: str = DEFAULT_TENANT,
    ) -> WriteOutcome:
        """See `MemoryStore.retract`."""
        return await self._run(
            self.store.retract, user, key, value, valid_from, source, origin=origin, tenant=tenant
        )

    async def apply(
        self, user: str, candidate: Candidate, *, tenant: str = DEFAULT_TENANT, unforget: bool = False
    ) -> WriteOutcome:
        """See `MemoryStore.apply`."""
        return await self._run(self.store.apply, user, candidate, tenant=tenant, unforget=unforget)

    async def apply_many(
        self, user: str, candidates: Sequence[Candidate], *, tenant: str = DEFAULT_TENANT
    ) -> list[WriteOutcome]:
        """See `MemoryStore.apply_many`."""
        return await self._run(self.store.apply_many, user, candidates, tenant=tenant)

    async def remember(
        self,
        user: str,
        messages: Sequence[ConversationTurn],
        *,
        extractor: Extractor | AsyncExtractor | None = None,
        tenant: str = DEFAULT_TENANT,
        episodes: bool = False,
        session: str = "",
    ) -> list[WriteOutcome]:
        """Extract candidates (sync rules or an async model extractor) and write them in one batch.

        With `episodes=True` the messages are kept as episodes first and the facts linked to them."""
        if episodes:
            await self._run(self.store.add_episodes, user, list(messages), tenant=tenant, session=session)
        found = (extractor or RuleExtractor()).extract(messages)
        candidates = await found if inspect.isawaitable(found) else found
        return await self._run(self.store.write_candidates, user, list(candidates), tenant=tenant)

    async def current(
        self,
        user: str,
        key: str,
        *,
        tenant: str = DEFAULT_TENANT,
        valid_at: When = None,
        known_at: When = None,
    ) -> Fact | None:
        """See `MemoryStore.current`."""
        return await self._run(
            self.store.current, user, key, tenant=tenant, valid_at=valid_at, known_at=known_at
        )

    async def values(
        self,
        user: str,
        key: str,
        *,
        tenant: str = DEFAULT_TENANT,
        valid_at: When = None,
        known_at: When = None,
    ) -> list[Fact]:
        """See `MemoryStore.values`."""
        return await self._run(
            self.store.values, user, key, tenant=tenant, valid_at=valid_at, known_at=known_at
        )

    async def history(self, user: str, key: str, *, tenant: str = DEFAULT_TENANT) -> list[Fact]:
        """See `MemoryStore.history`."""
        return await self._run(self.store.history, user, key, tenant=tenant)

    async def facts(
        self, user: str, *, tenant: str = DEFAULT_TENANT, include_history: bool = False
    ) -> list[Fact]:
        """See `MemoryStore.facts`."""
        return await self._run(self.store.facts, user, tenant=tenant, include_history=include_history)

    async def retrieve(
        self,
        user: str,
        query: str,
        k: int = 5,
        *,
        tenant: str = DEFAULT_TENANT,
        min_similarity: float | None = None,
        valid_at: datetime | date | str | None = None,
        as_of: datetime | date | str | None = None,
        before: datetime | date | str | None = None,
        after: datetime | date | str | None = None,
    ) -> list[Hit]:
        """See `MemoryStore.retrieve`."""
        return await self._run(
            self.store.retrieve,
            user,
            query,
            k,
            tenant=tenant,
            min_similarity=min_similarity,
            valid_at=valid_at,
            as_of=as_of,
            before=before,
            after=after,
        )

    async def search(self, user: str, query: str, k: int = 5, **kwargs: Any) -> list[MemoryHit]:
        """See `MemoryStore.search` (same keyword arguments)."""
        return await self._run(self.store.search, user, query, k, **kwargs)

    async def add_episodes(
        self,
        user: str,
        turns: Sequence[Episode | ConversationTurn],
        *,
        tenant: str = DEFAULT_TENANT,
        session: str = "",
        source: str = "",
    ) -> list[Episode]:
        """See `MemoryStore.add_episodes`."""
        return await self._run(
            self.store.add_episodes, user, turns, tenant=tenant, session=session, source=source
        )

    async def episodes(self, user: str, **kwargs: Any) -> list[Episode]:
        """See `MemoryStore.episodes` (same keyword arguments)."""
        return await self._run(self.store.episodes, user, **kwargs)

    async def delete_episode(
        self, user: str, episode_id: str, *, tenant: str = DEFAULT_TENANT, facts: bool = True
    ) -> DeleteReport:
        """See `MemoryStore.delete_episode`."""
        return await self._run(self.store.delete_episode, user, episode_id, tenant=tenant, facts=facts)

    async def profile(self, user: str, *, tenant: str = DEFAULT_TENANT) -> Profile:
        """See `MemoryStore.profile`."""
        return await self._run(self.store.profile, user, tenant=tenant)

    async def add_summary(
        self,
        user: str,
        text: str,
        sources: Sequence[str],
        *,
        kind: str = "summary",
        tenant: str = DEFAULT_TENANT,
    ) -> Summary:
        """See `MemoryStore.add_summary`."""
        return await self._run(self.store.add_summary, user, text, sources, kind=kind, tenant=tenant)

    async def summaries(self, user: str, *, tenant: str = DEFAULT_TENANT) -> list[Summary]:
        """See `MemoryStore.summaries`."""
        return await self._run(self.store.summaries, user, tenant=tenant)

    async def delete(
        self, user: str, key: str, value: str | None = None, *, tenant: str = DEFAULT_TENANT
    ) -> DeleteReport:
        """See `MemoryStore.delete`."""
        return await self._run(self.store.delete, user, key, value, tenant=tenant)

    async def delete_user(self, user: str, *, tenant: str = DEFAULT_TENANT) -> DeleteReport:
        """See `MemoryStore.delete_user`."""
        return await self._run(self.store.delete_user, user, tenant=tenant)

    async def export(self, user: str, *, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """See `MemoryStore.export`."""
        return await self._run(self.store.export, user, tenant=tenant)

    async def aclose(self) -> None:
        """Close the underlying store."""
        await self._run(self.store.close)

    async def __aenter__(self) -> AsyncMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
