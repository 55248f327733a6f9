"""Fusion over episodes and facts (issue 16 item 3): weighted rank fusion, abstention, time.

The recall test runs the shipped weights on the development split of our evaluation set with the
real offline embedder: the fusion must not lose to either of its rankers there (the held-out split
is reported by `make bench`, never tested against, so nothing is tuned on it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from maitre.embeddings import HashingEmbedder, default_embedder
from maitre.memory import MemoryStore
from maitre.memory.evaluation import evaluate, ingest, load_conversations, only_dense, only_lexical
from maitre.memory.search import Candidates, Fusion, answerable, coverage, fuse_weighted

from .conftest import Clock, StoreFactory

DEV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "memory" / "dev.jsonl"


def test_weighted_fusion_is_rank_based_deterministic_and_its_ablations_are_pure() -> None:
    cands = Candidates(lexical=[1, 2, 3], dense=[(3, 0.9), (4, 0.8)], window=[(4, 0.85)], texts={})
    fusion = Fusion(lexical=0.5, dense=0.3, window=0.2, k=5)
    fused = fuse_weighted([("episode", cands, 1.0)], fusion=fusion, k=10)
    assert [seq for _, seq, *_ in fused] == [3, 1, 4, 2]
    assert fused == fuse_weighted([("episode", cands, 1.0)], fusion=fusion, k=10)
    lex = fuse_weighted([("episode", cands, 1.0)], fusion=replace(fusion, dense=0.0, window=0.0), k=10)
    assert [seq for _, seq, *_ in lex] == [1, 2, 3], "a ranker weighted 0 adds no candidates"
    # Facts and episodes compete in one list; the source weight scales a whole source.
    facts = Candidates(lexical=[7], dense=[(7, 0.95)], texts={})
    mixed = fuse_weighted([("episode", cands, 1.0), ("fact", facts, 2.0)], fusion=fusion, k=2)
    assert mixed[0][:2] == ("fact", 7)


def test_abstention_needs_a_close_vector_or_most_of_the_query_words() -> None:
    fusion = Fusion(min_cosine=0.5, min_coverage=0.6)
    weak = Candidates(lexical=[1], dense=[(1, 0.2)], texts={1: "the weather is nice"})
    assert not answerable(["blood", "type"], [weak], fusion)
    close = Candidates(lexical=[], dense=[(1, 0.7)], texts={})
    assert answerable(["blood", "type"], [close], fusion)
    worded = Candidates(lexical=[1], dense=[(1, 0.1)], texts={1: "My blood types were tested"})
    assert coverage(["blood", "type"], "My blood types were tested") == 1.0
    assert answerable(["blood", "type"], [worded], fusion)


def test_temporal_retrieve_returns_the_fact_true_then(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    store.write("u1", "city", "Pune", "2026-01-05", "chat")
    store.write("u1", "city", "Bengaluru", "2026-04-01", "chat")
    store.write("u1", "employer", "Infosys", "2026-01-05", "chat")
    assert [h.value for h in store.retrieve("u1", "which city do I live in", k=1)] == ["Bengaluru"]
    assert [h.value for h in store.retrieve("u1", "which city do I live in", k=1, as_of="2026-02-01")] == [
        "Pune"
    ]
    assert [h.value for h in store.retrieve("u1", "city live", k=1, before="2026-04-01")] == ["Pune"]
    assert [h.value for h in store.retrieve("u1", "city live", k=1, valid_at="2026-06-01")] == ["Bengaluru"]
    after = store.retrieve("u1", "city employer", k=5, after="2026-03-01")
    assert [h.value for h in after] == ["Bengaluru"], "only facts that became true after the moment"
    assert store.retrieve("u1", "city", as_of="2025-01-01") == [], "nothing was true yet"
    hits = store.search("u1", "city live", before="2026-04-01", episodes=False, abstain=False)
    assert [h.fact.value for h in hits if h.fact is not None][:1] == ["Pune"]


def test_search_abstains_on_what_memory_does_not_hold(tmp_path: Path, clock: Clock) -> None:
    store = MemoryStore.sqlite(tmp_path / "m.db", embedder=default_embedder(), clock=clock)
    store.write("u1", "diet", "vegetarian", "2026-01-05", "chat")
    store.write("u1", "pet", "a dog called Bruno", "2026-01-05", "chat")
    assert store.search("u1", "what is my blood type?") == []
    found = store.search("u1", "what is the name of my dog?")
    assert found and found[0].fact is not None and found[0].fact.key == "pet"
    store.close()


@pytest.fixture(scope="module")
def dev_store() -> MemoryStore:
    store = MemoryStore.sqlite(":memory:", embedder=default_embedder())
    ingest(store, load_conversations(DEV))
    return store


def test_on_the_dev_split_fusion_beats_each_of_its_rankers(dev_store: MemoryStore) -> None:
    convs = load_conversations(DEV)
    fusion = dev_store.fusion
    assert 0 < fusion.lexical < 1 and 0 < fusion.dense < 1, "a real fusion, not one ranker with weight 1"
    fused = evaluate(dev_store, convs, fusion).recall
    lexical = evaluate(dev_store, convs, only_lexical(fusion)).recall
    dense = evaluate(dev_store, convs, only_dense(fusion)).recall
    assert fused >= max(lexical, dense), (fused, lexical, dense)
    assert fused >= 0.6, fused


def test_on_the_dev_split_abstention_is_better_than_never_abstaining(dev_store: MemoryStore) -> None:
    scores = evaluate(dev_store, load_conversations(DEV), dev_store.fusion, abstain=True)
    assert scores.abstain_recall >= 0.5, scores
    assert scores.answer_rate >= 0.8, scores


def test_a_words_only_embedder_still_searches_episodes(make_store: StoreFactory, clock: Clock) -> None:
    from maitre.embeddings import LexicalOnlyEmbedder
    from maitre.memory.model import Episode

    store = make_store(clock=clock, embedder=LexicalOnlyEmbedder())
    store.add_episodes(
        "u1", [Episode(id="a", tenant="", user="", speaker="u1", text="The boiler broke again", at=clock.now)]
    )
    hits = store.search("u1", "boiler broke", abstain=True)
    assert [h.id for h in hits] == ["a"]
    assert isinstance(HashingEmbedder().dim, int)


HELDOUT_SHA256 = "c42a6458a35c692d257eb6f44dbedc529af49a4cc2365fc2e345fd1d79a9067a"
"""The held-out split as committed (a69449f), before any retrieval work: it is never edited."""


def test_the_held_out_split_is_the_one_committed_before_retrieval_work() -> None:
    import hashlib

    heldout = DEV.with_name("heldout.jsonl")
    assert hashlib.sha256(heldout.read_bytes()).hexdigest() == HELDOUT_SHA256
    convs = load_conversations(heldout)
    assert sum(len(c.questions) for c in convs) == 86
    assert {q["kind"] for c in convs for q in c.questions} >= {
        "single",
        "multi",
        "update",
        "temporal",
        "unanswerable",
    }
