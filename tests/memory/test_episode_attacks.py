"""Attacks on episodes, `search`, the vector log and the vector snapshots (issue 16 items 3 and 6).

Each test is an attack that must fail: another user or tenant reading episodes or hits, a forget
that leaves the value in a snapshot file, the vector log, the full-text shadow tables or the WAL,
a tampered / truncated / foreign snapshot file, two processes writing while a third reads, and
inputs no one expected.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import textwrap
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from maitre.embeddings import HashingEmbedder
from maitre.exceptions import UserError
from maitre.memory import MemoryStore
from maitre.memory import retrieval as retrieval_module
from maitre.memory.model import Episode
from maitre.memory.vectors import VectorSnapshots, encode_vector, vector_scope

from .conftest import Clock, StoreFactory

MARK = "Zorbluxville"


def ep(i: str, text: str, day: str = "2026-03-01T10:00", session: str = "s1") -> Episode:
    return Episode(
        id=i,
        tenant="",
        user="",
        speaker="Maya",
        text=text,
        at=datetime.fromisoformat(day).replace(tzinfo=UTC),
        session=session,
    )


def owner(hit: object) -> tuple[str, str]:
    item = getattr(hit, "episode", None) or getattr(hit, "fact", None)
    return item.tenant, item.user  # type: ignore[union-attr]


def scope(store: MemoryStore, user: str, kind: str) -> str:
    """The store's cache and snapshot key of one user's vectors of one kind."""
    keys = {"f": store._fact_scope, "e": store._episode_scope, "w": store._window_scope}
    return keys[kind]("default", user)


def seed(store: MemoryStore, user: str, tenant: str = "default") -> None:
    store.add_episodes(
        user,
        [ep("a1", f"We moved to {MARK} last month."), ep("a2", "The garden there is huge.")],
        tenant=tenant,
    )
    store.write(user, "city", MARK, valid_from="2026-02-01", tenant=tenant)


# -- another user, another tenant ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("victim", "attacker"),
    [
        (("a", "b\x1fc"), ("a\x1fb", "c")),  # one separator-joined scope for two pairs
        (("t", "maya"), ("t", "tom")),  # another user of the same tenant
        (("t", "maya"), ("t2", "maya")),  # the same user name in another tenant
    ],
)
def test_nobody_else_reads_episodes_or_hits(
    make_store: StoreFactory, clock: Clock, victim: tuple[str, str], attacker: tuple[str, str]
) -> None:
    store = make_store(clock=clock)
    seed(store, victim[1], victim[0])
    store.add_episodes(attacker[1], [ep("b1", "I like tea.")], tenant=attacker[0])
    store.write(attacker[1], "drink", "tea", tenant=attacker[0])
    # The victim's matrices are now cached at the same version the attacker's counter is at.
    assert store.search(victim[1], f"moved to {MARK}", tenant=victim[0], abstain=False)
    assert store.retrieve(victim[1], f"city {MARK}", tenant=victim[0])
    other = make_store(clock=clock)  # and a second process, whose cache is empty
    for s in (store, other):
        for query in (f"moved to {MARK}", "garden", "tea", "\x01"):
            for kwargs in ({}, {"as_of": "2026-06-01"}, {"before": "2026-12-01"}):
                hits = s.search(attacker[1], query, tenant=attacker[0], abstain=False, **kwargs)  # type: ignore[arg-type]
                assert {owner(h) for h in hits} <= {attacker}, (query, kwargs)
            hits_r = s.retrieve(attacker[1], query, tenant=attacker[0], min_similarity=-1.0)
            assert {(h.fact.tenant, h.fact.user) for h in hits_r} <= {attacker}
        assert [e.id for e in s.episodes(attacker[1], tenant=attacker[0])] == ["b1"]


def test_vector_scopes_are_unambiguous() -> None:
    assert vector_scope("a", "b\x1fc", "e") != vector_scope("a\x1fb", "c", "e")
    assert vector_scope("a:1", "b", "f") != vector_scope("a", "1:b", "f")
    assert len({vector_scope("t", "u", k) for k in "few"}) == 3


# -- snapshot files: foreign, tampered, truncated, older ----------------------------------------------


@pytest.fixture
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots for every scope, however small (the real threshold is 2048 rows)."""
    monkeypatch.setattr(retrieval_module, "SNAPSHOT_MIN_ROWS", 1)


