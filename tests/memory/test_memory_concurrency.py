"""Concurrent writers: separate connections (threads) and separate processes on one database.

Each writer has its own store object, so its own connection, as separate application processes
would. Users must never see each other's facts, and racing writes to one slot must converge on a
single current fact: the maximum of the conflict order.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore, Status

StoreFactory = Callable[..., MemoryStore]


def _writer(store: MemoryStore, user: str, n: int) -> None:
    for i in range(n):
        store.write(user, f"note_{i % 10}", f"{user} value {i}", f"2026-01-{1 + i % 28:02d}", f"{user}-m{i}")
        if i % 5 == 0:
            store.retrieve(user, f"note {i % 10}")


def test_cross_user_isolation_under_concurrent_writers(make_store: StoreFactory) -> None:
    stores = [make_store() for _ in range(6)]
    users = [f"user{i}" for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(lambda su: _writer(su[0], su[1], 30), zip(stores, users, strict=True)))
    check = stores[0]
    for user in users:
        facts = check.facts(user, include_history=True)
        assert facts and all(f.user == user and f.value.startswith(f"{user} ") for f in facts)
        current = check.facts(user)
        assert len(current) == 10 and len({f.key for f in current}) == 10, "one current fact per key"
        hits = check.retrieve(user, "note 3 value")
        assert hits and all(h.fact.user == user for h in hits)


def test_racing_writes_to_one_slot_converge(make_store: StoreFactory) -> None:
    stores = [make_store() for _ in range(4)]
    days = list(range(1, 25))

    def race(idx: int) -> None:
        for day in days[idx::4]:
            stores[idx].write("shared", "city", f"City{day}", f"2026-02-{day:02d}", f"w{idx}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(race, range(4)))
    history = stores[0].history("shared", "city")
    assert len(history) == len(days)
    current = [f for f in history if f.status == Status.CURRENT]
    assert [f.value for f in current] == ["City24"]
    assert stores[1].current("shared", "city").value == "City24"  # type: ignore[union-attr]
    assert [h.value for h in stores[2].retrieve("shared", "city")] == ["City24"]
    profile = stores[3].profile("shared").text
    assert profile == "city: City24"


def _process_writer(path: str, user: str) -> None:
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder())
    try:
        _writer(store, user, 25)
        for day in range(1, 8):
            store.write(
                "shared", "diet", f"{user}-diet-{day}", f"2026-03-{day:02d}T00:00:0{int(user[-1])}", user
            )
    finally:
        store.close()


def test_sqlite_writers_in_separate_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    MemoryStore.sqlite(path, embedder=HashingEmbedder()).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_writer, args=(path, f"proc{i}")) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder())
    for i in range(3):
        facts = store.facts(f"proc{i}", include_history=True)
        assert len(facts) == 25 and all(f.value.startswith(f"proc{i} ") for f in facts)
    # Day 7 at second 2 is the maximum of the conflict order, whoever wrote last.
    assert store.current("shared", "diet").value == "proc2-diet-7"  # type: ignore[union-attr]
    assert len([f for f in store.history("shared", "diet") if f.status == Status.CURRENT]) == 1
    store.close()
