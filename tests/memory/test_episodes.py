"""Episodes beside facts (issue 16 item 3): stored with time, speaker and source, retrievable,
linked to the facts extracted from them, and forgotten with the same cascade (both backends)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from maitre.exceptions import UserError
from maitre.memory import Candidate, ConversationTurn, MemoryStore
from maitre.memory.model import Episode

from .conftest import Clock, StoreFactory


def at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def talk() -> list[Episode]:
    def ep(i: str, who: str, day: str, text: str) -> Episode:
        return Episode(
            id=i, tenant="", user="", speaker=who, text=text, at=at(day), session="s1", source="chat"
        )

    return [
        ep("e1", "Maya", "2026-01-10T10:00", "I still live on Brudenell Road, the boiler is broken again."),
        ep("e2", "Tom", "2026-01-10T10:01", "Classic landlord. How is Biscuit?"),
        ep("e3", "Maya", "2026-01-10T10:02", "Biscuit ate a tea towel, forty pounds at the vet."),
        ep("e4", "Maya", "2026-04-02T09:00", "We moved to Zorbluxville last month, there is a garden."),
    ]


def test_episodes_are_stored_with_time_speaker_and_source_and_replays_are_skipped(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    stored = store.add_episodes("maya", talk())
    assert [e.id for e in stored] == ["e1", "e2", "e3", "e4"]
    assert store.add_episodes("maya", talk()) == [], "a replayed id is not stored twice"
    listed = store.episodes("maya")
    assert [(e.id, e.speaker, e.session, e.source) for e in listed][:2] == [
        ("e1", "Maya", "s1", "chat"),
        ("e2", "Tom", "s1", "chat"),
    ]
    assert listed[0].at == at("2026-01-10T10:00")
    assert listed[1].context == listed[0].text, "each turn is indexed with the turn before it"
    assert [e.id for e in store.episodes("maya", before="2026-02-01")] == ["e1", "e2", "e3"]
    assert [e.id for e in store.episodes("maya", after="2026-02-01")] == ["e4"]
    assert store.episodes("someone-else") == []


def test_search_finds_episodes_and_respects_time(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    store.add_episodes("maya", talk())
    hits = store.search("maya", "What did the vet cost for the tea towel?", abstain=False)
    assert hits and hits[0].kind == "episode" and hits[0].id == "e3"
    assert hits[0].text.startswith("Maya: ")
    later = store.search("maya", "Zorbluxville garden", abstain=False)
    assert later[0].id == "e4"
    before = store.search("maya", "Zorbluxville garden", before="2026-03-01", abstain=False)
    assert "e4" not in {h.id for h in before}, "a turn said after `before` is not returned"
    as_of = store.search("maya", "boiler Brudenell", as_of="2026-01-10T10:00", abstain=False)
    assert {h.id for h in as_of} == {"e1"}, "as_of keeps what was said up to that moment"
    assert store.search("nobody", "boiler") == []


def test_future_and_broken_episodes_are_refused_before_anything_is_stored(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    future = Episode(id="f", tenant="", user="", speaker="Maya", text="hi", at=at("2027-06-01"))
    with pytest.raises(UserError, match="future"):
        store.add_episodes("maya", [*talk()[:1], future])
    with pytest.raises(UserError):
        store.add_episodes(
            "maya", [Episode(id="x", tenant="", user="", speaker="M", text="a\ud800b", at=at("2026-01-01"))]
        )
    assert store.episodes("maya") == []


def test_facts_extracted_from_a_message_are_linked_to_its_episode(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    turns = [
        ConversationTurn(role="user", id="m1", at=at("2026-02-01"), content="I live in Pune."),
        ConversationTurn(role="assistant", id="m2", at=at("2026-02-01T00:01"), content="Lovely city."),
    ]
    store.remember("asha", turns, episodes=True, session="chat-1")
    city = store.current("asha", "city")
    assert city is not None and city.value == "Pune"
    by_id = {e.id: e for e in store.episodes("asha")}
    assert by_id["m1"].fact_ids == [city.id]
    assert by_id["m2"].fact_ids == []
    # An explicit link (what ModelExtractor sets): Candidate.episode_id.
    store.add_episodes(
        "asha",
        [Episode(id="m3", tenant="", user="", speaker="user", text="I'm a nurse.", at=at("2026-03-01"))],
    )
    store.write_candidates(
        "asha", [Candidate(key="occupation", value="nurse", valid_from="2026-03-01", episode_id="m3")]
    )
    job = store.current("asha", "occupation")
    assert job is not None and {e.id: e for e in store.episodes("asha")}["m3"].fact_ids == [job.id]


def test_forgetting_a_fact_forgets_the_episodes_that_hold_it(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    store.add_episodes("maya", talk())
    store.write("maya", "city", "Zorbluxville", "2026-03-15", "message:e4")
    report = store.delete("maya", "city", "Zorbluxville")
    assert report.facts == 1 and report.episodes == 1
    assert [e.id for e in store.episodes("maya")] == ["e1", "e2", "e3"]
    assert all(
        "Zorblux" not in h.text for h in store.search("maya", "Zorbluxville garden moved", abstain=False)
    )


def test_forgetting_a_spelling_variant_still_reaches_the_episode(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    store.add_episodes(
        "maya",
        [
            Episode(
                id="z",
                tenant="",
                user="",
                speaker="Maya",
                text="We moved to Zorblux\u200bville!",
                at=at("2026-04-01"),
            )
        ],
    )
    store.write("maya", "city", "Zorbluxville", "2026-04-01", "chat")
    assert store.delete("maya", "city", "ZORBLUXVILLE").episodes == 1
    assert store.episodes("maya") == []


def test_deleting_an_episode_forgets_the_facts_extracted_from_it(
    make_store: StoreFactory, clock: Clock
) -> None:
    store = make_store(clock=clock)
    turns = [ConversationTurn(role="user", id="m1", at=at("2026-02-01"), content="I live in Pune.")]
    store.remember("asha", turns, episodes=True)
    report = store.delete_episode("asha", "m1")
    assert report.episodes == 1 and report.facts == 1 and report.tombstones == 1
    assert store.current("asha", "city") is None
    assert store.episodes("asha") == []
    # The tombstone holds: extraction cannot bring the fact back.
    store.remember("asha", turns)
    assert store.current("asha", "city") is None
    # Keeping the facts is a choice.
    store.remember(
        "asha",
        [ConversationTurn(role="user", id="m2", at=at("2026-02-02"), content="I'm vegetarian.")],
        episodes=True,
    )
    kept = store.delete_episode("asha", "m2", facts=False)
    assert kept.episodes == 1 and kept.facts == 0
    assert store.current("asha", "diet") is not None


def test_forgetting_a_user_forgets_every_episode(make_store: StoreFactory, clock: Clock) -> None:
    store = make_store(clock=clock)
    store.add_episodes("maya", talk())
    store.add_episodes("tom", talk()[:1])
    store.write("maya", "city", "Leeds", "2026-01-01", "chat")
    report = store.delete_user("maya")
    assert report.episodes == 4
    assert store.episodes("maya") == [] and store.search("maya", "boiler", abstain=False) == []
    assert [e.id for e in store.episodes("tom")] == ["e1"], "other users keep theirs"


def test_a_forgotten_episode_leaves_no_bytes_in_the_sqlite_file(tmp_path: Path, clock: Clock) -> None:
    from maitre.embeddings import HashingEmbedder

    path = tmp_path / "memory.db"
    store = MemoryStore.sqlite(path, embedder=HashingEmbedder(), clock=clock)
    marker = "Quixotrellaby"
    store.add_episodes(
        "maya",
        [
            Episode(
                id="a",
                tenant="",
                user="",
                speaker="Maya",
                text=f"My new street is {marker} Lane.",
                at=at("2026-01-01"),
                session="s",
            ),
            Episode(
                id="b",
                tenant="",
                user="",
                speaker="Tom",
                text="Nice, when do you move?",
                at=at("2026-01-01T00:01"),
                session="s",
            ),
        ],
    )
    store.write("maya", "street", f"{marker} Lane", "2026-01-01", "message:a")
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memory_episodes").fetchall()  # a reader holds an old snapshot
    report = store.delete("maya", "street", f"{marker} Lane")
    # "b" held the marker too: it was indexed with the turn before it as context.
    assert report.episodes == 2
    reader.execute("ROLLBACK")
    reader.close()
    assert store.wait_erased(10.0)
    store.close()
    for file in tmp_path.iterdir():
        if file.is_file():
            assert marker.encode() not in file.read_bytes(), file.name


def test_export_holds_the_episodes_and_reindex_re_embeds_them(make_store: StoreFactory, clock: Clock) -> None:
    from maitre.embeddings import LexicalOnlyEmbedder

    store = make_store(clock=clock)
    store.add_episodes("maya", talk())
    exported = store.export("maya")
    assert [e["id"] for e in exported["episodes"]] == ["e1", "e2", "e3", "e4"]
    assert exported["episodes"][0]["speaker"] == "Maya"
    other = make_store(clock=clock, embedder=LexicalOnlyEmbedder(dim=store.embedder_dim))
    other.reindex()
    assert other.search("maya", "boiler Brudenell", abstain=False)[0].id == "e1"
    store.reindex()
    assert store.search("maya", "tea towel vet", abstain=False)[0].id == "e3"
