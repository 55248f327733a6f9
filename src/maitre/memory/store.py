"""`MemoryStore`: long-term facts with conflict rules, hybrid retrieval, a profile and real deletion.

Seed 000's four questions, answered in code:

- *What to write*: explicit facts with user, key, value, valid time, source and origin; secrets
  (card numbers, passwords, API keys) are refused. Extraction and the memory tools feed `write`.
- *When to retrieve*: `profile()` (a few hundred tokens, deterministic, from designated keys) at
  the start of a session; `retrieve(query, k=5)` over current facts when a request needs it
  (`valid_at` / `as_of` / `before` / `after` for what was true at another time); `search(query)`
  over episodes (what was said, `add_episodes`) and facts together, which returns nothing when the
  memory does not hold the answer (`maitre.memory.search`).
- *How to resolve conflicts*: `maitre.memory.rules` (stated > inferred, then newest valid time);
  losers are kept as superseded, a late replay is stored already superseded.
- *How to delete*: `delete()` removes, in one transaction, every row of the key (current and history),
  its embeddings, its full-text entries, every summary built from it (via lineage), the episodes it
  was extracted from or that hold its value, and rebuilds the profile; it leaves an HMAC tombstone so the same fact cannot be extracted or replayed back, however
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

import functools
import inspect
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..embeddings import Embedder, LexicalOnlyEmbedder, default_embedder_if_installed
from ..exceptions import UserError
from ..progress import Progress, report
from .backend import Backend
from .episodes import (
    delete_episodes,
    episode_exists,
    episode_lexical,
    episode_text,
    episodes_by_seq,
    insert_episodes,
    link_fact,
    list_episodes,
    load_episode_vectors,
    seqs_between,
)
from .export import export_document
from .extract import ConversationTurn, Extractor, RuleExtractor
from .forget import erase
from .identity import legacy_tombstone_digest, tombstone_digest
from .keyfile import configured_secret, key_file_beside
from .meta import check_embedder, embedder_identity, record_embedder, tombstone_keys
from .model import (
    DEFAULT_TENANT,
    Candidate,
    DeleteReport,
    Episode,
    Fact,
    Hit,
    MemoryHit,
    MemoryPolicy,
    Origin,
    Profile,
    Summary,
    WriteOutcome,
    fact_text,
    require_storable,
    to_datetime,
    to_micros,
)
from .profile import read_profile, rebuild_profile
from .reads import current_values, facts_valid_at, key_history, user_facts, user_ids, values_at
from .retrieval import dense_search, fact_dense_search, query_terms, rank
from .rows import bump_version, facts_by_seq
from .search import Candidates, Fusion, answerable, fuse_weighted, rank_texts
from .sqlite import SQLiteBackend
from .summaries import load_summaries, store_summary
from .vectors import VectorCache, VectorSnapshots, encode_vector, vector_scope
from .writes import PreparedWrite, apply_one, likely_winners, prepare, reject_future

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["MemoryStore"]

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


_EARLIEST = datetime.min.replace(tzinfo=UTC)

# The tombstone "keys" of forgotten episodes: no fact key can be spelled with a space and a colon.
_EPISODE_ID_KEY = "episode: id"
_EPISODE_TEXT_KEY = "episode: text"


_REINDEX_BATCH = 256
"""Facts embedded per batch by `reindex` (a progress display moves between batches)."""


def _check_scope(tenant: str, user: str) -> None:
    """A `UserError` (not a driver's UnicodeEncodeError) for a tenant or user that is not valid text."""
    require_storable("tenant", tenant)
    require_storable("user", user)


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

    `vector_dir` holds memory-mapped snapshots of large users' vector matrices, so a new process
    answers its first query without reading every BLOB (`maitre.memory.vectors.VectorSnapshots`);
    a SQLite file gets `<database>.vectors/` beside it unless `vector_dir=""`. `fusion` sets the
    weights and abstention thresholds of `search` (the defaults were chosen on our development set).
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
        vector_dir: str | Path | None = None,
        fusion: Fusion | None = None,
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
        self._text_vectors: dict[str, NDArray[np.float32]] = {}
        self.fusion = fusion or Fusion()
        """Weights and abstention thresholds of `search` (`maitre.memory.search.Fusion`)."""
        self._snapshots = self._init_snapshots(vector_dir)
        self._embedder_checked = False
        self._lock = threading.Lock()
        self.backend.setup(self.embedder_dim)
        self._secret, self._legacy_tombstones = self._init_secret(secret, secret_file)
        self._epoch = self._database_epoch()

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

    def _init_snapshots(self, vector_dir: str | Path | None) -> VectorSnapshots | None:
        if vector_dir is not None:
            return VectorSnapshots(vector_dir) if str(vector_dir) else None
        database = getattr(self.backend, "path", None)
        if self.backend.kind == "sqlite" and database and database != ":memory:":
            return VectorSnapshots(f"{database}.vectors")
        return None

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

    def _database_epoch(self) -> str:
        """A random id of this database (`memory_meta.vector_epoch`, made once): the vector caches
        and snapshots are keyed by it, so the `.vectors/` files of a database that was deleted and
        created again at the same path (its seqs and versions start over) are never read as its."""
        read = "SELECT value FROM memory_meta WHERE name = 'vector_epoch'"
        with self.backend.read() as db:
            rows = db.execute(read)
        if not rows:
            with self.backend.write(["maitre-memory-meta"]) as db:
                db.execute(
                    "INSERT INTO memory_meta (name, value) VALUES ('vector_epoch', ?) ON CONFLICT (name) DO NOTHING",
                    (uuid.uuid4().hex,),
                )
                rows = db.execute(read)
        return str(rows[0][0])

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
            for item, candidate in zip(prepared, candidates, strict=True):
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
                self._link_episode(db, candidate, applied.outcome, tenant, user)
                added += applied.indexed
                removed += applied.unindexed
                if (applied.indexed or applied.unindexed) and item.fact.key in self.policy.profile_keys:
                    profile_dirty = True
            if profile_dirty:
                rebuild_profile(db, tenant, user, self.policy, to_micros(self._clock()))
            new_version = bump_version(
                db,
                tenant,
                user,
                added=[f"f{seq}" for seq, _ in added],
                removed=[f"f{seq}" for seq in removed],
            )
        if not self.backend.native_vectors:
            self._cache.apply(self._fact_scope(tenant, user), new_version - 1, new_version, added, removed)
        return outcomes

    @staticmethod
    def _link_episode(db: Any, candidate: Candidate, outcome: WriteOutcome, tenant: str, user: str) -> None:
        """Link the fact a candidate stored (or confirmed) to the episode it was extracted from."""
        episode_id = candidate.episode_id
        if episode_id is None and (candidate.source or "").startswith("message:"):
            episode_id = candidate.source[len("message:") :]
        fact = outcome.stored if outcome.stored is not None else outcome.current
        if not episode_id or fact is None or outcome.action == "blocked":
            return
        if episode_exists(db, tenant, user, episode_id):
            link_fact(db, tenant, user, episode_id, fact.id)

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
        episodes: bool = False,
        session: str = "",
    ) -> list[WriteOutcome]:
        """The application-driven write step: extract candidates from messages and write them.

        With `episodes=True` the messages are also kept as episodes (`add_episodes`, in `session`)
        and every fact extracted from a message is linked to its episode.

        Candidates the store refuses (secrets, invalid keys) are skipped and logged, not raised;
        forgotten facts come back as BLOCKED outcomes. Uses `RuleExtractor` unless told otherwise;
        for an async (model) extractor use `AsyncMemoryStore.remember`.
        """
        _check_scope(tenant, user)
        for msg in messages:
            require_storable("message", msg.content or "")
            require_storable("message id", msg.id or "")
        found = (extractor or RuleExtractor()).extract(messages)
        if inspect.isawaitable(found):
            close = getattr(found, "close", None)
            if close is not None:
                close()
            raise UserError("This extractor is async; call AsyncMemoryStore.remember() instead.")
        if episodes:
            self.add_episodes(user, messages, tenant=tenant, session=session)
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
                require_storable(f"{what} of an extracted candidate", text)
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

    def _episode_digests_for(self, tenant: str, user: str) -> Callable[[str, str], list[str]]:
        """The tombstone digests a forgotten episode of this user leaves: its id and its text
        (`maitre.memory.episodes.delete_episodes`), keyed like the facts' (`tombstone_digest`)."""

        def digests(episode_id: str, text: str) -> list[str]:
            return [
                tombstone_digest(self._secret, tenant, user, _EPISODE_ID_KEY, episode_id),
                tombstone_digest(self._secret, tenant, user, _EPISODE_TEXT_KEY, text),
            ]

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

    # -- episodes ---------------------------------------------------------------------------------

    def add_episodes(
        self,
        user: str,
        turns: Sequence[Episode | ConversationTurn],
        *,
        tenant: str = DEFAULT_TENANT,
        session: str = "",
        source: str = "",
    ) -> list[Episode]:
        """Keep conversation turns as episodes (time, speaker, session, source); returns those stored.

        A `ConversationTurn` becomes an episode with its id, its role as speaker and its time (now if
        unset); an `Episode` is stored as given (under this user and tenant). An id the user already
        has is skipped (replays are harmless). Times in the future and text that is not valid
        Unicode are refused with a `UserError` before anything is stored. Embedding happens before
        the write transaction opens."""
        _check_scope(tenant, user)
        now = self._clock()
        episodes: list[Episode] = []
        for turn in turns:
            if isinstance(turn, Episode):
                episode = Episode(
                    id=turn.id,
                    tenant=tenant,
                    user=user,
                    speaker=turn.speaker,
                    text=turn.text,
                    at=to_datetime(turn.at, default=now),
                    session=turn.session or session,
                    role=turn.role,
                    source=turn.source or source,
                )
            else:
                episode = Episode(
                    id=turn.id or uuid.uuid4().hex,
                    tenant=tenant,
                    user=user,
                    speaker=turn.role,
                    text=turn.content or "",
                    at=to_datetime(turn.at, default=now),
                    session=session,
                    role=turn.role,
                    source=source,
                )
            for what, text in (
                ("episode id", episode.id),
                ("episode text", episode.text),
                ("speaker", episode.speaker),
                ("session", episode.session),
                ("role", episode.role),
                ("source", episode.source),
            ):
                require_storable(what, text)
            if not episode.id:
                raise UserError("An episode needs a non-empty id.")
            reject_future(
                Candidate(key="episode", value=episode.text, valid_from=episode.at, source=episode.id),
                now=now,
            )
            episode.recorded_at = now
            episodes.append(episode)
        if not episodes:
            return []
        self._check_embedder()
        self._add_context(episodes)
        n = len(episodes)
        matrix = self.embedder.embed(
            [e.text for e in episodes] + [episode_text(e.text, e.context) for e in episodes]
        )
        blobs = [(encode_vector(matrix[i]), encode_vector(matrix[n + i])) for i in range(n)]
        with self.backend.write([f"{tenant}\x1f{user}"]) as db:
            stored = insert_episodes(
                db,
                self.backend.kind,
                episodes,
                blobs,
                recorded_us=to_micros(now),
                tombstones=self._episode_digests_for(tenant, user),
            )
            if stored:
                version = bump_version(db, tenant, user, added=[f"e{seq}" for seq, _ in stored])
        if stored:
            index = {e.id: i for i, e in enumerate(episodes)}
            for scope, offset in (
                (self._episode_scope(tenant, user), 0),
                (self._window_scope(tenant, user), n),
            ):
                self._cache.apply(
                    scope,
                    version - 1,
                    version,
                    [(seq, matrix[offset + index[e.id]]) for seq, e in stored],
                    [],
                )
        return [e for _, e in stored]

    def episodes(
        self,
        user: str,
        *,
        tenant: str = DEFAULT_TENANT,
        session: str | None = None,
        before: datetime | date | str | None = None,
        after: datetime | date | str | None = None,
        limit: int | None = None,
    ) -> list[Episode]:
        """The user's episodes in time order (one session, or said in [after, before), if given)."""
        _check_scope(tenant, user)
        if session is not None:
            require_storable("session", session)
        if limit is not None and limit <= 0:  # SQLite reads LIMIT -1 as "all", Postgres refuses it
            return []
        before_us, after_us = self._time_range(before, after, None)
        with self.backend.read() as db:
            return list_episodes(
                db, tenant, user, session=session, before_us=before_us, after_us=after_us, limit=limit
            )

    def delete_episode(
        self, user: str, episode_id: str, *, tenant: str = DEFAULT_TENANT, facts: bool = True
    ) -> DeleteReport:
        """Forget one episode; with `facts` (the default) also the facts extracted from it.

        The facts go the way of `delete`: rows and history, indexes, summaries, tombstones, and the
        other episodes that hold their values."""
        _check_scope(tenant, user)
        require_storable("episode id", episode_id)
        with self.backend.write([f"{tenant}\x1f{user}"]) as db:
            rows = db.execute(
                "SELECT seq FROM memory_episodes WHERE tenant = ? AND user_id = ? AND id = ?",
                (tenant, user, episode_id),
            )
            linked = [
                r[0]
                for r in db.execute(
                    "SELECT fact_id FROM memory_episode_facts WHERE tenant = ? AND user_id = ? AND episode_id = ?",
                    (tenant, user, episode_id),
                )
            ]
            report = DeleteReport()
            if facts and linked:  # first: it forgets the episodes that hold the facts' values too
                report = erase(
                    db,
                    self.backend,
                    tenant=tenant,
                    user=user,
                    key=None,
                    value=None,
                    ids=linked,
                    policy=self.policy,
                    digest=self._digest,
                    episode_digest=self._episode_digests_for(tenant, user),
                    now_us=to_micros(self._clock()),
                )
            removed = delete_episodes(
                db,
                self.backend.kind,
                tenant,
                user,
                [int(r[0]) for r in rows],
                tombstones=self._episode_digests_for(tenant, user),
                now_us=to_micros(self._clock()),
            )
            if removed:  # still there (no linked facts, or `facts=False`): log it for other caches
                bump_version(db, tenant, user, removed=[f"e{int(r[0])}" for r in rows])
            report.episodes += len(removed)
        if report.episodes or report.facts:
            self._after_forget(tenant, user)
        return report

    def _add_context(self, episodes: list[Episode]) -> None:
        """Give each episode the text of the turn before it in its session (this batch or stored)."""
        last: dict[str, str] = {}
        for episode in sorted(episodes, key=lambda e: e.at):
            session = episode.session
            if session and session not in last:
                with self.backend.read() as db:
                    rows = db.execute(
                        "SELECT text FROM memory_episodes WHERE tenant = ? AND user_id = ? AND session = ? "
                        "AND at <= ? ORDER BY at DESC, seq DESC LIMIT 1",
                        (episode.tenant, episode.user, session, to_micros(episode.at)),
                    )
                last[session] = rows[0][0] if rows else ""
            episode.context = last.get(session, "") if session else ""
            if session:
                last[session] = episode.text

    def _fact_scope(self, tenant: str, user: str) -> str:
        """The cache and snapshot key of the user's fact vectors (episodes: `_episode_scope`, their
        windows: `_window_scope`), in this database (`_database_epoch`)."""
        return f"{self._epoch}/{vector_scope(tenant, user, 'f')}"

    def _episode_scope(self, tenant: str, user: str) -> str:
        return f"{self._epoch}/{vector_scope(tenant, user, 'e')}"

    def _window_scope(self, tenant: str, user: str) -> str:
        return f"{self._epoch}/{vector_scope(tenant, user, 'w')}"

    def _time_range(
        self,
        before: datetime | date | str | None,
        after: datetime | date | str | None,
        as_of: datetime | date | str | None,
    ) -> tuple[int | None, int | None]:
        """(before_us, after_us) for episodes: `as_of` means "said up to that moment"."""
        now = self._clock()
        before_us = to_micros(to_datetime(before, default=now, what="before")) if before is not None else None
        if as_of is not None:
            cut = to_micros(to_datetime(as_of, default=now, what="as_of")) + 1
            before_us = cut if before_us is None else min(before_us, cut)
        after_us = to_micros(to_datetime(after, default=now, what="after")) if after is not None else None
        return before_us, after_us

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
        valid_at: datetime | date | str | None = None,
        as_of: datetime | date | str | None = None,
        before: datetime | date | str | None = None,
        after: datetime | date | str | None = None,
    ) -> list[Hit]:
        """The user's current facts most relevant to `query`, best first, at most `k`.

        Hybrid: full-text (BM25) and embedding similarity, fused by reciprocal rank. A fact that
        neither shares a query word nor reaches `min_similarity` is left out, so a question the
        store cannot answer gets an empty list rather than unrelated facts.

        Time: `valid_at` (or its synonym `as_of`) ranks the facts that were true at that moment
        instead of the current ones ("where did I live in February?"), superseded ones included;
        `before` ranks those true just before a moment ("where did I live before the move?");
        `after` keeps only facts that became true at or after a moment.
        """
        _check_scope(tenant, user)
        require_storable("query", query)
        if k <= 0:
            return []
        threshold = self.min_similarity if min_similarity is None else min_similarity
        moment = self._fact_moment(valid_at, as_of, before)
        if moment is not None or after is not None:
            hits = self._search_facts_at(user, tenant, query, k, moment, after)
            return [
                Hit(fact=h.fact, score=h.score, similarity=h.similarity, lexical=h.lexical)
                for h in hits
                if h.fact is not None and (h.lexical or (h.similarity or 0.0) >= threshold)
            ]
        with self.backend.read() as db:
            version = self._version(db, tenant, user)
        if version is None:
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
                scope=self._fact_scope(tenant, user),
                version=version,
                dim=self.embedder_dim,
                k=k,
                min_similarity=threshold,
                snapshots=self._snapshots,
            )
            if not ranked:
                return []
            by_seq = facts_by_seq(db, [r.seq for r in ranked], tenant=tenant, user=user)
        return [
            Hit(fact=by_seq[r.seq], score=r.score, similarity=r.similarity, lexical=r.lexical)
            for r in ranked
            if r.seq in by_seq
        ]

    def search(
        self,
        user: str,
        query: str,
        k: int = 5,
        *,
        tenant: str = DEFAULT_TENANT,
        episodes: bool = True,
        facts: bool = True,
        before: datetime | date | str | None = None,
        after: datetime | date | str | None = None,
        as_of: datetime | date | str | None = None,
        valid_at: datetime | date | str | None = None,
        abstain: bool = True,
        fusion: Fusion | None = None,
    ) -> list[MemoryHit]:
        """Episodes and facts most relevant to `query`, best first, at most `k` (`maitre.memory.search`).

        Four rankers (full text and embeddings, over episodes and over facts) fused by weighted
        reciprocal rank. With `abstain` (the default) a query whose best evidence is weak gets an
        empty list. Time: `before` / `after` keep episodes said, and facts that became true, in that
        range; `as_of` (or `valid_at`) keeps episodes said up to that moment and the facts true then.
        """
        _check_scope(tenant, user)
        require_storable("query", query)
        if k <= 0:
            return []
        fusion = fusion or self.fusion
        moment_input = as_of if as_of is not None else valid_at
        with self.backend.read() as db:
            version = self._version(db, tenant, user)
        if version is None:
            return []
        self._check_embedder()
        qvec = self.embedder.embed_query(query)
        terms = query_terms(query)
        before_us, after_us = self._time_range(before, after, moment_input)
        sources: list[tuple[str, Candidates, float]] = []
        fact_objects: dict[int, Fact] = {}
        with self.backend.read() as db:
            if episodes:
                cands = self._episode_candidates(
                    db, tenant, user, terms, qvec, version, fusion, before_us=before_us, after_us=after_us
                )
                sources.append(("episode", cands, 1.0))
            if facts:
                moment = self._fact_moment(valid_at, as_of, before)
                if moment is not None or after is not None:
                    cands, fact_objects = self._fact_candidates_at(
                        db, tenant, user, terms, qvec, moment, after
                    )
                else:
                    cands = self._fact_candidates(db, tenant, user, terms, qvec, version, fusion)
                sources.append(("fact", cands, fusion.facts))
            if abstain and not answerable(terms, [c for _, c, _ in sources], fusion):
                return []
            fused = fuse_weighted(sources, fusion=fusion, k=k)
            episode_rows = episodes_by_seq(
                db, [seq for kind, seq, *_ in fused if kind == "episode"], tenant=tenant, user=user
            )
            missing = [seq for kind, seq, *_ in fused if kind == "fact" and seq not in fact_objects]
            fact_objects.update(facts_by_seq(db, missing, tenant=tenant, user=user))
        hits: list[MemoryHit] = []
        for kind, seq, score, sim, lexical in fused:
            if kind == "episode" and seq in episode_rows:
                hits.append(
                    MemoryHit(
                        kind=kind, score=score, episode=episode_rows[seq], similarity=sim, lexical=lexical
                    )
                )
            elif kind == "fact" and seq in fact_objects:
                hits.append(
                    MemoryHit(kind=kind, score=score, fact=fact_objects[seq], similarity=sim, lexical=lexical)
                )
        return hits

    def _version(self, db: Any, tenant: str, user: str) -> int | None:
        rows = db.execute(
            "SELECT version FROM memory_versions WHERE tenant = ? AND user_id = ?", (tenant, user)
        )
        return int(rows[0][0]) if rows else None

    def _fact_moment(
        self,
        valid_at: datetime | date | str | None,
        as_of: datetime | date | str | None,
        before: datetime | date | str | None,
    ) -> datetime | None:
        """The valid time a temporal fact query asks about (None: the current facts)."""
        now = self._clock()
        moments = [
            to_datetime(m, default=now, what=name)
            for name, m in (("valid_at", valid_at), ("as_of", as_of))
            if m is not None
        ]
        if before is not None:
            cut = to_datetime(before, default=now, what="before")
            moments.append(cut - timedelta(microseconds=1) if cut > _EARLIEST else cut)
        return min(moments) if moments else None

    def _episode_candidates(
        self,
        db: Any,
        tenant: str,
        user: str,
        terms: list[str],
        qvec: NDArray[np.float32],
        version: int,
        fusion: Fusion,
        *,
        before_us: int | None,
        after_us: int | None,
    ) -> Candidates:
        """The three episode rankers' candidates (full text, turn vectors, window vectors), said in
        [after, before) when given."""
        lex = episode_lexical(
            db,
            self.backend.kind,
            tenant,
            user,
            terms,
            fusion.candidates,
            before_us=before_us,
            after_us=after_us,
        )
        dense: dict[str, list[tuple[int, float]]] = {"e": [], "w": []}
        if qvec.any():
            timed = before_us is not None or after_us is not None
            allowed = (
                seqs_between(db, tenant, user, before_us=before_us, after_us=after_us) if timed else None
            )
            for kind, scope in (
                ("e", self._episode_scope(tenant, user)),
                ("w", self._window_scope(tenant, user)),
            ):
                if kind == "w" and fusion.window <= 0:
                    continue
                dense[kind] = dense_search(
                    db,
                    self._cache,
                    self._snapshots,
                    kind=kind,
                    backend_kind=self.backend.kind,
                    tenant=tenant,
                    user=user,
                    scope=scope,
                    version=version,
                    dim=self.embedder_dim,
                    query=qvec,
                    limit=fusion.candidates,
                    load_all=functools.partial(load_episode_vectors, db, tenant, user, window=kind == "w"),
                    allowed=allowed,
                )
        top_lex = episodes_by_seq(db, [seq for seq, _ in lex[:10]], tenant=tenant, user=user)
        return Candidates(
            lexical=[seq for seq, _ in lex],
            dense=dense["e"],
            window=dense["w"],
            texts={seq: e.text for seq, e in top_lex.items()},
        )

    def _fact_candidates(
        self,
        db: Any,
        tenant: str,
        user: str,
        terms: list[str],
        qvec: NDArray[np.float32],
        version: int,
        fusion: Fusion,
    ) -> Candidates:
        lex = self.backend.lexical(db, tenant, user, terms, fusion.candidates)
        dense: list[tuple[int, float]] = []
        if qvec.any():
            if self.backend.native_vectors:
                dense = self.backend.dense(db, tenant, user, qvec, fusion.candidates)
            else:
                dense = fact_dense_search(
                    db,
                    self.backend,
                    self._cache,
                    tenant,
                    user,
                    qvec,
                    self._fact_scope(tenant, user),
                    version,
                    self.embedder_dim,
                    self._snapshots,
                    limit=fusion.candidates,
                )
        top = facts_by_seq(db, lex[:10], tenant=tenant, user=user)
        return Candidates(
            lexical=lex, dense=dense, texts={s: fact_text(f.key, f.value) for s, f in top.items()}
        )

    _TEMPORAL_FACTS = 512
    """At most this many facts (the most recent by valid time) are ranked for a temporal query."""

    def _fact_candidates_at(
        self,
        db: Any,
        tenant: str,
        user: str,
        terms: list[str],
        qvec: NDArray[np.float32],
        moment: datetime | None,
        after: datetime | date | str | None,
    ) -> tuple[Candidates, dict[int, Fact]]:
        now = self._clock()
        found = facts_valid_at(
            db,
            tenant,
            user,
            policy=self.policy,
            valid_at=moment or now,
            known_at=now,
            after=to_datetime(after, default=now, what="after") if after is not None else None,
        )
        found = sorted(found, key=lambda sf: (sf[1].valid_from, sf[0]))[-self._TEMPORAL_FACTS :]
        objects = dict(found)
        items = [(seq, fact_text(f.key, f.value)) for seq, f in found]
        cands = rank_texts(terms, qvec, items, self._embed_texts)
        return cands, objects

    def _embed_texts(self, texts: list[str]) -> NDArray[np.float32]:
        """Embeddings of fact texts for temporal ranking, through a small in-process cache."""
        cache = self._text_vectors
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for text, vec in zip(missing, self.embedder.embed(missing), strict=True):
                cache[text] = vec
            while len(cache) > 4096:
                cache.pop(next(iter(cache)))
        return (
            np.stack([cache[t] for t in texts])
            if texts
            else np.zeros((0, self.embedder_dim), dtype=np.float32)
        )

    def _search_facts_at(
        self,
        user: str,
        tenant: str,
        query: str,
        k: int,
        moment: datetime | None,
        after: datetime | date | str | None,
    ) -> list[MemoryHit]:
        self._check_embedder()
        qvec = self.embedder.embed_query(query)
        terms = query_terms(query)
        with self.backend.read() as db:
            cands, objects = self._fact_candidates_at(db, tenant, user, terms, qvec, moment, after)
        fused = fuse_weighted([("fact", cands, 1.0)], fusion=self.fusion, k=k)
        return [
            MemoryHit(kind="fact", score=score, fact=objects[seq], similarity=sim, lexical=lexical)
            for _, seq, score, sim, lexical in fused
            if seq in objects
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
        require_storable("summary text", text)
        require_storable("summary kind", kind)
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
            require_storable("value", value)
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
                episode_digest=self._episode_digests_for(tenant, user),
                now_us=to_micros(self._clock()),
            )
        if report.facts or report.episodes:
            self._after_forget(tenant, user)
            log.info(
                "memory: forgot %d facts and %d episodes of one user (%d summaries)",
                report.facts,
                report.episodes,
                report.summaries_removed,
            )
        return report

    def _after_forget(self, tenant: str, user: str) -> None:
        """After a deletion committed: drop cached vectors, zero them in the snapshots, erase bytes.

        Every snapshot of the user is reached: facts', episodes' turns and episodes' windows (the
        windows hold a forgotten turn as much as the turn's own vector does); a snapshot with
        nothing live left is removed."""
        scopes = {
            "f": self._fact_scope(tenant, user),
            "e": self._episode_scope(tenant, user),
            "w": self._window_scope(tenant, user),
        }
        for scope in scopes.values():
            self._cache.invalidate(scope)
        self._text_vectors.clear()
        if self._snapshots is not None:
            with self.backend.read() as db:
                live_f = {
                    int(r[0])
                    for r in db.execute(
                        "SELECT seq FROM memory_facts WHERE tenant = ? AND user_id = ?", (tenant, user)
                    )
                }
                live_e = {
                    int(r[0])
                    for r in db.execute(
                        "SELECT seq FROM memory_episodes WHERE tenant = ? AND user_id = ?", (tenant, user)
                    )
                }
            for kind, scope in scopes.items():
                live = live_f if kind == "f" else live_e
                snap = self._snapshots.load(scope, self.embedder_dim)
                if snap is None:
                    continue
                gone = [int(s) for s in snap[1].tolist() if int(s) not in live]
                self._snapshots.zero(scope, gone)  # in place: another process may map this file
                if not live:
                    self._snapshots.remove(scope)
            self._snapshots.sweep_temporary()
        self.backend.after_delete()

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
        """Everything stored about a user, JSON-ready: facts with history, summaries, the profile,
        and the episodes (what was said) with the ids of the facts extracted from them."""
        facts = self.facts(user, tenant=tenant, include_history=True)
        document = export_document(
            tenant=tenant,
            user=user,
            exported_at=self._clock(),
            profile=self.profile(user, tenant=tenant).text,
            facts=facts,
            summaries=self.summaries(user, tenant=tenant),
        )
        document["episodes"] = [e.to_dict() for e in self.episodes(user, tenant=tenant)]
        return document

    def users(self, *, tenant: str = DEFAULT_TENANT) -> list[str]:
        """Users with at least one stored fact in the tenant."""
        with self.backend.read() as db:
            return user_ids(db, tenant)

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Re-embed every current fact and every episode with this store's embedder (after changing
        embedders); the vector snapshots of the old embedder are removed.

        `progress(done, total)` is called as texts are embedded (`maitre.progress.progress_bar`).
        Returns how many facts were re-embedded."""
        with self.backend.read() as db:
            rows = db.execute(
                "SELECT seq, tenant, user_id, key, value FROM memory_facts WHERE status = 'current' AND retracted = 0"
            )
            episode_rows = db.execute("SELECT seq, tenant, user_id, text, context FROM memory_episodes")
        texts = [fact_text(r[3], r[4]) for r in rows]
        texts += [r[3] for r in episode_rows] + [episode_text(r[3], r[4]) for r in episode_rows]
        vectors = None
        if texts:
            report(progress, 0, len(texts))
            batches = []
            for start in range(0, len(texts), _REINDEX_BATCH):
                batches.append(self.embedder.embed(texts[start : start + _REINDEX_BATCH]))
                report(progress, min(start + _REINDEX_BATCH, len(texts)), len(texts))
            vectors = np.concatenate(batches)
        identity = embedder_identity(self.embedder)
        n_facts, n_episodes = len(rows), len(episode_rows)
        with self.backend.write(["maitre-memory-meta"]) as db:
            items = [(r[0], r[1], r[2], fact_text(r[3], r[4])) for r in rows]
            self.backend.unindex(db, items)
            if vectors is not None:
                self.backend.index(db, [(*item, vectors[i]) for i, item in enumerate(items)])
                for i, r in enumerate(episode_rows):
                    db.execute(
                        "UPDATE memory_episodes SET vec = ?, wvec = ? WHERE seq = ?",
                        (
                            encode_vector(vectors[n_facts + i]),
                            encode_vector(vectors[n_facts + n_episodes + i]),
                            r[0],
                        ),
                    )
            record_embedder(db, identity)
            for tenant, user in {(r[1], r[2]) for r in [*rows, *episode_rows]}:
                bump_version(db, tenant, user, reset=True)
        self._cache.invalidate()
        self._text_vectors.clear()
        if self._snapshots is not None:
            self._snapshots.remove_all()
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
