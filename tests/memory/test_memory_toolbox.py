"""The memory tools through the real gate, scoped to the injected principal."""

from __future__ import annotations

from typing import Any

import pytest

from maitre import Gate, Principal, ToolCall
from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore, memory_toolbox
from maitre.policy import DEFAULT_RISK_MATRIX, Action, DefaultPolicy
from maitre.types import Effect, Risk

ASHA = Principal(user="asha", tenant="acme")
RAVI = Principal(user="ravi", tenant="acme")
ASHA_OTHER_TENANT = Principal(user="asha", tenant="globex")


@pytest.fixture
def setup(clock) -> tuple[MemoryStore, Gate]:  # type: ignore[no-untyped-def]
    store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder(), clock=clock)
    return store, Gate(memory_toolbox(store))


async def call(gate: Gate, principal: Principal, name: str, **arguments: Any):  # type: ignore[no-untyped-def]
    return await gate.call(ToolCall(id=f"c-{name}", name=name, arguments=arguments), principal)


def test_definitions_hide_the_principal(setup) -> None:  # type: ignore[no-untyped-def]
    _, gate = setup
    box = gate.toolbox
    assert sorted(box.names()) == ["memory.forget_memory", "memory.save_memory", "memory.search_memory"]
    for tool in box:
        props = tool.input_schema["properties"]
        assert "principal" not in props and "user" not in props and "tenant" not in props
        assert tool.input_schema.get("additionalProperties") is False
    assert box.get("memory.forget_memory").effect == "destructive"  # type: ignore[union-attr]
    assert box.get("memory.search_memory").effect == "read"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_save_search_and_isolation(setup) -> None:  # type: ignore[no-untyped-def]
    store, gate = setup
    r = await call(gate, ASHA, "memory.save_memory", key="city", value="Pune", valid_from="2026-01-05")
    assert not r.is_error, r.content
    assert r.structured["current"]["value"] == "Pune"
    r = await call(gate, ASHA, "memory.save_memory", key="city", value="Bengaluru", valid_from="2026-03-20")
    assert r.structured["current"]["value"] == "Bengaluru"
    await call(gate, RAVI, "memory.save_memory", key="city", value="Chennai")
    guess = await call(gate, ASHA, "memory.save_memory", key="city", value="Mumbai", origin="inferred")
    assert guess.structured["saved"] is True and guess.structured["current"]["value"] == "Bengaluru"

    found = await call(gate, ASHA, "memory.search_memory", query="which city do I live in")
    assert [f["value"] for f in found.structured["facts"]] == ["Bengaluru"]
    assert [
        f["value"] for f in (await call(gate, RAVI, "memory.search_memory", query="city")).structured["facts"]
    ] == ["Chennai"]
    other = await call(gate, ASHA_OTHER_TENANT, "memory.search_memory", query="city")
    assert other.structured["facts"] == [] and "Nothing" in other.structured["note"]
    # The model cannot point a call at another user.
    sneaky = await call(gate, RAVI, "memory.search_memory", query="city", user="asha")
    assert sneaky.is_error and sneaky.error.code == "INVALID_ARGUMENTS"
    assert store.current("asha", "city", tenant="acme").value == "Bengaluru"  # type: ignore[union-attr]
    assert store.current("asha", "city") is None, "tool writes land in the principal's tenant"


@pytest.mark.anyio
async def test_errors_teach_the_model(setup) -> None:  # type: ignore[no-untyped-def]
    _, gate = setup
    bad_key = await call(gate, ASHA, "memory.save_memory", key="Home City", value="Pune")
    assert bad_key.is_error and bad_key.error.code == "INVALID_ARGUMENTS"
    secret = await call(gate, ASHA, "memory.save_memory", key="card", value="4111 1111 1111 1111")
    assert secret.is_error and secret.error.code == "INVALID_ARGUMENTS" and "secret" in secret.content
    missing = await call(gate, ASHA, "memory.forget_memory", key="city")
    assert missing.is_error


