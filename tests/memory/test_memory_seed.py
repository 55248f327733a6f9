"""Seed 000's memory scenario, exactly, on both backends, with the real offline embedder."""

from __future__ import annotations

from collections.abc import Callable

from maitre.embeddings import default_embedder
from maitre.memory import MemoryStore, Status

StoreFactory = Callable[..., MemoryStore]


def test_seed_000_scenario(make_store: StoreFactory) -> None:
    mem = make_store(embedder=default_embedder())
    mem.write("u1", "city", "Pune", "2026-01-05", "user message")
    mem.write("u1", "diet", "vegetarian food only", "2026-01-09", "user message")
    mem.write("u2", "city", "Chennai", "2026-02-01", "user message")

    first = mem.retrieve("u1", "which city should the dentist be in")
    assert [(h.key, h.value) for h in first][:1] == [("city", "Pune")]
    assert all(h.fact.user == "u1" for h in first)

    current = mem.write("u1", "city", "Bengaluru", "2026-03-20", "user message")
    assert current is not None and current.value == "Bengaluru"

    stale = mem.write("u1", "city", "Pune", "2026-01-05", "replayed import")
    assert stale is not None and stale.value == "Bengaluru", "the replayed January fact must not come back"

    again = mem.retrieve("u1", "which city should the dentist be in")
    assert again[0].key == "city" and again[0].value == "Bengaluru"
    assert "Pune" not in [h.value for h in again], "retrieval sees current facts only"
    assert str(again[0].valid_from.date()) == "2026-03-20" and again[0].source == "user message"

    table = mem.retrieve("u1", "book a table, vegetarian food, in my city")
    assert {(h.key, h.value) for h in table[:2]} == {("diet", "vegetarian food only"), ("city", "Bengaluru")}

    assert mem.retrieve("u1", "city")[0].value == "Bengaluru"
    history = mem.history("u1", "city")
    assert [(f.value, f.status) for f in history] == [
        ("Pune", Status.SUPERSEDED),
        ("Bengaluru", Status.CURRENT),
    ]
    assert history[0].superseded_by == history[1].id

    report = mem.delete("u1", "city")
    assert report.facts == 2
    assert mem.retrieve("u1", "which city should the dentist be in") == []
    assert mem.retrieve("u1", "city") == []
    assert mem.history("u1", "city") == []

    other = mem.retrieve("u2", "city")
    assert [(h.key, h.value) for h in other] == [("city", "Chennai")], "other users untouched"
    assert mem.current("u1", "diet").value == "vegetarian food only"  # type: ignore[union-attr]
