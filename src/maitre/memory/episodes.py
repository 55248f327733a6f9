"""Episodes: the raw turns of a conversation, kept beside the facts extracted from them.

A fact (`city = Leeds`) is what the store concluded; an episode is what was said ("we're moving
into a two-bed terrace in Chapel Allerton, end of March"), by whom, when, in which session. Facts
answer "where does she live?"; episodes answer what facts cannot hold: "what did Tom say about the
wedding?", "where did she live before the move?" (episodes are never superseded, each has its time).

Storage (table `memory_episodes`, schema version 2): one row per episode with its id (unique per
tenant and user), session, speaker, role, source, time, text and a float32 embedding of
`"<speaker>: <text>"`. The lexical index is an FTS5 table `memory_episodes_fts` (SQLite, rowid =
the episode's seq, scoped like the facts' index) or a `tsvector` column with a GIN index
(Postgres). `memory_episode_facts` links an episode to the facts extracted from it.

Deletion cascades both ways: forgetting a fact forgets the episodes it was extracted from and every
episode of the user whose text holds the forgotten value (`episodes_holding`), since the raw text is
as much a copy of the value as the fact row; `MemoryStore.delete_episode` forgets one episode.
A forgotten episode leaves HMAC tombstones of its id and its text (never the text), so a replay of
the same conversation skips it instead of storing it back.

These functions run inside the caller's transaction (portable SQL, `?`), with `kind` the backend's
dialect (`sqlite` / `postgres`) where the full-text statements differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from maitre.storage.engine.sqlite import scope_token

from .backend import Db
from .identity import value_identity
from .model import Episode, from_micros, normalise_value, to_micros
from .rows import add_tombstones, chunks, tombstoned

__all__ = [
    "CONTEXT_WEIGHT",
    "EPISODE_COLS",
    "EpisodeDigests",
    "delete_episodes",
    "episode_exists",
    "episode_lexical",
    "episode_text",
    "episodes_by_seq",
    "episodes_holding",
    "episodes_linked",
    "insert_episodes",
    "link_fact",
    "list_episodes",
    "load_episode_vectors",
    "row_episode",
    "seqs_between",
]

CONTEXT_WEIGHT = 0.1
"""Weight of the turn before (an episode's context) against the turn itself in the full-text ranking."""

EPISODE_COLS = "seq, id, tenant, user_id, session, speaker, role, source, at, recorded_at, text, context"


def episode_text(text: str, context: str = "") -> str:
    """An episode's *window*: the turn before it, then the turn (embedded as its second vector).

    The turn alone is indexed and embedded too; the window finds an answer by the question it
    answers ("Which school is it again?" / "Hollybrook Primary, near the harbour"). The speaker's
    name is left out of both: in a conversation between two people every other turn has it, so it
    matched every question that names them ("what does Hana research?") and drowned the turns that
    answer them."""
    return f"{context}\n{text}" if context else text


def row_episode(row: Sequence[Any]) -> tuple[int, Episode]:
    """(seq, Episode) from a row selected with `EPISODE_COLS`."""
    return int(row[0]), Episode(
        id=row[1],
        tenant=row[2],
        user=row[3],
        session=row[4],
        speaker=row[5],
        role=row[6],
        source=row[7],
        at=from_micros(row[8]),
        recorded_at=from_micros(row[9]),
        text=row[10],
        context=row[11],
    )


def insert_episodes(
    db: Db,
    kind: str,
    episodes: Sequence[Episode],
    vectors: Sequence[tuple[bytes, bytes]],
    *,
    recorded_us: int,
    tombstones: EpisodeDigests | None = None,
) -> list[tuple[int, Episode]]:
    """Store new episodes with their (turn, window) vectors; an id the user already has is skipped,
    and so is a forgotten episode (its id or its text has a tombstone, see `delete_episodes`).

    Returns the (seq, episode) stored."""
    stored: list[tuple[int, Episode]] = []
    for episode, (blob, window) in zip(episodes, vectors, strict=True):
        if episode_exists(db, episode.tenant, episode.user, episode.id) or (
            tombstones is not None and tombstoned(db, tombstones(episode.id, episode.text))
        ):
            continue
        body = episode.text
        values = (
            episode.id,
            episode.tenant,
            episode.user,
            episode.session,
            episode.speaker,
            episode.role,
            episode.source,
            to_micros(episode.at),
            recorded_us,
            episode.text,
            episode.context,
            blob,
            window,
        )
        cols = (
            "id, tenant, user_id, session, speaker, role, source, at, recorded_at, text, context, vec, wvec"
        )
        if kind == "postgres":
            rows = db.execute(
                f"INSERT INTO memory_episodes ({cols}, tsv) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "setweight(to_tsvector('english', ?), 'A') || setweight(to_tsvector('english', ?), 'C')) "
                "RETURNING seq",
                (*values, body, episode.context),
            )
            seq = int(rows[0][0])
        else:
            rows = db.execute(
                f"INSERT INTO memory_episodes ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                values,
            )
            seq = int(rows[0][0])
            db.execute(
                "INSERT INTO memory_episodes_fts (rowid, scope, body, context) VALUES (?, ?, ?, ?)",
                (seq, scope_token(episode.tenant, episode.user), body, episode.context),
            )
        stored.append((seq, episode))
    return stored


