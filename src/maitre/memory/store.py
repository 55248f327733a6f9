"""`MemoryStore`: long-term facts with conflict rules, hybrid retrieval, a profile and real deletion.

Seed 000's four questions, answered in code:

- *What to write*: explicit facts with user, key, value, valid time, source and origin; secrets
  (card numbers, passwords, API keys) are refused. Extraction and the memory tools feed `write`.
- *When to retrieve*: `profile()` (a few hundred tokens, deterministic, from designated keys) at
  the start of a session; `retrieve(query, k=5)` over current facts when a request needs it.
- *How to resolve conflicts*: `maitre.memory.rules` (stated > inferred, then newest valid time);
  losers are kept as superseded, a late replay is stored already superseded.
- *How to delete*: `delete()` removes, in one transaction, every row of the key (current and history),
  its embeddings, its full-text entries, every summary built from it (via lineage) and rebuilds the
  profile; it leaves an HMAC tombstone so the same fact cannot be extracted or replayed back, however
  it is spelled (`identity`: folded values, the key vocabulary, length-prefixed digests). It never
  waits for readers: the erasure of freed bytes (WAL checkpoint, VACUUM) runs in the background.

*Sync core, async face.* The store is synchronous: SQLite is a synchronous library, embedding is
CPU-bound, and a sync API is what scripts and the CLI want (seed 000's shape). Async callers (the
gate, the agent, the memory tools) use `AsyncMemoryStore`, which runs each call in a worker thread
with anyio. One implementation, so the two faces cannot drift; the thread hop (~100 µs) is small next
to an embedding (~3 ms). Embedding always happens *before* the write transaction opens, so the
database write lock is held for well under a millisecond.

Times are stored as integer microseconds since the epoch in both backends (portable and sortable).

*A facade over one module per concept.* The store opens the transactions, embeds, and keeps the
vector cache; the concepts work inside its transactions: `writes` (validation and the write path
through `rules`), `retrieval` (both rankers and fusion), `profile`, `summaries`, `forget`
(deletion), `export`, `identity` (what makes two spellings one fact), `keyfile` (where the tombstone
secret comes from) and `meta` (its check and the embedder's identity). Reading rows back is `rows`.

*Determinism.* Within one batch (`apply_many`, `remember`) candidates are applied in order, and of two
facts alike in origin and valid time the later one wins (`rules`: storage order is the last
tie-break). Text that is not valid Unicode (a lone surrogate) and valid times in the future are
refused with a `UserError` at every door.
"""

from __future__ import annotations

import inspect
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..embeddings import Embedder, LexicalOnlyEmbedder, default_embedder_if_installed
from ..exceptions import UserError
from ..progress import Progress, report
from .backend import Backend
from .export import export_document
from .extract import ConversationTurn, Extractor, RuleExtractor
from .forget import erase
from .identity import legacy_tombstone_digest, require_text, tombstone_digest
from .keyfile import configured_secret, key_file_beside
from .meta import check_embedder, embedder_identity, record_embedder, tombstone_keys
from .model import (
    DEFAULT_TENANT,
    Candidate,
    DeleteReport,
    Fact,
    Hit,
    MemoryPolicy,
    Origin,
    Profile,
    Summary,
    WriteOutcome,
    fact_text,
    to_datetime,
    to_micros,
)
from .profile import read_profile, rebuild_profile
from .reads import current_values, key_history, user_facts, user_ids, values_at
from .retrieval import query_terms, rank
from .rows import bump_version, facts_by_seq
from .sqlite import SQLiteBackend, scope_token
from .summaries import load_summaries, store_summary
from .vectors import VectorCache
from .writes import PreparedWrite, apply_one, likely_winners, prepare, reject_future

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["MemoryStore"]

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


_REINDEX_BATCH = 256
"""Facts embedded per batch by `reindex` (a progress display moves between batches)."""


def _check_scope(tenant: str, user: str) -> None:
    """A `UserError` (not a driver's UnicodeEncodeError) for a tenant or user that is not valid text."""
    require_text("tenant", tenant)
    require_text("user", user)


