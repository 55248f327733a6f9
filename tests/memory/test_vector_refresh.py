"""Several processes on one file (issue 16 item 6): a store that another store wrote behind reads
only the changed vectors (the vector log), and a fresh store starts from a memory-mapped snapshot;
a forget reaches the snapshot's bytes too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore
from maitre.memory import retrieval as retrieval_module
from maitre.memory.model import fact_text
from maitre.memory.vectors import VectorSnapshots, parse_log

from .conftest import Clock, StoreFactory


class Counting:
    """Counts full loads (every BLOB of a user) and the rows read by incremental refreshes."""

    def __init__(self, store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = 0
        self.rows = 0
        backend = store.backend
        original_load = backend.load_vectors
        original_by_seq = retrieval_module._vectors_by_seq

        def load(*args: Any, **kwargs: Any) -> Any:
            self.full += 1
            return original_load(*args, **kwargs)

        def by_seq(*args: Any, **kwargs: Any) -> Any:
            found = original_by_seq(*args, **kwargs)
            self.rows += len(found)
            return found

        monkeypatch.setattr(backend, "load_vectors", load)
        monkeypatch.setattr(retrieval_module, "_vectors_by_seq", by_seq)


def fill(store: MemoryStore, n: int) -> None:
    from maitre.memory import Candidate

    store.apply_many(
        "u1",
        [Candidate(key=f"note_{i}", value=f"value number {i}", valid_from="2026-01-01") for i in range(n)],
    )


def test_a_write_by_another_store_is_read_incrementally(
    make_store: StoreFactory, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = make_store(clock=clock, vector_dir="")
    writer = make_store(clock=clock, vector_dir="")  # another process: its own cache
    fill(writer, 40)
    assert reader.retrieve("u1", "value number 7")[0].value == "value number 7"  # a full load, once
    count = Counting(reader, monkeypatch)
    writer.write("u1", "city", "Zorbluxville", "2026-02-01", "chat")
    writer.write("u1", "note_3", "replaced value", "2026-03-01", "chat")  # supersedes note_3
    hits = reader.retrieve("u1", "Zorbluxville")
    assert hits[0].value == "Zorbluxville"
    assert count.full == 0, "no full reload of the user's matrix"
    assert count.rows == 2, "only the two rows added since the last read"
    assert all(h.value != "value number 3" for h in reader.retrieve("u1", "value number 3", k=40))
    writer.delete("u1", "city")
    assert all(h.value != "Zorbluxville" for h in reader.retrieve("u1", "Zorbluxville"))
    assert count.full == 0


def test_parse_log_nets_changes_and_refuses_gaps() -> None:
    rows = [(5, "f1 f2 e9", ""), (6, "f3", "f1"), (7, "", "f3 e9")]
    assert parse_log(rows, 4, 7, "f") == ([2], [])
    assert parse_log(rows, 4, 7, "e") == ([], [])
    assert parse_log(rows[1:], 4, 7, "f") is None, "a missing version (pruned log) means reload"
    assert parse_log([(5, "*", "")], 4, 5, "f") is None, "a reindex resets"


def test_a_fresh_store_starts_from_the_snapshot_without_reading_blobs(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "memory.db"
    monkeypatch.setattr(retrieval_module, "SNAPSHOT_MIN_ROWS", 16)
    first = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    fill(first, 40)
    first.retrieve("u1", "value number 5")  # full load, writes the snapshot
    first.close()
    assert list((tmp_path / "memory.db.vectors").glob("*.vec")), "a snapshot file beside the database"
    writer = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    writer.write("u1", "city", "Zorbluxville", "2026-02-01", "chat")  # after the snapshot
    fresh = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    count = Counting(fresh, monkeypatch)
    assert fresh.retrieve("u1", "Zorbluxville")[0].value == "Zorbluxville"
    assert fresh.retrieve("u1", "value number 5")[0].value == "value number 5"
    assert count.full == 0 and count.rows == 1, "snapshot + one row from the log"
    fresh.close()
    writer.close()


def test_a_forget_zeroes_the_forgotten_vectors_in_the_snapshot(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "memory.db"
    monkeypatch.setattr(retrieval_module, "SNAPSHOT_MIN_ROWS", 16)
    embedder = HashingEmbedder()
    store = MemoryStore.sqlite(path, embedder=embedder, clock=clock)
    fill(store, 30)
    store.write("u1", "city", "Zorbluxville", "2026-02-01", "chat")
    store.retrieve("u1", "warm")  # writes the snapshot, with the city's vector
    vec = embedder.embed([fact_text("city", "Zorbluxville")])[0].astype("<f4").tobytes()
    snapshot = next((tmp_path / "memory.db.vectors").glob("*.vec"))
    assert vec in snapshot.read_bytes()
    store.delete("u1", "city")
    assert vec not in snapshot.read_bytes(), "the forgotten fact's vector is overwritten in place"
    other = embedder.embed([fact_text("note_1", "value number 1")])[0].astype("<f4").tobytes()
    assert other in snapshot.read_bytes(), "the other rows stay"
    store.close()


def test_snapshots_round_trip_and_ignore_other_dimensions(tmp_path: Path) -> None:
    snaps = VectorSnapshots(tmp_path)
    seqs = np.array([3, 9, 12], dtype=np.int64)
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    snaps.save("scope", 7, seqs, matrix)
    loaded = snaps.load("scope", 4)
    assert loaded is not None
    version, got_seqs, got = loaded
    assert version == 7 and got_seqs.tolist() == [3, 9, 12]
    assert np.array_equal(np.asarray(got), matrix) and isinstance(got, np.memmap)
    assert snaps.load("scope", 8) is None, "a snapshot of another embedder's dimension is ignored"
    assert snaps.zero("scope", [9]) == 1
    reloaded = snaps.load("scope", 4)
    assert reloaded is not None and not np.asarray(reloaded[2])[1].any()
    assert snaps.load("missing", 4) is None


def test_a_write_by_another_process_is_read_incrementally(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    path = tmp_path / "memory.db"
    reader = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock, vector_dir="")
    fill(reader, 30)
    assert reader.retrieve("u1", "value number 4")[0].value == "value number 4"
    count = Counting(reader, monkeypatch)
    script = (
        "import sys; from maitre.embeddings import HashingEmbedder; from maitre.memory import MemoryStore; "
        "s = MemoryStore.sqlite(sys.argv[1], embedder=HashingEmbedder(), vector_dir=''); "
        "s.write('u1', 'city', 'Zorbluxville', '2026-02-01', 'other process'); s.close()"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=60)
    assert reader.retrieve("u1", "Zorbluxville")[0].value == "Zorbluxville"
    assert (count.full, count.rows) == (0, 1)
    reader.close()