def episode_exists(db: Db, tenant: str, user: str, episode_id: str) -> bool:
    """Whether the user has an episode with this id."""
    return bool(
        db.execute(
            "SELECT 1 FROM memory_episodes WHERE tenant = ? AND user_id = ? AND id = ?",
            (tenant, user, episode_id),
        )
    )


def link_fact(db: Db, tenant: str, user: str, episode_id: str, fact_id: str) -> None:
    """Record that `fact_id` was extracted from the episode `episode_id` (idempotent)."""
    db.execute(
        "INSERT INTO memory_episode_facts (tenant, user_id, episode_id, fact_id) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (tenant, user, episode_id, fact_id),
    )


def _time_filter(before_us: int | None, after_us: int | None) -> tuple[str, list[int]]:
    where, params = "", []
    if before_us is not None:
        where += " AND e.at < ?"
        params.append(before_us)
    if after_us is not None:
        where += " AND e.at >= ?"
        params.append(after_us)
    return where, params


def episode_lexical(
    db: Db,
    kind: str,
    tenant: str,
    user: str,
    terms: Sequence[str],
    limit: int,
    *,
    before_us: int | None = None,
    after_us: int | None = None,
) -> list[tuple[int, float]]:
    """(seq, score) of the user's episodes matching any term, best first (BM25 / ts_rank_cd)."""
    words = [t for t in terms if t.isalnum()]
    if not words:
        return []
    when, params = _time_filter(before_us, after_us)
    if kind == "postgres":
        rows = db.execute(
            f"SELECT e.seq, ts_rank_cd('{{{CONTEXT_WEIGHT}, {CONTEXT_WEIGHT}, 0.4, 1.0}}', e.tsv, q) AS r "
            "FROM memory_episodes e, to_tsquery('english', ?) q "
            f"WHERE e.tenant = ? AND e.user_id = ? AND e.tsv @@ q{when} ORDER BY r DESC, e.seq LIMIT ?",
            (" | ".join(words), tenant, user, *params, limit),
        )
        return [(int(r[0]), float(r[1])) for r in rows]
    match = f'scope:"{scope_token(tenant, user)}" AND (' + " OR ".join(f'"{w}"' for w in words) + ")"
    rows = db.execute(
        f"SELECT e.seq, -bm25(memory_episodes_fts, 0.0, 1.0, {CONTEXT_WEIGHT}) AS r FROM memory_episodes_fts "
        "JOIN memory_episodes e ON e.seq = memory_episodes_fts.rowid "
        f"WHERE memory_episodes_fts MATCH ? AND e.tenant = ? AND e.user_id = ?{when} "
        "ORDER BY r DESC, e.seq LIMIT ?",
        (match, tenant, user, *params, limit),
    )
    return [(int(r[0]), float(r[1])) for r in rows]