@pytest.mark.anyio
async def test_forget_needs_approval_and_then_blocks_resaving(setup) -> None:  # type: ignore[no-untyped-def]
    store, gate = setup
    await call(gate, ASHA, "memory.save_memory", key="city", value="Pune")
    pending = await call(gate, ASHA, "memory.forget_memory", key="city")
    assert pending.is_error and pending.error.code == "APPROVAL_REQUIRED", "destructive: the user confirms"
    assert store.current("asha", "city", tenant="acme") is not None
    # A host whose policy lets a user's own low-risk forget through: the tool forgets everywhere.
    matrix = dict(DEFAULT_RISK_MATRIX)
    matrix[(Effect.DESTRUCTIVE, Risk.LOW)] = Action.ALLOW
    lenient = Gate(gate.toolbox, policy=DefaultPolicy(matrix=matrix))
    done = await call(lenient, ASHA, "memory.forget_memory", key="city")
    assert not done.is_error and done.structured["forgotten"] == 1
    assert store.history("asha", "city", tenant="acme") == []
    again = await call(gate, ASHA, "memory.save_memory", key="city", value="Pune")
    assert again.is_error and again.error.code == "INVALID_STATE" and "forget" in again.content


def test_the_memory_tools_declare_their_data_personal(setup) -> None:  # type: ignore[no-untyped-def]
    _, gate = setup
    assert all(tool.personal for tool in gate.toolbox), "the gate must seal what they carry"


@pytest.mark.anyio
async def test_forget_shreds_the_gates_copies_of_that_user_only(clock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from maitre.audit import verify_store
    from maitre.gate.personal import FORGOTTEN_TEXT
    from maitre.storage import SQLiteStores

    store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder(), clock=clock)
    stores = SQLiteStores(tmp_path / "gate.db")
    matrix = dict(DEFAULT_RISK_MATRIX)
    matrix[(Effect.DESTRUCTIVE, Risk.LOW)] = Action.ALLOW
    gate = Gate(memory_toolbox(store), stores=stores, policy=DefaultPolicy(matrix=matrix))
    await call(gate, ASHA, "memory.save_memory", key="city", value="Pune")
    await call(gate, RAVI, "memory.save_memory", key="city", value="Chennai")
    first = await call(gate, ASHA, "memory.forget_memory", key="city", value="Pune")
    assert not first.is_error
    assert await stores.subject_keys.key("acme", "asha", create=False) is None  # the key is gone
    assert await stores.subject_keys.key("acme", "ravi", create=False) is not None
    # The same forget again (same arguments, within the dedupe window): its own stored result was
    # sealed under the key it erased, so the replay says forgotten - it never names the value.
    replay = await call(gate, ASHA, "memory.forget_memory", key="city", value="Pune")
    assert replay.replayed and replay.content.startswith(FORGOTTEN_TEXT) and "Pune" not in replay.content
    entries = await stores.audit.entries()
    assert entries and all("Pune" not in str(e.to_dict()) for e in entries)
    assert (await verify_store(stores.audit)).ok
    await stores.close()


@pytest.mark.anyio
async def test_search_memory_answers_for_a_past_date_and_from_the_conversation(setup) -> None:  # type: ignore[no-untyped-def]
    """'Where did I live before I moved?': the tool reads the facts true then; `conversation` adds
    what was said, and another user's turns never come back."""
    from datetime import UTC, datetime

    from maitre.memory import ConversationTurn

    store, gate = setup
    await call(gate, ASHA, "memory.save_memory", key="city", value="Pune", valid_from="2026-01-05")
    await call(gate, ASHA, "memory.save_memory", key="city", value="Bengaluru", valid_from="2026-03-20")
    before = await call(gate, ASHA, "memory.search_memory", query="which city", before="2026-03-20")
    assert not before.is_error, before.content
    assert [f["value"] for f in before.structured["facts"]] == ["Pune"]
    then = await call(gate, ASHA, "memory.search_memory", query="which city", as_of="2026-02-01")
    assert [f["value"] for f in then.structured["facts"]] == ["Pune"]
    now = await call(gate, ASHA, "memory.search_memory", query="which city")
    assert [f["value"] for f in now.structured["facts"]] == [
        "Bengaluru"
    ] and "conversation" not in now.structured

    said = datetime(2026, 3, 18, 9, 0, tzinfo=UTC)
    turn = ConversationTurn(role="user", content="The movers for Bengaluru come on Friday", id="m1", at=said)
    store.add_episodes("asha", [turn], tenant="acme")
    store.add_episodes(
        "ravi", [ConversationTurn(role="user", content="Movers for Chennai", id="r1", at=said)], tenant="acme"
    )
    found = await call(gate, ASHA, "memory.search_memory", query="when do the movers come", conversation=True)
    texts = [c["said"] for c in found.structured["conversation"]]
    assert any("movers for bengaluru" in t.lower() for t in texts) and not any("Chennai" in t for t in texts)
    assert found.structured["conversation"][0]["on"] == "2026-03-18"