def _sqlite(tmp_path: Path, clock: Clock) -> MemoryStore:
    return MemoryStore.sqlite(tmp_path / "m.db", embedder=HashingEmbedder(), clock=clock)


def _snap_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "m.db.vectors").glob("*.vec"))


def test_a_snapshot_copied_from_another_user_is_not_read(
    tmp_path: Path, clock: Clock, small_snapshots: None
) -> None:
    store = _sqlite(tmp_path, clock)
    seed(store, "maya")
    store.add_episodes("tom", [ep("b1", "I like tea.")])
    store.add_episodes("tom", [ep("b2", "And biscuits.")])
    store.add_episodes("tom", [ep("b3", "Not cake.")])  # tom at version 3, maya at 3 too
    assert store.search("maya", f"moved to {MARK}", abstain=False)
    snaps = VectorSnapshots(tmp_path / "m.db.vectors")
    for kind in "few":
        src = snaps.path(scope(store, "maya", kind))
        if src.exists():
            shutil.copy(src, snaps.path(scope(store, "tom", kind)))
    fresh = _sqlite(tmp_path, clock)
    hits = fresh.search("tom", f"moved to {MARK} garden", abstain=False)
    assert {owner(h) for h in hits} <= {("default", "tom")}
    assert {h.id for h in hits if h.kind == "episode"} <= {"b1", "b2", "b3"}
    toms = {
        int(r[0])
        for r in sqlite3.connect(tmp_path / "m.db").execute(
            "SELECT seq FROM memory_episodes WHERE user_id = 'tom'"
        )
    }
    loaded = VectorSnapshots(tmp_path / "m.db.vectors").load(scope(store, "tom", "e"), 256)
    assert loaded is None or set(loaded[1].tolist()) <= toms, "the foreign file is not tom's snapshot"


def _tamper(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) - 100]))
    elif how == "header-only":
        path.write_bytes(bytes(data[:20]))
    elif how == "huge-rows":
        data[32:40] = struct.pack("<q", 2**60)
        path.write_bytes(bytes(data))
    elif how == "negative-rows":
        data[32:40] = struct.pack("<q", -5)
        path.write_bytes(bytes(data))
    elif how == "older-layout":
        path.write_bytes(b"MAITREV1" + struct.pack("<qqq", 1, 1, 256) + bytes(8 + 1024))
    elif how == "wrong-dim":
        data[40:48] = struct.pack("<q", 8)
        path.write_bytes(bytes(data))
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "foreign-seqs":  # a valid header, seqs rewritten to another user's rows
        rows = struct.unpack("<q", bytes(data[32:40]))[0]
        data[48 : 48 + 8 * rows] = np.arange(1, rows + 1, dtype="<i8").tobytes()
        path.write_bytes(bytes(data))
    elif how == "nan-vectors":
        rows = struct.unpack("<q", bytes(data[32:40]))[0]
        start = 48 + 8 * rows
        data[start:] = np.full((len(data) - start) // 4, np.nan, dtype="<f4").tobytes()
        path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "how",
    [
        "truncated",
        "header-only",
        "huge-rows",
        "negative-rows",
        "older-layout",
        "wrong-dim",
        "garbage",
        "foreign-seqs",
        "nan-vectors",
    ],
)
def test_a_tampered_snapshot_neither_crashes_nor_leaks(
    tmp_path: Path, clock: Clock, small_snapshots: None, how: str
) -> None:
    store = _sqlite(tmp_path, clock)
    store.add_episodes("tom", [ep("t1", "Tom's secret is the blue door.")])  # seqs 1.. are tom's
    seed(store, "maya")
    expected = [h.id for h in store.search("maya", f"moved to {MARK}", abstain=False)]
    files = _snap_files(tmp_path)
    assert files, "snapshots were written"
    for path in files:
        _tamper(path, how)
    fresh = _sqlite(tmp_path, clock)
    hits = fresh.search("maya", f"moved to {MARK}", abstain=False)
    assert {owner(h) for h in hits} == {("default", "maya")}
    assert "t1" not in {h.id for h in hits}
    if how not in ("foreign-seqs", "nan-vectors"):  # bytes the header cannot vouch for
        assert [h.id for h in hits] == expected
    fresh.delete("maya", "city", MARK)  # zeroing a tampered file must not crash either
    for hit in fresh.search("maya", f"moved to {MARK}", abstain=False):
        assert MARK not in (hit.episode.text if hit.episode else hit.fact.value)  # type: ignore[union-attr]