class MemoryStore:
    """Long-term memory on SQLite (default, one file) or PostgreSQL.

    `MemoryStore("memory.db")` opens (or creates) a SQLite file; a `postgresql://` URL opens the
    Postgres backend with the default schema (use `MemoryStore.postgres()` to choose the schema).

    `embedder` defaults to the process-wide offline MiniLM (loaded on first use). `secret` (or
    `secret_file`, or the environment variables `MAITRE_MEMORY_SECRET` / `MAITRE_MEMORY_SECRET_FILE`)
    keys the HMAC of tombstones and is never stored in the database, so a copy of the database alone
    cannot test guesses against them. Required for a PostgreSQL store; an embedded SQLite file without
    one gets a generated key file `<database>.key` (mode 0600) beside it (`maitre.memory.keyfile`).
    `clock` returns the current UTC time (tests pass a fixed clock).
    """

    def __init__(
        self,
        target: str | Path | Backend = "maitre-memory.db",
        *,
        embedder: Embedder | None = None,
        policy: MemoryPolicy | None = None,
        secret: bytes | str | None = None,
        clock: Callable[[], datetime] | None = None,
        min_similarity: float = 0.3,
        max_cached_vectors: int = 200_000,
        secret_file: str | Path | None = None,
    ) -> None:
        if isinstance(target, str) and target.startswith(("postgresql://", "postgres://")):
            from .postgres import PostgresBackend

            backend: Backend = PostgresBackend(target)
        elif isinstance(target, (str, Path)):
            backend = SQLiteBackend(target)
        else:
            backend = target
        self.backend = backend
        self.policy = policy or MemoryPolicy()
        self.min_similarity = min_similarity
        self._embedder = embedder
        self._clock = clock or _utcnow
        self._cache = VectorCache(max_cached_vectors)
        self._embedder_checked = False
        self._lock = threading.Lock()
        self.backend.setup(self.embedder_dim)
        self._secret, self._legacy_tombstones = self._init_secret(secret, secret_file)

    # -- construction helpers -------------------------------------------------------------------

    @classmethod
    def sqlite(cls, path: str | Path = "maitre-memory.db", **kwargs: Any) -> MemoryStore:
        """A store in one SQLite file (`:memory:` for a throwaway one)."""
        return cls(SQLiteBackend(path), **kwargs)

    @classmethod
    def postgres(
        cls, dsn: str, *, schema: str = "maitre_memory", pgvector: bool | None = None, **kwargs: Any
    ) -> MemoryStore:
        """A store in one PostgreSQL schema. `pgvector`: None = use it if it can be enabled."""
        from .postgres import PostgresBackend

        return cls(PostgresBackend(dsn, schema=schema, pgvector=pgvector), **kwargs)

    @property
    def embedder(self) -> Embedder:
        """The embedder (the default MiniLM is created on first access, loaded on first use)."""
        if self._embedder is None:
            # Without maitre[embeddings]: words only, said once on stderr (see maitre.embeddings).
            self._embedder = default_embedder_if_installed() or LexicalOnlyEmbedder()
        return self._embedder

    @property
    def embedder_dim(self) -> int:
        """Dimension of the configured embedder."""
        return self.embedder.dim

    def _init_secret(self, secret: bytes | str | None, secret_file: str | Path | None) -> tuple[bytes, bool]:
        configured = configured_secret(secret, secret_file)
        database = getattr(self.backend, "path", None)
        embedded = self.backend.kind == "sqlite" and database is not None
        ephemeral = embedded and database == ":memory:"
        key_file = key_file_beside(database) if database is not None and embedded and not ephemeral else None
        with self.backend.write(["maitre-memory-meta"]) as db:
            keys = tombstone_keys(db, configured, key_file=key_file, ephemeral=ephemeral)
        if keys.moved_out:
            self.backend.after_delete()  # the old in-database secret leaves the WAL and the file too
        return keys.secret, keys.legacy

    def _check_embedder(self) -> None:
        if self._embedder_checked:
            return
        identity = embedder_identity(self.embedder)
        with self.backend.write(["maitre-memory-meta"]) as db:
            check_embedder(db, identity)
        self._embedder_checked = True

    # -- writing ----------------------------------------------------------------------------------

    def write(
        self,
        user: str,
        key: str,
        value: str,
        valid_from: datetime | date | str | None = None,
        source: str = "",
        *,
        origin: Origin | str = Origin.STATED,
        tenant: str = DEFAULT_TENANT,
        unforget: bool = False,
    ) -> Fact | None:
        """Store a fact and return the fact now current for its slot (seed 000's shape).

        The returned fact is the new one if it won, the previous one if the new one lost (an older
        replay, an inferred guess against a stated fact), or None if the slot has no current value.
        A fact the user asked to forget is not stored again unless `unforget=True` (the user
        deliberately re-states it), which also lifts the tombstone. See `apply` for the details.
        """
        return self.apply(
            user,
            Candidate(key=key, value=value, valid_from=valid_from, source=source, origin=Origin(origin)),
            tenant=tenant,
            unforget=unforget,
        ).current

    def retract(
        self,
        user: str,
        key: str,
        value: str = "",
        valid_from: datetime | date | str | None = None,
        source: str = "",
        *,
        origin: Origin | str = Origin.STATED,
        tenant: str = DEFAULT_TENANT,
    ) -> WriteOutcome:
        """Record that a value stopped being true ("I no longer eat meat"); history is kept.

        For a multi-valued key name the value that ended. For a single-valued key an empty value ends
        whatever is current; a named value ends it only if it is the current one.
        """
        return self.apply(
            user,
            Candidate(
                key=key,
                value=value,
                valid_from=valid_from,
                source=source,
                origin=Origin(origin),
                retract=True,
            ),
            tenant=tenant,
        )

    def apply(
        self, user: str, candidate: Candidate, *, tenant: str = DEFAULT_TENANT, unforget: bool = False
    ) -> WriteOutcome:
        """Write one candidate through the conflict rules and report what happened."""
        return self.apply_many(user, [candidate], tenant=tenant, unforget=unforget)[0]

    def apply_many(
        self,
        user: str,
        candidates: Sequence[Candidate],
        *,
        tenant: str = DEFAULT_TENANT,
        unforget: bool = False,
    ) -> list[WriteOutcome]:
        """Write several candidates for one user in one transaction (one batch of embeddings).

        Applied in order: of two candidates alike in origin and valid time, the later one wins."""
        if not candidates:
            return []
        now = self._clock()
        prepared = [prepare(user, tenant, c, policy=self.policy, now=now) for c in candidates]
        vectors = self._embed_needed(prepared, unforget)
        outcomes: list[WriteOutcome] = []
        added: list[tuple[int, NDArray[np.float32]]] = []
        removed: list[int] = []
        with self.backend.write([f"{tenant}\x1f{user}"]) as db:
            profile_dirty = False
            for item in prepared:
                applied = apply_one(
                    db,
                    self.backend,
                    item,
                    vectors,
                    digest=self._digest,
                    embed=self._embed,
                    unforget=unforget,
                    now=now,
                )
                outcomes.append(applied.outcome)
                added += applied.indexed
                removed += applied.unindexed
                if (applied.indexed or applied.unindexed) and item.fact.key in self.policy.profile_keys:
                    profile_dirty = True
            if profile_dirty:
                rebuild_profile(db, tenant, user, self.policy, to_micros(self._clock()))
            new_version = bump_version(db, tenant, user)
        if not self.backend.native_vectors:
            self._cache.apply(scope_token(tenant, user), new_version - 1, new_version, added, removed)
        return outcomes

    def check(self, user: str, candidate: Candidate, *, tenant: str = DEFAULT_TENANT) -> str | None:
        """Why the store would refuse this candidate (a secret, a bad key, ...), or None if it is acceptable."""
        try:
            prepare(user, tenant, candidate, policy=self.policy, now=self._clock())
        except UserError as exc:
            return str(exc)
        return None

    def remember(
        self,
        user: str,
        messages: Sequence[ConversationTurn],
        *,
        extractor: Extractor | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> list[WriteOutcome]:
        """The application-driven write step: extract candidates from messages and write them.

        Candidates the store refuses (secrets, invalid keys) are skipped and logged, not raised;
        forgotten facts come back as BLOCKED outcomes. Uses `RuleExtractor` unless told otherwise;
        for an async (model) extractor use `AsyncMemoryStore.remember`.
        """
        _check_scope(tenant, user)
        for msg in messages:
            require_text("message", msg.content or "")
            require_text("message id", msg.id or "")
        found = (extractor or RuleExtractor()).extract(messages)
        if inspect.isawaitable(found):
            close = getattr(found, "close", None)
            if close is not None:
                close()
            raise UserError("This extractor is async; call AsyncMemoryStore.remember() instead.")
        return self.write_candidates(user, found, tenant=tenant)

    def write_candidates(
        self, user: str, candidates: Sequence[Candidate], *, tenant: str = DEFAULT_TENANT
    ) -> list[WriteOutcome]:
        """Write extracted candidates in one batch, skipping (and logging) the ones the store refuses.

        Secrets and invalid keys are skipped: extraction proposes, the store decides. A candidate
        dated in the future or holding text that is not valid Unicode is not skipped: it means a
        wrong clock or broken input, so the whole batch is refused with a `UserError` naming it,
        before anything is written."""
        now = self._clock()
        for c in candidates:
            reject_future(c, now=now)
            for what, text in (("key", c.key), ("value", c.value), ("source", c.source or "")):
                require_text(f"{what} of an extracted candidate", text)
        accepted = []
        for c in candidates:
            reason = self.check(user, c, tenant=tenant)
            if reason is None:
                accepted.append(c)
            else:
                log.info("memory: skipped an extracted candidate for key %r: %s", c.key, reason)
        return self.apply_many(user, accepted, tenant=tenant)

    def _digest(self, fact: Fact) -> list[str]:
        """Every tombstone digest standing for `fact`: the current one first, then version 1's."""
        digests = [tombstone_digest(self._secret, fact.tenant, fact.user, fact.key, fact.value)]
        if self._legacy_tombstones:
            digests.append(
                legacy_tombstone_digest(self._secret, fact.tenant, fact.user, fact.key, fact.value)
            )
        return digests

    def _embed_needed(self, prepared: list[PreparedWrite], unforget: bool) -> dict[str, NDArray[np.float32]]:
        """Embed, outside any transaction, the texts of candidates that look likely to become current.

        A batch (extraction, an import) embeds every text in one model call without asking the
        database first; a single write checks first, so a replay or a duplicate costs no embedding.
        """
        if len(prepared) > 1:
            return self._embed(
                [fact_text(p.fact.key, p.fact.value) for p in prepared if not p.fact.retracted]
            )
        with self.backend.read() as db:
            wanted = likely_winners(db, prepared, digest=self._digest, unforget=unforget)
        return self._embed(wanted)

    def _embed(self, texts: list[str]) -> dict[str, NDArray[np.float32]]:
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        self._check_embedder()
        matrix = self.embedder.embed(unique)
        return dict(zip(unique, matrix, strict=True))

    # -- reading ----------------------------------------------------------------------------------

    def current(
        self,
        user: str,
        key: str,
        *,
        tenant: str = DEFAULT_TENANT,
        valid_at: datetime | date | str | None = None,
        known_at: datetime | date | str | None = None,
    ) -> Fact | None:
        """The current fact of a single-valued key, or None.

        `valid_at` asks about another moment in the world ("where did I live in February?");
        `known_at` asks what the store believed at an earlier moment (defaults to `valid_at`).
        """
        key = self.policy.canonical_key(key)
        if key in self.policy.multi_valued:
            raise UserError(f"{key!r} holds several values; use values() for it.")
        found = self.values(user, key, tenant=tenant, valid_at=valid_at, known_at=known_at)
        return found[0] if found else None

    def values(
        self,
        user: str,
        key: str,
        *,
        tenant: str = DEFAULT_TENANT,
        valid_at: datetime | date | str | None = None,
        known_at: datetime | date | str | None = None,
    ) -> list[Fact]:
        """The current facts of a key (several for a multi-valued key), oldest valid_from first."""
        _check_scope(tenant, user)
        key = self.policy.canonical_key(key)
        if valid_at is None and known_at is None:
            with self.backend.read() as db:
                found = current_values(db, tenant, user, key)
        else:
            now = self._clock()
            valid = to_datetime(valid_at, default=to_datetime(known_at, default=now))
            known = to_datetime(known_at, default=valid if valid_at is None else now)
            with self.backend.read() as db:
                found = values_at(db, tenant, user, key, policy=self.policy, valid_at=valid, known_at=known)
        return sorted(found, key=lambda f: (f.valid_from, f.recorded_at))

    def history(self, user: str, key: str, *, tenant: str = DEFAULT_TENANT) -> list[Fact]:
        """Every stored fact of a key (current and superseded), by valid_from then recorded_at."""
        _check_scope(tenant, user)
        key = self.policy.canonical_key(key)
        with self.backend.read() as db:
            return key_history(db, tenant, user, key)

    def facts(self, user: str, *, tenant: str = DEFAULT_TENANT, include_history: bool = False) -> list[Fact]:
        """All of a user's facts (current only unless `include_history`), by key then valid_from."""
        _check_scope(tenant, user)
        with self.backend.read() as db:
            return user_facts(db, tenant, user, include_history=include_history)

    def retrieve(
        self,
        user: str,
        query: str,
        k: int = 5,
        *,
        tenant: str = DEFAULT_TENANT,
        min_similarity: float | None = None,
    ) -> list[Hit]:
        """The user's current facts most relevant to `query`, best first, at most `k`.

        Hybrid: full-text (BM25) and embedding similarity, fused by reciprocal rank. A fact that
        neither shares a query word nor reaches `min_similarity` is left out, so a question the
        store cannot answer gets an empty list rather than unrelated facts.
        """
        _check_scope(tenant, user)
        require_text("query", query)
        if k <= 0:
            return []
        threshold = self.min_similarity if min_similarity is None else min_similarity
        with self.backend.read() as db:
            version = db.execute(
                "SELECT version FROM memory_versions WHERE tenant = ? AND user_id = ?", (tenant, user)
            )
        if not version:
            return []
        self._check_embedder()
        qvec = self.embedder.embed_query(query)
        terms = query_terms(query)
        with self.backend.read() as db:
            ranked = rank(
                db,
                self.backend,
                self._cache,
                tenant=tenant,
                user=user,
                terms=terms,
                query_vector=qvec,
                scope=scope_token(tenant, user),
                version=int(version[0][0]),
                dim=self.embedder_dim,
                k=k,
                min_similarity=threshold,
            )
            if not ranked:
                return []
            by_seq = facts_by_seq(db, [r.seq for r in ranked])
        return [
            Hit(fact=by_seq[r.seq], score=r.score, similarity=r.similarity, lexical=r.lexical)
            for r in ranked
            if r.seq in by_seq and by_seq[r.seq].tenant == tenant and by_seq[r.seq].user == user
        ]

    # -- profile and summaries ------------------------------------------------------------------------

    def profile(self, user: str, *, tenant: str = DEFAULT_TENANT) -> Profile:
        """The always-loaded profile: one `key: value` line per designated key, deterministic."""
        _check_scope(tenant, user)
        with self.backend.read() as db:
            return read_profile(db, tenant, user, self.policy)

    def add_summary(
        self,
        user: str,
        text: str,
        sources: Sequence[str],
        *,
        kind: str = "summary",
        tenant: str = DEFAULT_TENANT,
    ) -> Summary:
        """Store a text derived from some of the user's facts (e.g. a model-written session summary).

        `sources` are the fact ids it was built from. Deleting any of them deletes the summary: a
        summary cannot be trusted to have forgotten what it was built from.
        """
        _check_scope(tenant, user)
        require_text("summary text", text)
        require_text("summary kind", kind)
        if kind == "profile":
            raise UserError("The profile is built by the store; choose another kind.")
        summary = Summary(
            id=uuid.uuid4().hex,
            tenant=tenant,
            user=user,
            kind=kind,
            text=text,
            sources=list(dict.fromkeys(sources)),
            created_at=self._clock(),
        )
        with self.backend.write([f"{tenant}\x1f{user}"]) as db:
            store_summary(db, summary, created_us=to_micros(summary.created_at or self._clock()))
        return summary

    def summaries(self, user: str, *, tenant: str = DEFAULT_TENANT) -> list[Summary]:
        """Every stored summary of the user (the profile included), with its lineage."""
        _check_scope(tenant, user)
        with self.backend.read() as db:
            return load_summaries(db, tenant, user)

    # -- deletion ---------------------------------------------------------------------------------

    def delete(
        self, user: str, key: str, value: str | None = None, *, tenant: str = DEFAULT_TENANT
    ) -> DeleteReport:
        """Forget a key (every value and its history), or one value of it, everywhere.

        In one transaction: the fact rows (current and superseded), their embeddings and full-text
        entries, every summary built from them (via lineage) and the profile (rebuilt without them).
        A tombstone (an HMAC of the normalised fact, never its text) stops the same fact from being
        written back by extraction or a replayed import. If one value of a single-valued key is
        forgotten while it was current, the key is left with no current value rather than reviving
        an older one.
        """
        _check_scope(tenant, user)
        if value is not None:
            require_text("value", value)
        key = self.policy.canonical_key(key)
        return self._delete(tenant, user, key=key, value=value)

    def delete_user(self, user: str, *, tenant: str = DEFAULT_TENANT) -> DeleteReport:
        """Forget everything about a user (the right to erasure), with tombstones for every value."""
        _check_scope(tenant, user)
        return self._delete(tenant, user, key=None, value=None)

    def _delete(self, tenant: str, user: str, *, key: str | None, value: str | None) -> DeleteReport:
        with self.backend.write([f"{tenant}\x1f{user}"]) as db:
            report = erase(
                db,
                self.backend,
                tenant=tenant,
                user=user,
                key=key,
                value=value,
                policy=self.policy,
                digest=self._digest,
                now_us=to_micros(self._clock()),
            )
        if report.facts:
            self._cache.invalidate(scope_token(tenant, user))
            self.backend.after_delete()
            log.info(
                "memory: forgot %d facts of one user (%d summaries)", report.facts, report.summaries_removed
            )
        return report

    def wait_erased(self, timeout: float = 10.0) -> bool:
        """Wait until the bytes of every committed deletion are erased; False if `timeout` passed first.

        `delete()` returns as soon as the deletion commits; the freed bytes are erased in the
        background (SQLite: a WAL checkpoint that empties the WAL; PostgreSQL: VACUUM ANALYZE) once no
        reader's snapshot predates the deletion. Call this where erasure must be complete before going
        on: a test that scans the file, a shutdown, an erasure report."""
        wait = getattr(self.backend, "wait_erased", None)
        return True if wait is None else bool(wait(timeout))

    # -- export and maintenance ---------------------------------------------------------------------

    def export(self, user: str, *, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """Everything stored about a user, JSON-ready: facts with history, summaries, the profile."""
        facts = self.facts(user, tenant=tenant, include_history=True)
        return export_document(
            tenant=tenant,
            user=user,
            exported_at=self._clock(),
            profile=self.profile(user, tenant=tenant).text,
            facts=facts,
            summaries=self.summaries(user, tenant=tenant),
        )

    def users(self, *, tenant: str = DEFAULT_TENANT) -> list[str]:
        """Users with at least one stored fact in the tenant."""
        with self.backend.read() as db:
            return user_ids(db, tenant)

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Re-embed every current fact with this store's embedder (after changing embedders).

        `progress(done, total)` is called as facts are embedded (`maitre.progress.progress_bar`).
        Returns how many facts were re-embedded."""
        with self.backend.read() as db:
            rows = db.execute(
                "SELECT seq, tenant, user_id, key, value FROM memory_facts WHERE status = 'current' AND retracted = 0"
            )
        vectors = None
        if rows:
            texts = [fact_text(r[3], r[4]) for r in rows]
            report(progress, 0, len(texts))
            batches = []
            for start in range(0, len(texts), _REINDEX_BATCH):
                batches.append(self.embedder.embed(texts[start : start + _REINDEX_BATCH]))
                report(progress, min(start + _REINDEX_BATCH, len(texts)), len(texts))
            vectors = np.concatenate(batches)
        identity = embedder_identity(self.embedder)
        with self.backend.write(["maitre-memory-meta"]) as db:
            items = [(r[0], r[1], r[2], fact_text(r[3], r[4])) for r in rows]
            self.backend.unindex(db, items)
            if vectors is not None:
                self.backend.index(db, [(*item, vectors[i]) for i, item in enumerate(items)])
            record_embedder(db, identity)
            for tenant, user in {(r[1], r[2]) for r in rows}:
                bump_version(db, tenant, user)
        self._cache.invalidate()
        self._embedder_checked = True
        return len(rows)

    def close(self) -> None:
        """Close the backend's connections."""
        self.backend.close()
        self._cache.invalidate()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryStore({self.backend.kind}:{self.backend.location})"
