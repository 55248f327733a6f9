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
  profile; it leaves an HMAC tombstone so the same fact cannot be extracted or replayed back.

*Sync core, async face.* The store is synchronous: SQLite is a synchronous library, embedding is
CPU-bound, and a sync API is what scripts and the CLI want (seed 000's shape). Async callers (the
gate, the agent, the memory tools) use `AsyncMemoryStore`, which runs each call in a worker thread
with anyio. One implementation, so the two faces cannot drift; the thread hop (~100 µs) is small next
to an embedding (~3 ms). Embedding always happens *before* the write transaction opens, so the
database write lock is held for well under a millisecond.

Times are stored as integer microseconds since the epoch in both backends (portable and sortable).
"""

from __future__ import annotations

import inspect
import logging
import secrets
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..embeddings import Embedder, default_embedder
from ..exceptions import UserError
from ..tokens import count_tokens
from . import rules
from .backend import Backend, Db
from .extract import Extractor, Message, RuleExtractor
from .forget import erase
from .model import (
    DEFAULT_TENANT,
    Candidate,
    DeleteReport,
    Fact,
    Hit,
    MemoryPolicy,
    Origin,
    Profile,
    Status,
    Summary,
    WriteAction,
    WriteOutcome,
    fact_text,
    from_micros,
    looks_secret,
    normalise_key,
    normalise_value,
    to_datetime,
    to_micros,
    tombstone_digest,
)
from .profile import PROFILE_ID, profile_facts, profile_text, rebuild_profile
from .retrieval import fuse, query_terms
from .rows import COLS, bump_version, chunks, facts_by_seq, insert_fact, row_fact, slot_rows, tombstoned
from .sqlite import SQLiteBackend, scope_token
from .vectors import VectorCache

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["MemoryStore"]

log = logging.getLogger(__name__)

_FUTURE_SKEW = timedelta(minutes=5)
_CANDIDATES = 50  # per ranker, before fusion
_SECRET_CHECK = b"maitre-memory-secret-check"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class MemoryStore:
    """Long-term memory on SQLite (default, one file) or PostgreSQL.

    `MemoryStore("memory.db")` opens (or creates) a SQLite file; a `postgresql://` URL opens the
    Postgres backend with the default schema (use `MemoryStore.postgres()` to choose the schema).

    `embedder` defaults to the process-wide offline MiniLM (loaded on first use). `secret` keys the
    HMAC of tombstones; pass one from your secret manager so a copy of the database alone cannot test
    guesses against tombstones. Without it a random secret is generated and kept in the store.
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
        self._secret = self._init_secret(secret.encode() if isinstance(secret, str) else secret)

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
            self._embedder = default_embedder()
        return self._embedder

    @property
    def embedder_dim(self) -> int:
        """Dimension of the configured embedder."""
        return self.embedder.dim

    def _init_secret(self, secret: bytes | None) -> bytes:
        with self.backend.write(["maitre-memory-meta"]) as db:
            meta = dict(db.execute("SELECT name, value FROM memory_meta"))
            if secret is None:
                stored = meta.get("hmac_secret")
                if stored is None and "secret_check" in meta:
                    raise UserError(
                        "This memory store was created with an external tombstone secret; pass the same "
                        "`secret=` (or --secret-env for the CLI)."
                    )
                if stored is None:
                    stored = secrets.token_hex(32)
                    db.execute("INSERT INTO memory_meta (name, value) VALUES (?, ?)", ("hmac_secret", stored))
                return bytes.fromhex(stored)
            check = tombstone_digest(secret, "", "", "", _SECRET_CHECK.decode())
            if "secret_check" not in meta and "hmac_secret" not in meta:
                db.execute("INSERT INTO memory_meta (name, value) VALUES (?, ?)", ("secret_check", check))
            elif meta.get("secret_check") != check:
                raise UserError(
                    "The tombstone secret does not match the one this memory store was created with; "
                    "tombstones would stop matching. Pass the original secret."
                )
            return secret

    def _check_embedder(self) -> None:
        if self._embedder_checked:
            return
        emb = self.embedder
        ident = f"{getattr(emb, 'name', type(emb).__name__)}/{emb.dim}"
        with self.backend.write(["maitre-memory-meta"]) as db:
            rows = db.execute("SELECT value FROM memory_meta WHERE name = 'embedder'")
            if not rows:
                db.execute("INSERT INTO memory_meta (name, value) VALUES ('embedder', ?)", (ident,))
            elif rows[0][0] != ident:
                raise UserError(
                    f"This memory store's vectors were made by {rows[0][0]!r} but the store was opened with "
                    f"{ident!r}. Open it with the same embedder, or call reindex() to re-embed every fact."
                )
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
        """Write several candidates for one user in one transaction (one batch of embeddings)."""
        if not candidates:
            return []
        now = self._clock()
        prepared = [self._prepare(user, tenant, c, now) for c in candidates]
        vectors = self._embed_needed(user, tenant, prepared, unforget)
        outcomes: list[WriteOutcome] = []
        added: list[tuple[int, NDArray[np.float32]]] = []
        removed: list[int] = []
        with self.backend.write([f"{tenant}\x1f{user}"]) as db:
            profile_dirty = False
            for fact, slot, multi in prepared:
                outcome, add, rem = self._apply_one(
                    db, fact, slot, multi, vectors, unforget=unforget, now=now
                )
                outcomes.append(outcome)
                added += add
                removed += rem
                if (add or rem) and fact.key in self.policy.profile_keys:
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
            self._prepare(user, tenant, candidate, self._clock())
        except UserError as exc:
            return str(exc)
        return None

    def remember(
        self,
        user: str,
        messages: Sequence[Message],
        *,
        extractor: Extractor | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> list[WriteOutcome]:
        """The application-driven write step: extract candidates from messages and write them.

        Candidates the store refuses (secrets, invalid keys) are skipped and logged, not raised;
        forgotten facts come back as BLOCKED outcomes. Uses `RuleExtractor` unless told otherwise;
        for an async (model) extractor use `AsyncMemoryStore.remember`.
        """
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
        """Write extracted candidates in one batch, skipping (and logging) the ones the store refuses."""
        accepted = []
        for c in candidates:
            reason = self.check(user, c, tenant=tenant)
            if reason is None:
                accepted.append(c)
            else:
                log.info("memory: skipped an extracted candidate for key %r: %s", c.key, reason)
        return self.apply_many(user, accepted, tenant=tenant)

    def _prepare(self, user: str, tenant: str, c: Candidate, now: datetime) -> tuple[Fact, str, bool]:
        if not user or not tenant:
            raise UserError("A memory write needs a non-empty user and tenant.")
        key = normalise_key(c.key)
        value = " ".join(c.value.split())
        if not value and not c.retract:
            raise UserError(f"Memory value for {key!r} is empty; to end a value use retract().")
        if len(value) > self.policy.max_value_chars:
            raise UserError(
                f"Memory value for {key!r} is {len(value)} characters; the limit is "
                f"{self.policy.max_value_chars}. Store a short fact, not a document."
            )
        if self.policy.reject_secrets and looks_secret(key, value):
            raise UserError(
                f"Refusing to store {key!r}: it looks like a secret (card number, password, key). "
                "Long-term memory must never hold secrets."
            )
        valid_from = to_datetime(c.valid_from, default=now)
        if valid_from > now + _FUTURE_SKEW:
            raise UserError(
                f"valid_from {valid_from.isoformat()} is in the future; write a fact when it becomes true."
            )
        multi = key in self.policy.multi_valued
        norm = normalise_value(value)
        if multi and c.retract and not norm:
            raise UserError(f"{key!r} holds several values; name the value that ended.")
        slot = f"{key}\x1f{norm}" if multi else key
        fact = Fact(
            id=uuid.uuid4().hex,
            tenant=tenant,
            user=user,
            key=key,
            value=value,
            valid_from=valid_from,
            recorded_at=now,
            source=c.source or "",
            origin=Origin(c.origin),
            status=Status.CURRENT,
            retracted=c.retract,
        )
        return fact, slot, multi

    def _digest(self, fact: Fact) -> str:
        return tombstone_digest(self._secret, fact.tenant, fact.user, fact.key, normalise_value(fact.value))

    def _embed_needed(
        self, user: str, tenant: str, prepared: list[tuple[Fact, str, bool]], unforget: bool
    ) -> dict[str, NDArray[np.float32]]:
        """Embed, outside any transaction, the texts of candidates that look likely to become current.

        A batch (extraction, an import) embeds every text in one model call without asking the
        database first; a single write checks first, so a replay or a duplicate costs no embedding.
        """
        if len(prepared) > 1:
            return self._embed([fact_text(f.key, f.value) for f, _, _ in prepared if not f.retracted])
        wanted: list[str] = []
        with self.backend.read() as db:
            for fact, slot, multi in prepared:
                if fact.retracted or (not unforget and tombstoned(db, self._digest(fact))):
                    continue
                rows = [f for _, f in slot_rows(db, tenant, user, slot)]
                current = next((f for f in rows if f.status == Status.CURRENT), None)
                action = rules.decide(fact, rows, current, multi_valued=multi)
                if action in (WriteAction.INSERTED, WriteAction.CONFIRMED):
                    wanted.append(fact_text(fact.key, fact.value))
        return self._embed(wanted)

    def _embed(self, texts: list[str]) -> dict[str, NDArray[np.float32]]:
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        self._check_embedder()
        matrix = self.embedder.embed(unique)
        return dict(zip(unique, matrix, strict=True))

    def _apply_one(
        self,
        db: Db,
        fact: Fact,
        slot: str,
        multi: bool,
        vectors: dict[str, NDArray[np.float32]],
        *,
        unforget: bool,
        now: datetime,
    ) -> tuple[WriteOutcome, list[tuple[int, NDArray[np.float32]]], list[int]]:
        tenant, user = fact.tenant, fact.user
        digest = self._digest(fact)
        rows = slot_rows(db, tenant, user, slot)
        current_row = next(((s, f) for s, f in rows if f.status == Status.CURRENT), None)
        current = current_row[1] if current_row else None
        visible = current if current is not None and not current.retracted else None
        if not fact.retracted:
            if unforget:
                db.execute("DELETE FROM memory_tombstones WHERE digest = ?", (digest,))
            elif tombstoned(db, digest):
                return WriteOutcome(action=WriteAction.BLOCKED, current=visible), [], []
        action = rules.decide(fact, [f for _, f in rows], current, multi_valued=multi)
        if action in (WriteAction.DUPLICATE, WriteAction.IGNORED):
            return WriteOutcome(action=action, current=visible), [], []
        wins = action in (WriteAction.INSERTED, WriteAction.CONFIRMED)
        if not wins:
            assert current is not None
            fact.status, fact.superseded_by, fact.superseded_at = Status.SUPERSEDED, current.id, now
        seq = insert_fact(db, fact, slot)
        if not wins:
            return WriteOutcome(action=action, current=visible, stored=fact), [], []
        added: list[tuple[int, NDArray[np.float32]]] = []
        removed: list[int] = []
        if current_row is not None:
            old_seq, old = current_row
            db.execute(
                "UPDATE memory_facts SET status = 'superseded', superseded_by = ?, superseded_at = ? WHERE seq = ?",
                (fact.id, to_micros(now), old_seq),
            )
            if not old.retracted:
                self.backend.unindex(db, [(old_seq, tenant, user, fact_text(old.key, old.value))])
                removed.append(old_seq)
        if not fact.retracted:
            text = fact_text(fact.key, fact.value)
            vec = vectors.get(text)
            if vec is None:  # another writer changed the slot between our read and this transaction
                vec = self._embed([text])[text]
            self.backend.index(db, [(seq, tenant, user, text, vec)])
            added.append((seq, vec))
        return (
            WriteOutcome(action=action, current=None if fact.retracted else fact, stored=fact),
            added,
            removed,
        )

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
        key = normalise_key(key)
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
        key = normalise_key(key)
        with self.backend.read() as db:
            if valid_at is None and known_at is None:
                rows = db.execute(
                    f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ? "
                    "AND status = 'current' AND retracted = 0",
                    (tenant, user, key),
                )
                found = [row_fact(r)[1] for r in rows]
            else:
                now = self._clock()
                valid = to_datetime(valid_at, default=to_datetime(known_at, default=now))
                known = to_datetime(known_at, default=valid if valid_at is None else now)
                rows = db.execute(
                    f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ?",
                    (tenant, user, key),
                )
                slots: dict[str, list[Fact]] = {}
                for r in rows:
                    slots.setdefault(self._slot_of(row_fact(r)[1]), []).append(row_fact(r)[1])
                found = [
                    w
                    for w in (rules.winner(fs, valid_at=valid, known_at=known) for fs in slots.values())
                    if w
                ]
        return sorted(found, key=lambda f: (f.valid_from, f.recorded_at))

    def _slot_of(self, fact: Fact) -> str:
        if fact.key in self.policy.multi_valued:
            return f"{fact.key}\x1f{normalise_value(fact.value)}"
        return fact.key

    def history(self, user: str, key: str, *, tenant: str = DEFAULT_TENANT) -> list[Fact]:
        """Every stored fact of a key (current and superseded), by valid_from then recorded_at."""
        key = normalise_key(key)
        with self.backend.read() as db:
            rows = db.execute(
                f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ? AND key = ? "
                "ORDER BY valid_from, recorded_at, seq",
                (tenant, user, key),
            )
        return [row_fact(r)[1] for r in rows]

    def facts(self, user: str, *, tenant: str = DEFAULT_TENANT, include_history: bool = False) -> list[Fact]:
        """All of a user's facts (current only unless `include_history`), by key then valid_from."""
        where = "" if include_history else " AND status = 'current' AND retracted = 0"
        with self.backend.read() as db:
            rows = db.execute(
                f"SELECT {COLS} FROM memory_facts WHERE tenant = ? AND user_id = ?{where} "
                "ORDER BY key, valid_from, recorded_at, seq",
                (tenant, user),
            )
        return [row_fact(r)[1] for r in rows]

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
            lexical = self.backend.lexical(db, tenant, user, terms, _CANDIDATES)
            if self.backend.native_vectors:
                dense = self.backend.dense(db, tenant, user, qvec, _CANDIDATES)
            else:
                dense = self._dense_cached(db, tenant, user, qvec, int(version[0][0]))
            ranked = fuse(lexical, dense, k=k, min_similarity=threshold)
            if not ranked:
                return []
            by_seq = facts_by_seq(db, [r.seq for r in ranked])
        return [
            Hit(fact=by_seq[r.seq], score=r.score, similarity=r.similarity, lexical=r.lexical)
            for r in ranked
            if r.seq in by_seq and by_seq[r.seq].tenant == tenant and by_seq[r.seq].user == user
        ]

    def _dense_cached(
        self, db: Db, tenant: str, user: str, qvec: NDArray[np.float32], version: int
    ) -> list[tuple[int, float]]:
        scope = scope_token(tenant, user)
        hits = self._cache.search(scope, version, qvec, _CANDIDATES)
        if hits is not None:
            return hits
        seqs, blobs = self.backend.load_vectors(db, tenant, user, self.embedder_dim)
        dim = self.embedder_dim
        matrix = (
            np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float32)
            if blobs
            else np.zeros((0, dim), dtype=np.float32)
        )
        self._cache.put(scope, version, np.asarray(seqs, dtype=np.int64), matrix)
        hits = self._cache.search(scope, version, qvec, _CANDIDATES)
        if hits is None:  # too large to cache: search the loaded matrix directly
            sims = np.einsum("ij,j->i", matrix, qvec)
            top = np.argsort(-sims)[:_CANDIDATES]
            hits = [(int(seqs[i]), float(sims[i])) for i in top]
        return hits

    # -- profile and summaries ------------------------------------------------------------------------

    def profile(self, user: str, *, tenant: str = DEFAULT_TENANT) -> Profile:
        """The always-loaded profile: one `key: value` line per designated key, deterministic."""
        with self.backend.read() as db:
            rows = db.execute(
                "SELECT text FROM memory_summaries WHERE tenant = ? AND user_id = ? AND id = ?",
                (tenant, user, PROFILE_ID),
            )
            facts = profile_facts(db, tenant, user, self.policy)
        text = rows[0][0] if rows else profile_text(facts, self.policy)[0]
        return Profile(text=text, facts=facts, tokens=count_tokens(text) if text else 0)

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
            known = set()
            for chunk in chunks(summary.sources):
                marks = ", ".join("?" * len(chunk))
                known |= {
                    r[0]
                    for r in db.execute(
                        f"SELECT id FROM memory_facts WHERE tenant = ? AND user_id = ? AND id IN ({marks})",
                        (tenant, user, *chunk),
                    )
                }
            missing = [s for s in summary.sources if s not in known]
            if missing or not summary.sources:
                raise UserError(
                    f"A summary must be built from this user's facts; unknown fact ids: {missing}."
                )
            db.execute(
                "INSERT INTO memory_summaries (id, tenant, user_id, kind, text, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (summary.id, tenant, user, kind, text, to_micros(summary.created_at or self._clock())),
            )
            db.executemany(
                "INSERT INTO memory_summary_sources (tenant, user_id, summary_id, fact_id) VALUES (?, ?, ?, ?)",
                [(tenant, user, summary.id, s) for s in summary.sources],
            )
        return summary

    def summaries(self, user: str, *, tenant: str = DEFAULT_TENANT) -> list[Summary]:
        """Every stored summary of the user (the profile included), with its lineage."""
        with self.backend.read() as db:
            rows = db.execute(
                "SELECT id, kind, text, created_at FROM memory_summaries WHERE tenant = ? AND user_id = ? "
                "ORDER BY created_at, id",
                (tenant, user),
            )
            links = db.execute(
                "SELECT summary_id, fact_id FROM memory_summary_sources WHERE tenant = ? AND user_id = ?",
                (tenant, user),
            )
        sources: dict[str, list[str]] = {}
        for sid, fid in links:
            sources.setdefault(sid, []).append(fid)
        return [
            Summary(
                id=r[0],
                tenant=tenant,
                user=user,
                kind=r[1],
                text=r[2],
                sources=sorted(sources.get(r[0], [])),
                created_at=from_micros(r[3]),
            )
            for r in rows
        ]

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
        key = normalise_key(key)
        return self._delete(tenant, user, key=key, value=value)

    def delete_user(self, user: str, *, tenant: str = DEFAULT_TENANT) -> DeleteReport:
        """Forget everything about a user (the right to erasure), with tombstones for every value."""
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

    # -- export and maintenance ---------------------------------------------------------------------

    def export(self, user: str, *, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """Everything stored about a user, JSON-ready: facts with history, summaries, the profile."""
        facts = self.facts(user, tenant=tenant, include_history=True)
        return {
            "tenant": tenant,
            "user": user,
            "exported_at": self._clock().isoformat(),
            "profile": self.profile(user, tenant=tenant).text,
            "facts": [f.to_dict() for f in facts],
            "summaries": [
                {
                    "id": s.id,
                    "kind": s.kind,
                    "text": s.text,
                    "sources": s.sources,
                    "created_at": s.created_at.isoformat() if s.created_at else None,
                }
                for s in self.summaries(user, tenant=tenant)
            ],
        }

    def users(self, *, tenant: str = DEFAULT_TENANT) -> list[str]:
        """Users with at least one stored fact in the tenant."""
        with self.backend.read() as db:
            rows = db.execute(
                "SELECT DISTINCT user_id FROM memory_facts WHERE tenant = ? ORDER BY user_id", (tenant,)
            )
        return [r[0] for r in rows]

    def reindex(self) -> int:
        """Re-embed every current fact with this store's embedder (after changing embedders)."""
        with self.backend.read() as db:
            rows = db.execute(
                "SELECT seq, tenant, user_id, key, value FROM memory_facts WHERE status = 'current' AND retracted = 0"
            )
        vectors = self.embedder.embed([fact_text(r[3], r[4]) for r in rows]) if rows else None
        emb = self.embedder
        with self.backend.write(["maitre-memory-meta"]) as db:
            items = [(r[0], r[1], r[2], fact_text(r[3], r[4])) for r in rows]
            self.backend.unindex(db, items)
            if vectors is not None:
                self.backend.index(db, [(*item, vectors[i]) for i, item in enumerate(items)])
            db.execute("DELETE FROM memory_meta WHERE name = 'embedder'")
            db.execute(
                "INSERT INTO memory_meta (name, value) VALUES ('embedder', ?)",
                (f"{getattr(emb, 'name', type(emb).__name__)}/{emb.dim}",),
            )
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