def test_a_bad_snapshot_is_rebuilt(tmp_path: Path, clock: Clock, small_snapshots: None) -> None:
    store = _sqlite(tmp_path, clock)
    seed(store, "maya")
    store.search("maya", "garden", abstain=False)
    for path in _snap_files(tmp_path):
        _tamper(path, "truncated")
    old_layout = tmp_path / "m.db.vectors" / ("0" * 32 + ".vec")
    old_layout.write_bytes(b"MAITREV1" + bytes(64))
    fresh = _sqlite(tmp_path, clock)
    fresh.search("maya", "garden", abstain=False)
    assert not old_layout.exists(), "a file of the older layout is removed"
    snaps = VectorSnapshots(tmp_path / "m.db.vectors")
    for kind in "ew":
        loaded = snaps.load(scope(fresh, "maya", kind), 256)
        assert loaded is not None and len(loaded[1]) == 2, f"the {kind} snapshot was rewritten"


# -- forget reaches every copy -------------------------------------------------------------------------


def test_forget_reaches_every_snapshot_the_log_the_fts_shadow_tables_and_the_wal(
    tmp_path: Path, clock: Clock, small_snapshots: None
) -> None:
    store = _sqlite(tmp_path, clock)
    seed(store, "maya")
    store.add_episodes("maya", [ep("a3", "Unrelated: the bins go out on Tuesday.", "2026-03-02T10:00")])
    store.search("maya", f"moved to {MARK}", abstain=False)  # writes the f, e and w snapshots
    store.retrieve("maya", f"city {MARK}")
    emb = HashingEmbedder()
    turn = f"We moved to {MARK} last month."
    forbidden = [
        encode_vector(emb.embed([turn])[0]),  # the turn's vector
        encode_vector(emb.embed([turn + "\n" + "The garden there is huge."])[0]),
        encode_vector(emb.embed(["The garden there is huge."])[0]),
    ]
    windows = [e.context for e in store.episodes("maya")]
    assert turn in windows, "the next turn is indexed with the marker as its context"
    reader = sqlite3.connect(tmp_path / "m.db")  # a reader held open across the forget
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memory_episodes").fetchone()
    report = store.delete("maya", "city", MARK)
    assert report.episodes == 2, "the turn and the turn after it (its window holds the value)"
    reader.execute("ROLLBACK")
    reader.close()
    assert store.wait_erased(10.0)
    for path in _snap_files(tmp_path):
        data = path.read_bytes()
        for vec in forbidden:
            assert vec not in data, f"a forgotten episode's vector survives in {path.name}"
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file() and p.name.startswith("m.db"))
    assert MARK.encode() not in blob and MARK.lower().encode() not in blob
    conn = sqlite3.connect(tmp_path / "m.db")
    log_text = " ".join(str(r) for r in conn.execute("SELECT * FROM memory_vector_log"))
    assert MARK.lower() not in log_text.lower()
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        for row in conn.execute(f"SELECT * FROM {name}"):
            assert MARK.lower() not in repr(row).lower(), name
    conn.close()
    assert [e.id for e in store.episodes("maya")] == ["a3"]


def test_forgetting_everything_removes_the_users_snapshots(
    tmp_path: Path, clock: Clock, small_snapshots: None
) -> None:
    store = _sqlite(tmp_path, clock)
    seed(store, "maya")
    store.search("maya", "garden", abstain=False)
    assert _snap_files(tmp_path)
    store.delete_user("maya")
    assert _snap_files(tmp_path) == []


_WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from maitre.embeddings import HashingEmbedder
    from maitre.memory import MemoryStore
    from maitre.memory.model import Episode
    path, role = sys.argv[1], sys.argv[2]
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder())
    at = datetime(2026, 3, 1, tzinfo=UTC)
    if role == "adder":
        for i in range(30):
            store.add_episodes("maya", [Episode(id=f"n{i}", tenant="", user="", speaker="Maya",
                text=f"note {i} about the allotment", at=at, session="s2")])
            store.write("maya", f"note_{i}", f"allotment plot {i}", valid_from="2026-03-01")
    else:
        for i in range(20):
            store.add_episodes("maya", [Episode(id=f"x{i}", tenant="", user="", speaker="Maya",
                text=f"The hideout is at Quuxhaven {i} now.", at=at, session="s3")])
            store.write("maya", f"hideout_{i}", f"Quuxhaven {i}", valid_from="2026-03-01")
        for i in range(20):
            store.delete("maya", f"hideout_{i}")
    store.close()
    """
)


def test_two_processes_write_while_a_third_reads_and_no_forgotten_vector_stays(
    tmp_path: Path, clock: Clock, small_snapshots: None
) -> None:
    db = tmp_path / "m.db"
    reader = MemoryStore.sqlite(db, embedder=HashingEmbedder())
    seed(reader, "maya")
    reader.search("maya", "garden", abstain=False)  # the reader's cache and snapshots are warm
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db), role], env=env, stderr=subprocess.PIPE)
        for role in ("adder", "forgetter")
    ]
    reads = 0
    while any(p.poll() is None for p in procs) and reads < 400:
        reader.search("maya", "Quuxhaven secret", abstain=False)
        reader.retrieve("maya", "Quuxhaven hideout")
        reads += 1
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err.decode()[-2000:]
    assert reads > 0
    hits = reader.search("maya", "Quuxhaven secret number", k=50, abstain=False)
    assert all("Quuxhaven" not in (h.episode.text if h.episode else h.fact.value) for h in hits)  # type: ignore[union-attr]
    assert not [h for h in reader.retrieve("maya", "Quuxhaven", k=50) if "Quuxhaven" in h.fact.value]
    # No cached row of the reader's still holds a forgotten episode's vector.
    gone = {int(r[0]) for r in sqlite3.connect(db).execute("SELECT seq FROM memory_episodes")}
    for kind in "ew":
        rows = reader._cache.rows(scope(reader, "maya", kind))
        if rows is not None:
            assert set(rows[1].tolist()) <= gone
    notes = reader.search("maya", "note 7 about the allotment", abstain=False)
    assert notes and notes[0].kind == "episode" and notes[0].id == "n7", "the adder's rows are read"
    assert reader.wait_erased(10.0)
    blob = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"Quuxhaven" not in blob and b"quuxhaven" not in blob


# -- inputs no one expected ---------------------------------------------------------------------------


def test_odd_queries_neither_crash_nor_leak(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    seed(store, "maya")
    assert store.search("maya", "") == []
    assert store.search("maya", "   \n\t ") == []
    assert store.retrieve("maya", "") == []
    long_query = ("where did we move " * 600)[:10_000]
    assert isinstance(store.search("maya", long_query), list)
    assert isinstance(store.retrieve("maya", long_query), list)
    for bad in ("moved \ud800", "moved \udfff to"):
        with pytest.raises(UserError, match="surrogate"):
            store.search("maya", bad)
        with pytest.raises(UserError, match="surrogate"):
            store.retrieve("maya", bad)
    for k in (0, -1, -(10**9)):
        assert store.search("maya", "garden", k=k) == []
        assert store.retrieve("maya", "garden", k=k) == []
    assert len(store.search("maya", "garden", k=10**9, abstain=False)) <= 3
    for odd in ("'; DROP TABLE memory_episodes; --", 'scope:"x" OR garden', "NEAR(a b) * ^ -", "a | b & !c"):
        store.search("maya", odd, abstain=False)
        store.retrieve("maya", odd)
    assert [e.id for e in store.episodes("maya")] == ["a1", "a2"]


def test_nul_is_a_user_error_on_both_backends(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    with pytest.raises(UserError, match="NUL"):
        store.add_episodes("maya", [ep("n1", "hello\x00world")])
    with pytest.raises(UserError, match="NUL"):
        store.add_episodes("maya", [ep("n\x001", "hello")])
    with pytest.raises(UserError, match="NUL"):
        store.write("maya", "city", "Le\x00eds")
    written = store.write("maya", "ci\x00ty", "Leeds")  # a key is folded to [a-z0-9_]: the NUL goes
    assert written is not None and written.key == "city"
    store.delete_user("maya")
    with pytest.raises(UserError, match="NUL"):
        store.search("ma\x00ya", "hello")
    with pytest.raises(UserError, match="NUL"):
        store.delete_episode("maya", "n\x001")
    with pytest.raises(UserError, match="NUL"):
        store.episodes("maya", tenant="t\x00")
    assert store.episodes("maya") == [] and store.facts("maya") == []


def test_odd_times(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    seed(store, "maya")
    # A future as_of is "now": everything said so far, the facts true now.
    future = store.search("maya", f"moved to {MARK}", as_of="2999-01-01", abstain=False)
    assert {h.id for h in future if h.kind == "episode"} >= {"a1"}
    # An empty range (before earlier than after) finds nothing, on both kinds.
    assert store.search("maya", f"moved to {MARK}", before="2026-01-01", after="2026-06-01") == []
    assert store.retrieve("maya", MARK, before="2026-01-01", after="2026-06-01") == []
    assert store.episodes("maya", before="2026-01-01", after="2026-06-01") == []
    # Naive datetimes are UTC, the same as aware ones.
    naive = store.search("maya", "garden", before=datetime(2026, 3, 1, 10, 30), abstain=False)
    aware = store.search("maya", "garden", before=datetime(2026, 3, 1, 10, 30, tzinfo=UTC), abstain=False)
    assert [h.id for h in naive] == [h.id for h in aware]
    # The ends of the calendar: nothing before year 1, no crash.
    for edge in (date.min, datetime.min, datetime.min.replace(tzinfo=UTC)):
        assert store.search("maya", "garden", before=edge) == []
        assert store.retrieve("maya", "garden", before=edge) == []
    assert isinstance(store.search("maya", "garden", as_of=datetime.max, abstain=False), list)
    behind = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(UserError, match=r"as_of .* out of range"):
        store.search("maya", "garden", as_of=behind)
    with pytest.raises(UserError, match="before 'last tuesday' is not an ISO-8601"):
        store.search("maya", "garden", before="last tuesday")
    with pytest.raises(UserError, match="after"):
        store.episodes("maya", after="soon")
    # A negative limit means nothing on both backends (SQLite would read LIMIT -1 as "all").
    assert store.episodes("maya", limit=-1) == [] and store.episodes("maya", limit=0) == []
    assert len(store.episodes("maya", limit=1)) == 1


def test_abstention_on_an_empty_store_and_on_other_peoples_memory(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    assert store.search("nobody", "what is my blood type?") == []
    assert store.search("nobody", "what is my blood type?", abstain=False) == []
    assert store.retrieve("nobody", "blood type") == []
    assert store.search("nobody", "garden", as_of="2026-01-01", before="2026-02-01", after="2025-01-01") == []
    seed(store, "maya")
    assert store.search("nobody", f"moved to {MARK}", abstain=False) == []
    assert store.search("maya", "what is my blood type?") == [], "abstains on the unanswerable"


# -- a replay after a forget ----------------------------------------------------------------------------


def test_a_replayed_conversation_does_not_bring_a_forgotten_episode_back(
    make_store: StoreFactory, clock: Clock
) -> None:
    from maitre.memory import ConversationTurn

    store = make_store(clock=clock)
    said = [
        ConversationTurn(role="user", content=f"I live in {MARK} now.", id="m1"),
        ConversationTurn(role="user", content="The bins go out on Tuesday.", id="m2"),
    ]
    store.remember("maya", said, episodes=True)
    report = store.delete("maya", "city", MARK)
    assert report.facts == 1 and report.episodes == 1
    outcomes = store.remember("maya", said, episodes=True)  # the same conversation, replayed
    assert [str(o.action) for o in outcomes] == ["blocked"]
    assert [e.id for e in store.episodes("maya")] == ["m2"]
    for hit in store.search("maya", f"where do I live {MARK}", abstain=False):
        assert MARK not in (hit.episode.text if hit.episode else hit.fact.value)  # type: ignore[union-attr]
    # The same words under another id (an import that mints new ids) stay forgotten too...
    assert store.add_episodes("maya", [ep("other-id", f"I live in {MARK} now.")]) == []
    # ... while something new is stored as usual, and one episode forgotten alone stays forgotten.
    assert [e.id for e in store.add_episodes("maya", [ep("m3", "We got a cat.")])] == ["m3"]
    store.delete_episode("maya", "m3", facts=False)
    assert store.add_episodes("maya", [ep("m3", "We got a cat.")]) == []
    store.delete_user("maya")
    assert store.add_episodes("maya", [ep("m2", "The bins go out on Tuesday.")]) == []
    assert [e.id for e in store.add_episodes("maya", [ep("m4", "Hello again.")])] == ["m4"]
    assert store.add_episodes("tom", [ep("m1", f"I live in {MARK} now.")]), "another user's turn is his own"


def test_snapshots_of_a_replaced_database_are_not_read(
    tmp_path: Path, clock: Clock, small_snapshots: None
) -> None:
    first = _sqlite(tmp_path, clock)
    seed(first, "maya")
    first.search("maya", "garden", abstain=False)
    first.retrieve("maya", "city")
    assert _snap_files(tmp_path)
    first.close()
    for suffix in ("", "-wal", "-shm"):  # the database is replaced; its .vectors/ directory stays
        Path(f"{tmp_path / 'm.db'}{suffix}").unlink(missing_ok=True)
    second = _sqlite(tmp_path, clock)
    second.add_episodes("maya", [ep("c1", "I like tea with honey."), ep("c2", "Biscuits are fine.")])
    second.write("maya", "drink", "tea", valid_from="2026-02-01")  # version 3, as before
    hits = second.search("maya", "tea with honey", abstain=False)
    assert hits and hits[0].id == "c1"
    assert hits[0].similarity is not None and hits[0].similarity > 0.5, "ranked by its own vector"
    facts = second.retrieve("maya", "drink tea")
    assert facts and facts[0].similarity is not None and facts[0].similarity > 0.3


def test_a_temporary_snapshot_left_by_a_killed_writer_is_removed(
    tmp_path: Path, clock: Clock, small_snapshots: None
) -> None:
    store = _sqlite(tmp_path, clock)
    seed(store, "maya")
    store.search("maya", "garden", abstain=False)
    directory = tmp_path / "m.db.vectors"
    left = directory / "0123abcd.tmp"  # a writer killed between write and rename
    left.write_bytes(next(iter(_snap_files(tmp_path))).read_bytes())
    os.utime(left, (1_000_000_000, 1_000_000_000))
    fresh = directory / "fresh.tmp"  # a writer at work right now: left alone
    fresh.write_bytes(b"x")
    store.delete("maya", "city", MARK)
    assert not left.exists() and fresh.exists()
    left.write_bytes(b"y")
    os.utime(left, (1_000_000_000, 1_000_000_000))
    _sqlite(tmp_path, clock).search("maya", "garden", abstain=False)  # a new process sweeps too
    assert not left.exists()


def test_fusion_settings_that_would_divide_by_zero_or_invert_rankings_are_refused() -> None:
    from maitre.memory import Fusion

    for bad in ({"k": 0.0}, {"k": -1.0}, {"lexical": -0.1}, {"facts": float("nan")}, {"candidates": 0}):
        with pytest.raises(ValueError, match="Fusion"):
            Fusion(**bad)
    assert Fusion(lexical=0.0, window=0.0).dense == 0.5


def test_episodes_refuse_a_nul_session(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    with pytest.raises(UserError, match="NUL"):
        store.episodes("maya", session="s\x001")


def _all_rows_text(store: MemoryStore) -> str:
    """Every row of every table of the store's database, as text."""
    out: list[str] = []
    with store.backend.read() as db:
        if store.backend.kind == "sqlite":
            names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for name in names:
                out += [repr(r) for r in db.execute(f'SELECT * FROM "{name}"')]
        else:
            schema = store.backend.schema  # type: ignore[attr-defined]
            names = [
                r[0]
                for r in db.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (schema,)
                )
            ]
            for name in names:
                out += [str(r[0]) for r in db.execute(f'SELECT t::text FROM "{schema}"."{name}" t')]
    return "\n".join(out)


def test_a_forget_in_one_process_reaches_another_process_cache_and_every_table(
    make_store: StoreFactory, clock: Clock
) -> None:
    reader = make_store(clock=clock, vector_dir="")
    writer = make_store(clock=clock, vector_dir="")
    seed(writer, "maya")
    assert any(h.id == "a1" for h in reader.search("maya", f"moved to {MARK}", abstain=False))
    cached = {int(s) for s in reader._cache.rows(scope(reader, "maya", "e"))[1].tolist()}  # type: ignore[index]
    writer.delete("maya", "city", MARK)
    for hit in reader.search("maya", f"moved to {MARK}", k=20, abstain=False):
        assert MARK not in (hit.episode.text if hit.episode else hit.fact.value)  # type: ignore[union-attr]
    left = reader._cache.rows(scope(reader, "maya", "e"))
    live = {int(s) for s in (left[1].tolist() if left else [])}
    assert len(live) < len(cached), "the reader's cache dropped the forgotten turns' vectors"
    assert writer.wait_erased(20.0)
    assert MARK.lower() not in _all_rows_text(writer).lower()
