"""Conflict rules on both backends: recency, stated beats inferred, replays, idempotency, multi-values."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from maitre.embeddings import HashingEmbedder
from maitre.exceptions import UserError
from maitre.memory import Candidate, MemoryPolicy, MemoryStore, Origin, Status, WriteAction


def test_newest_valid_time_wins_and_loser_is_kept(store: MemoryStore) -> None:
    store.write("u1", "city", "Pune", "2026-01-05", "msg-1")
    out = store.apply("u1", Candidate(key="city", value="Bengaluru", valid_from="2026-03-20", source="msg-9"))
    assert out.action == WriteAction.INSERTED and out.current is not None and out.current.value == "Bengaluru"
    old, new = store.history("u1", "city")
    assert old.status == Status.SUPERSEDED and old.superseded_by == new.id and old.superseded_at is not None
    assert new.status == Status.CURRENT and new.source == "msg-9"


def test_replayed_older_fact_is_stored_already_superseded(store: MemoryStore) -> None:
    store.write("u1", "city", "Pune", "2026-01-05", "user message")
    store.write("u1", "city", "Bengaluru", "2026-03-20", "user message")
    # A batch import replays an older fact the store never saw: it is kept for history, already superseded.
    out = store.apply(
        "u1", Candidate(key="city", value="Mumbai", valid_from="2025-06-01", source="import:crm")
    )
    assert out.action == WriteAction.STORED_SUPERSEDED
    assert out.stored is not None and out.stored.status == Status.SUPERSEDED
    assert out.current is not None and out.current.value == "Bengaluru"
    assert store.current("u1", "city").value == "Bengaluru"  # type: ignore[union-attr]
    assert [h.value for h in store.retrieve("u1", "mumbai city")] == ["Bengaluru"]
    # The exact January fact replayed from another source is a duplicate: nothing changes.
    dup = store.apply(
        "u1", Candidate(key="city", value="pune", valid_from="2026-01-05", source="replayed import")
    )
    assert dup.action == WriteAction.DUPLICATE and dup.current.value == "Bengaluru"  # type: ignore[union-attr]
    assert len(store.history("u1", "city")) == 3


def test_duplicate_writes_are_idempotent(store: MemoryStore) -> None:
    a = store.apply(
        "u1", Candidate(key="diet", value="Vegetarian food only.", valid_from="2026-01-09", source="m1")
    )
    b = store.apply(
        "u1", Candidate(key="Diet", value="vegetarian  food only", valid_from="2026-01-09", source="m1")
    )
    assert a.action == WriteAction.INSERTED and b.action == WriteAction.DUPLICATE
    assert b.current is not None and b.current.id == a.current.id  # type: ignore[union-attr]
    assert len(store.history("u1", "diet")) == 1
    assert len(store.retrieve("u1", "vegetarian")) == 1


def test_restatement_is_a_confirmation_not_a_change(store: MemoryStore) -> None:
    store.write("u1", "city", "Bengaluru", "2026-03-20", "m1")
    out = store.apply("u1", Candidate(key="city", value="Bengaluru", valid_from="2026-05-02", source="m7"))
    assert out.action == WriteAction.CONFIRMED and out.current.value == "Bengaluru"  # type: ignore[union-attr]
    assert [h.value for h in store.retrieve("u1", "city")] == ["Bengaluru"], "no duplicate in retrieval"


def test_stated_beats_inferred_in_either_order(make_store, clock) -> None:  # type: ignore[no-untyped-def]
    store = make_store(clock=clock)
    store.write("u1", "city", "Bengaluru", "2026-03-20", "m1")  # the user said it
    guess = store.apply(
        "u1",
        Candidate(
            key="city", value="Mumbai", valid_from="2026-04-10", source="tool:geo", origin=Origin.INFERRED
        ),
    )
    assert guess.action == WriteAction.STORED_SUPERSEDED, "a newer guess never overwrites what the user said"
    assert store.current("u1", "city").value == "Bengaluru"  # type: ignore[union-attr]

    # Reverse arrival order for another user: the older stated fact still wins over the newer inference.
    store.write("u2", "city", "Mumbai", "2026-04-10", "tool:geo", origin="inferred")
    late = store.apply("u2", Candidate(key="city", value="Bengaluru", valid_from="2026-03-20", source="m1"))
    assert late.action == WriteAction.INSERTED
    assert store.current("u2", "city").value == "Bengaluru"  # type: ignore[union-attr]
    # Among inferred facts recency decides; a later statement replaces everything.
    store.write("u3", "city", "Delhi", "2026-01-01", "tool:geo", origin="inferred")
    assert store.write("u3", "city", "Goa", "2026-02-01", "tool:geo", origin="inferred").value == "Goa"  # type: ignore[union-attr]
    assert store.write("u3", "city", "Pune", "2026-03-01", "m3").value == "Pune"  # type: ignore[union-attr]
    assert store.write("u3", "city", "Agra", "2026-04-01", "tool:geo", origin="inferred").value == "Pune"  # type: ignore[union-attr]


def test_multi_valued_keys_hold_several_values(store: MemoryStore) -> None:
    store.write("u1", "allergy", "peanuts", "2026-01-01", "m1")
    store.write("u1", "allergy", "shellfish", "2026-02-01", "m2")
    store.write("u1", "allergy", "Peanuts", "2026-02-01", "m3")  # a confirmation of one value
    assert sorted(f.value for f in store.values("u1", "allergy")) == ["Peanuts", "shellfish"]
    with pytest.raises(UserError, match="values"):
        store.current("u1", "allergy")
    out = store.retract("u1", "allergy", "shellfish", "2026-06-01", "m4")
    assert out.current is None
    assert [f.value for f in store.values("u1", "allergy")] == ["Peanuts"]
    # An older replay of the retracted value cannot bring it back.
    assert store.write("u1", "allergy", "shellfish", "2026-02-15", "import") is None
    assert [f.value for f in store.values("u1", "allergy")] == ["Peanuts"]
    assert "peanuts" in store.profile("u1").text.lower() and "shellfish" not in store.profile("u1").text


def test_retraction_of_single_valued_key(store: MemoryStore) -> None:
    store.write("u1", "diet", "vegetarian", "2026-01-01", "m1")
    # Retracting a value that is not the current one changes nothing.
    assert store.retract("u1", "diet", "vegan", "2026-02-01", "m2").action == WriteAction.IGNORED
    out = store.retract("u1", "diet", "vegetarian", "2026-03-01", "m3")
    assert out.action == WriteAction.INSERTED and out.current is None
    assert store.current("u1", "diet") is None and store.retrieve("u1", "vegetarian diet") == []
    assert store.write("u1", "diet", "vegetarian", "2026-01-01", "replay") is None
    assert store.write("u1", "diet", "vegan", "2026-04-01", "m4").value == "vegan"  # type: ignore[union-attr]


def test_input_validation_and_secrets(store: MemoryStore) -> None:
    with pytest.raises(UserError, match="secret"):
        store.write("u1", "card_number", "4111 1111 1111 1111")
    with pytest.raises(UserError, match="secret"):
        store.write("u1", "note", "my card is 4111-1111-1111-1111 exp 09/28")
    with pytest.raises(UserError, match="secret"):
        store.write("u1", "password", "hunter2")
    with pytest.raises(UserError, match="key"):
        store.write("u1", "9lives", "x")
    with pytest.raises(UserError, match="empty"):
        store.write("u1", "city", "   ")
    with pytest.raises(UserError, match="future"):
        store.write("u1", "city", "Pune", "2030-01-01")
    assert store.write("u1", "Favourite Colour", "teal").key == "favourite_colour"  # type: ignore[union-attr]
    assert store.write("u1", "zip_code", "560001") is not None  # not a secret
    assert store.users() == ["u1"]


def test_tenants_are_isolated(store: MemoryStore) -> None:
    store.write("u1", "city", "Pune", "2026-01-05", "m", tenant="acme")
    store.write("u1", "city", "Chennai", "2026-01-05", "m", tenant="globex")
    assert store.current("u1", "city", tenant="acme").value == "Pune"  # type: ignore[union-attr]
    assert [h.value for h in store.retrieve("u1", "city", tenant="globex")] == ["Chennai"]
    assert store.current("u1", "city") is None
    store.delete("u1", "city", tenant="acme")
    assert store.current("u1", "city", tenant="globex").value == "Chennai"  # type: ignore[union-attr]


# Writes as (value, month, origin). Unless two different values share (origin, valid_from) -- a true
# tie, broken by arrival (recorded_at) -- every arrival order must converge on the same current fact,
# and it is the maximum of (origin, valid_from) over everything written.
_WRITES = st.lists(
    st.tuples(
        st.sampled_from(["Pune", "Bengaluru", "Mumbai", "Delhi"]),
        st.integers(1, 9),
        st.sampled_from(["stated", "inferred"]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=25, deadline=None)
@given(writes=_WRITES, data=st.data())
def test_outcome_does_not_depend_on_arrival_order(writes, data) -> None:  # type: ignore[no-untyped-def]
    ties = {(m, o): {v for v, m2, o2 in writes if (m2, o2) == (m, o)} for _, m, o in writes}
    assume(all(len(values) == 1 for values in ties.values()))
    order = data.draw(st.permutations(range(len(writes))))
    results = []
    now = datetime(2026, 11, 1, tzinfo=UTC)
    for perm in (range(len(writes)), order):
        store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder(32), clock=lambda: now)
        for i in perm:
            value, month, origin = writes[i]
            store.write("u", "city", value, f"2026-{month:02d}-01", f"m{i}", origin=origin)
        cur = store.current("u", "city")
        assert cur is not None
        results.append((cur.value, cur.valid_from.month, str(cur.origin)))
        store.close()
    assert results[0] == results[1]
    best = max(writes, key=lambda w: (w[2] == "stated", w[1]))
    assert results[0] == best


def test_profile_is_deterministic_and_capped(make_store, clock) -> None:  # type: ignore[no-untyped-def]
    store = make_store(clock=clock, policy=MemoryPolicy(profile_max_tokens=12))
    store.write("u1", "diet", "vegetarian food only", "2026-01-09", "m")
    store.write("u1", "city", "Pune", "2026-01-05", "m")
    store.write("u1", "name", "Asha", "2026-01-01", "m")
    store.write("u1", "favourite_colour", "teal", "2026-01-01", "m")
    profile = store.profile("u1")
    assert profile.text.splitlines()[0] == "name: Asha"
    assert "favourite" not in profile.text, "only designated keys"
    assert profile.tokens <= 12 and "diet" not in profile.text, "the token cap cuts whole lines"
    assert store.profile("u1").text == profile.text
    assert {f.key for f in profile.facts} >= {"name", "city"}
    assert store.profile("nobody").text == ""


def test_combinations_of_arrival_order_for_seed_example(make_store, clock) -> None:  # type: ignore[no-untyped-def]
    writes = [
        ("Pune", "2026-01-05", "user message"),
        ("Bengaluru", "2026-03-20", "user message"),
        ("Pune", "2026-01-05", "replayed import"),
    ]
    for n, perm in enumerate(itertools.permutations(writes)):
        store = make_store(clock=clock)
        for value, when, source in perm:
            store.write(f"user{n}", "city", value, when, source)
        assert store.current(f"user{n}", "city").value == "Bengaluru"  # type: ignore[union-attr]