def seqs_between(db: Db, tenant: str, user: str, *, before_us: int | None, after_us: int | None) -> set[int]:
    """Seqs of the user's episodes said in [after, before)."""
    when, params = _time_filter(before_us, after_us)
    rows = db.execute(
        f"SELECT e.seq FROM memory_episodes e WHERE e.tenant = ? AND e.user_id = ?{when}",
        (tenant, user, *params),
    )
    return {int(r[0]) for r in rows}


def load_episode_vectors(
    db: Db, tenant: str, user: str, *, window: bool = False
) -> tuple[list[int], list[bytes]]:
    """Every (seq, float32 blob) of the user's episodes: the turns' vectors, or the windows'."""
    column = "wvec" if window else "vec"
    rows = db.execute(
        f"SELECT seq, {column} FROM memory_episodes WHERE tenant = ? AND user_id = ?", (tenant, user)
    )
    return [int(r[0]) for r in rows], [bytes(r[1]) for r in rows]


def episodes_by_seq(
    db: Db, seqs: Sequence[int], *, tenant: str | None = None, user: str | None = None
) -> dict[int, Episode]:
    """The stored episodes among `seqs`, by seq, with their linked fact ids (only the user's, when
    `tenant` and `user` are given: a seq from a cache or a snapshot file is checked, not trusted)."""
    out: dict[int, Episode] = {}
    scoped = tenant is not None and user is not None
    where = " AND tenant = ? AND user_id = ?" if scoped else ""
    for chunk in chunks(list(seqs)):
        marks = ", ".join("?" * len(chunk))
        params = (*chunk, tenant, user) if scoped else tuple(chunk)
        for r in db.execute(
            f"SELECT {EPISODE_COLS} FROM memory_episodes WHERE seq IN ({marks}){where}", params
        ):
            seq, episode = row_episode(r)
            out[seq] = episode
    _attach_links(db, list(out.values()))
    return out


def _attach_links(db: Db, episodes: list[Episode]) -> None:
    by_scope: dict[tuple[str, str], dict[str, Episode]] = {}
    for e in episodes:
        by_scope.setdefault((e.tenant, e.user), {})[e.id] = e
    for (tenant, user), found in by_scope.items():
        for chunk in chunks(list(found)):
            marks = ", ".join("?" * len(chunk))
            for episode_id, fact_id in db.execute(
                "SELECT episode_id, fact_id FROM memory_episode_facts WHERE tenant = ? AND user_id = ? "
                f"AND episode_id IN ({marks}) ORDER BY fact_id",
                (tenant, user, *chunk),
            ):
                found[episode_id].fact_ids.append(fact_id)


def list_episodes(
    db: Db,
    tenant: str,
    user: str,
    *,
    session: str | None = None,
    before_us: int | None = None,
    after_us: int | None = None,
    limit: int | None = None,
) -> list[Episode]:
    """The user's episodes in time order (then storage order), optionally one session or a time range."""
    when, params = _time_filter(before_us, after_us)
    extra: list[Any] = list(params)
    if session is not None:
        when += " AND e.session = ?"
        extra.append(session)
    tail = " LIMIT ?" if limit is not None else ""
    if limit is not None:
        extra.append(limit)
    cols = ", ".join(f"e.{c.strip()}" for c in EPISODE_COLS.split(","))
    rows = db.execute(
        f"SELECT {cols} FROM memory_episodes e WHERE e.tenant = ? AND e.user_id = ?{when} "
        f"ORDER BY e.at, e.seq{tail}",
        (tenant, user, *extra),
    )
    episodes = [row_episode(r)[1] for r in rows]
    _attach_links(db, episodes)
    return episodes


