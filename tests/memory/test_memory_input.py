"""Determinism and input (issue 16, item 5): ties, undecodable text, secrets by shape, future times.

- Two facts for one key with the same valid_from in one batch resolved at random (13/7 over 20 runs):
  now the later one in the batch wins, every time.
- A lone surrogate raised a raw `UnicodeEncodeError`: now a `UserError` at every door, and
  INVALID_ARGUMENTS through the memory tools.
- The secret filter refused `pin_code='560001'` (a postal code), `dress_code`, `discount_code`,
  `token_budget`: now decided by value shape and key meaning; real PINs and keys are still refused.
- `remember()` silently dropped a message whose clock was ahead: now a clear `UserError`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from maitre import Gate, Principal, ToolCall
from maitre.embeddings import HashingEmbedder
from maitre.exceptions import UserError
from maitre.memory import Candidate, ConversationTurn, MemoryStore, WriteAction, memory_toolbox

from .conftest import Clock

ASHA = Principal(user="asha", tenant="acme")
SURROGATE = "Pune\ud800"


# -- ties -------------------------------------------------------------------------------------------


def test_same_valid_from_in_one_batch_later_wins_every_time(store: MemoryStore) -> None:
    winners = []
    for run in range(20):
        user = f"u{run}"
        outcomes = store.apply_many(
            user,
            [
                Candidate(key="city", value="Pune", valid_from="2026-03-01", source="m1"),
                Candidate(key="city", value="Mysuru", valid_from="2026-03-01", source="m2"),
            ],
        )
        assert [o.action for o in outcomes] == [WriteAction.INSERTED, WriteAction.INSERTED]
        winners.append(store.current(user, "city").value)  # type: ignore[union-attr]
        # The answer "as of" that moment agrees with the current one (the same total order).
        assert store.current(user, "city", valid_at="2026-03-02").value == "Mysuru"  # type: ignore[union-attr]
    assert winners == ["Mysuru"] * 20


def test_the_order_in_the_batch_decides_not_the_value(store: MemoryStore) -> None:
    store.apply_many(
        "u1",
        [
            Candidate(key="city", value="Mysuru", valid_from="2026-03-01"),
            Candidate(key="city", value="Pune", valid_from="2026-03-01"),
        ],
    )
    assert store.current("u1", "city").value == "Pune"  # type: ignore[union-attr]
    assert [f.status for f in store.history("u1", "city")] == ["superseded", "current"]


def test_remember_later_message_wins_when_the_clock_ties(store: MemoryStore, clock: Clock) -> None:
    at = clock.now - timedelta(hours=1)
    turns = [
        ConversationTurn(role="user", id="m1", content="I live in Pune.", at=at),
        ConversationTurn(role="user", id="m2", content="I moved to Mysuru.", at=at),
    ]
    for run in range(5):
        store.remember(f"u{run}", turns)
        assert store.current(f"u{run}", "city").value == "Mysuru"  # type: ignore[union-attr]


# -- undecodable text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "door",
    [
        "write-value",
        "write-key",
        "write-user",
        "write-source",
        "retract",
        "apply",
        "delete-value",
        "delete-key",
        "retrieve",
        "current",
        "history",
        "facts",
        "summary",
        "remember",
    ],
)
def test_a_lone_surrogate_is_a_user_error_at_every_door(store: MemoryStore, door: str) -> None:
    store.write("u1", "city", "Pune", "2026-01-05", "m1")
    calls: dict[str, Any] = {
        "write-value": lambda: store.write("u1", "city", SURROGATE),
        "write-key": lambda: store.write("u1", "ci\udcfety", "Pune"),
        "write-user": lambda: store.write("u\udc801", "city", "Pune"),
        "write-source": lambda: store.write("u1", "city", "Pune", source="msg\udc80"),
        "retract": lambda: store.retract("u1", "city", SURROGATE),
        "apply": lambda: store.apply("u1", Candidate(key="city", value=SURROGATE)),
        "delete-value": lambda: store.delete("u1", "city", SURROGATE),
        "delete-key": lambda: store.delete("u1", "c\ud800ity"),
        "retrieve": lambda: store.retrieve("u1", "where do I live \ud800"),
        "current": lambda: store.current("u\ud800", "city"),
        "history": lambda: store.history("u1", "city\ud800"),
        "facts": lambda: store.facts("u1", tenant="t\ud800"),
        "summary": lambda: store.add_summary("u1", "lives in " + SURROGATE, []),
        "remember": lambda: store.write_candidates("u1", [Candidate(key="city", value=SURROGATE)]),
    }
    with pytest.raises(UserError, match="not valid Unicode text"):
        calls[door]()
    assert store.current("u1", "city").value == "Pune"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_lone_surrogate_through_the_tools_is_invalid_arguments(clock: Clock) -> None:
    store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder(), clock=clock)
    gate = Gate(memory_toolbox(store))
    for name, arguments in (
        ("memory.save_memory", {"key": "city", "value": SURROGATE}),
        ("memory.search_memory", {"query": "city \ud800"}),
        ("memory.forget_memory", {"key": "city", "value": SURROGATE}),
    ):
        result = await gate.call(ToolCall(id=f"c-{name}", name=name, arguments=arguments), ASHA)
        assert result.is_error and result.error.code == "INVALID_ARGUMENTS", (name, result.content)
        assert "Unicode" in result.content


# -- secrets by shape and context ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pin_code", "560001"),  # an Indian postal code is a "PIN code"
        ("pin_code", "560 001"),
        ("dress_code", "smart casual"),
        ("discount_code", "SAVE20"),
        ("promo_code", "WELCOME10"),
        ("zip_code", "94110"),
        ("country_code", "+91"),
        ("token_budget", "4000"),
        ("password_manager", "Bitwarden"),
        ("favourite_colour", "teal"),
        ("note", "my pin code is 560001"),
    ],
)
def test_ordinary_facts_with_secret_sounding_keys_are_stored(
    store: MemoryStore, key: str, value: str
) -> None:
    assert store.write("u1", key, value, "2026-01-05", "m1") is not None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pin_code", "4821"),  # four digits is a PIN, not a postal code
        ("pin", "560001"),
        ("atm_pin", "1234"),
        ("bank_pin", "0000"),
        ("door_code", "4411"),
        ("security_code", "123"),
        ("backup_code", "8f3k-2j9d"),
        ("password", "hunter2"),
        ("wifi_password", "correct horse"),
        ("api_key", "abc123"),
        ("github_token", "anything"),
        ("note", "sk-proj-abcdefghijklmnopqrstuvwx"),
        ("note", "my PIN is 4821"),
        ("note", "AKIAABCDEFGHIJKLMNOP"),
        ("note", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sflKxwRJSMeKKF2QT4fwpM"),
        ("note", "card 4111 1111 1111 1111"),
        ("discount_code", "xoxb-123456789012-abcdefghij"),  # the value's shape wins over a benign key
    ],
)
def test_real_secrets_are_still_refused(store: MemoryStore, key: str, value: str) -> None:
    with pytest.raises(UserError, match="secret"):
        store.write("u1", key, value, "2026-01-05", "m1")


# -- future timestamps --------------------------------------------------------------------------------------


def test_remember_refuses_a_message_from_the_future_instead_of_dropping_it(
    store: MemoryStore, clock: Clock
) -> None:
    turns = [
        ConversationTurn(role="user", id="m1", content="I live in Pune.", at=clock.now - timedelta(days=1)),
        ConversationTurn(role="user", id="m2", content="I'm vegetarian.", at=clock.now + timedelta(days=2)),
    ]
    with pytest.raises(UserError, match=r"'diet' \(from message:m2\) is in the future"):
        store.remember("u1", turns)
    assert store.facts("u1", include_history=True) == [], "nothing of the batch is written"


def test_a_small_clock_skew_is_accepted(store: MemoryStore, clock: Clock) -> None:
    turns = [
        ConversationTurn(role="user", id="m1", content="I live in Pune.", at=clock.now + timedelta(minutes=2))
    ]
    assert [o.action for o in store.remember("u1", turns)] == [WriteAction.INSERTED]


@pytest.mark.parametrize("door", ["write", "apply", "retract", "apply_many"])
def test_future_times_are_refused_at_every_write_door(store: MemoryStore, clock: Clock, door: str) -> None:
    future = clock.now + timedelta(days=30)
    calls: dict[str, Any] = {
        "write": lambda: store.write("u1", "city", "Pune", future),
        "apply": lambda: store.apply("u1", Candidate(key="city", value="Pune", valid_from=future)),
        "retract": lambda: store.retract("u1", "city", "", future),
        "apply_many": lambda: store.apply_many(
            "u1", [Candidate(key="city", value="Pune", valid_from=future)]
        ),
    }
    with pytest.raises(UserError, match="in the future"):
        calls[door]()


@pytest.mark.anyio
async def test_a_future_date_through_the_tools_is_invalid_arguments(clock: Clock) -> None:
    store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder(), clock=clock)
    gate = Gate(memory_toolbox(store))
    future = (clock.now + timedelta(days=30)).date().isoformat()
    result = await gate.call(
        ToolCall(
            id="c1",
            name="memory.save_memory",
            arguments={"key": "city", "value": "Pune", "valid_from": future},
        ),
        ASHA,
    )
    assert result.is_error and result.error.code == "INVALID_ARGUMENTS" and "future" in result.content