def episodes_linked(db: Db, tenant: str, user: str, fact_ids: Sequence[str]) -> set[int]:
    """Seqs of the episodes that any of `fact_ids` was extracted from."""
    out: set[int] = set()
    for chunk in chunks(list(fact_ids)):
        marks = ", ".join("?" * len(chunk))
        rows = db.execute(
            "SELECT e.seq FROM memory_episodes e JOIN memory_episode_facts l ON l.tenant = e.tenant "
            "AND l.user_id = e.user_id AND l.episode_id = e.id "
            f"WHERE e.tenant = ? AND e.user_id = ? AND l.fact_id IN ({marks})",
            (tenant, user, *chunk),
        )
        out |= {int(r[0]) for r in rows}
    return out


def episodes_holding(db: Db, tenant: str, user: str, values: Sequence[str]) -> set[int]:
    """Seqs of the user's episodes whose text holds one of `values` as whole words (however spelled).

    The context an episode was indexed with (the turn before it) counts as its text: its index
    entries hold that copy too, so the episode after a forgotten turn that names the value goes.

    Compared on both identities the tombstones use (`normalise_value`, `value_identity`), so a
    zero-width space or a confusable letter in the stored text does not hide the value."""
    patterns = [
        re.compile(r"(?<!\w)" + re.escape(form) + r"(?!\w)")
        for v in values
        for form in {normalise_value(v), value_identity(v)}
        if form.strip()
    ]
    if not patterns:
        return set()
    out: set[int] = set()
    rows = db.execute(
        "SELECT seq, text, context FROM memory_episodes WHERE tenant = ? AND user_id = ?", (tenant, user)
    )
    for seq, text, context in rows:
        body = episode_text(text, context)
        forms = (normalise_value(body), value_identity(body))
        if any(p.search(form) for p in patterns for form in forms):
            out.add(int(seq))
    return out


EpisodeDigests = Callable[[str, str], Sequence[str]]
"""`(episode id, text) -> tombstone digests` standing for a forgotten episode (`MemoryStore`'s HMAC)."""


def delete_episodes(
    db: Db,
    kind: str,
    tenant: str,
    user: str,
    seqs: Sequence[int],
    *,
    tombstones: EpisodeDigests | None = None,
    now_us: int = 0,
) -> list[str]:
    """Delete episodes (rows, full-text entries and links); returns the ids deleted.

    With `tombstones`, each deleted episode leaves the digests of its id and its text in
    `memory_tombstones`, so replaying the same conversation (`remember(episodes=True)` again, an
    import) cannot store the forgotten turn back (`insert_episodes` checks them)."""
    ids: list[str] = []
    for chunk in chunks(sorted(seqs)):
        marks = ", ".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT id, text FROM memory_episodes WHERE tenant = ? AND user_id = ? AND seq IN ({marks})",
            (tenant, user, *chunk),
        )
        found = [r[0] for r in rows]
        ids += found
        if tombstones is not None:
            add_tombstones(db, (d for episode_id, text in rows for d in tombstones(episode_id, text)), now_us)
        if kind != "postgres":
            db.execute(f"DELETE FROM memory_episodes_fts WHERE rowid IN ({marks})", chunk)
        db.execute(
            f"DELETE FROM memory_episodes WHERE tenant = ? AND user_id = ? AND seq IN ({marks})",
            (tenant, user, *chunk),
        )
        for ids_chunk in chunks(found):
            id_marks = ", ".join("?" * len(ids_chunk))
            db.execute(
                "DELETE FROM memory_episode_facts WHERE tenant = ? AND user_id = ? "
                f"AND episode_id IN ({id_marks})",
                (tenant, user, *ids_chunk),
            )
    if ids and kind != "postgres":  # FTS5 keeps deleted rows' tokens in old segments until merged
        db.execute("INSERT INTO memory_episodes_fts (memory_episodes_fts) VALUES ('optimize')")
    return ids
