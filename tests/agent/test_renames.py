"""One name per thing (issue 11, item 4): each new name works silently, each old one still works and
warns with a DeprecationWarning, and `Agent(gate=...)` refuses the arguments it would ignore."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import maitre.agent.context_manager
import maitre.agent.messages
import maitre.memory
import maitre.memory.extract
import maitre.messages
import maitre.models
import maitre.models.base
from maitre import DefaultPolicy, Gate, Principal, UserError
from maitre.agent import Agent, ApprovalDecision, Limits, RunStatus, StopReason
from maitre.gate.budget import Budgets
from maitre.memory import ConversationTurn, MemoryStore
from maitre.models import FinishReason
from maitre.search import ToolIndex
from maitre.stores import MemoryStores

from . import shop_agent

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
MANAGER = Principal(user="maria", tenant="acme")


@contextmanager
def no_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def ledger_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    shop_agent.set_ledger(path)
    return path


# -- Agent(stores=) -------------------------------------------------------------------------------


async def test_agent_stores_is_the_keyword_and_store_still_works_with_a_warning(ledger: Path) -> None:
    stores = MemoryStores()
    with no_warning():
        agent = Agent(shop_agent.refund_model(), shop_agent.shop_box(), stores=stores)
        assert agent.stores is stores and agent.gate.stores is stores
    with pytest.warns(DeprecationWarning, match=r"Agent\(store=\.\.\.\) is deprecated; pass stores="):
        old = Agent(
            shop_agent.refund_model(), shop_agent.shop_box(), store=stores, limits=Limits(max_steps=6)
        )
    assert old.stores is stores
    with pytest.warns(DeprecationWarning, match="Agent.store is deprecated"):
        assert old.store is stores
    # the old keyword really wires the store: a run paused by one agent resumes in the other
    run = await old.run("please refund order A1042", ALICE)
    assert run.status is RunStatus.PAUSED
    resumed = await agent.resume(
        run.id, decisions={run.pending[0].approval_id: ApprovalDecision.approved(MANAGER)}
    )
    assert resumed.status is RunStatus.FINISHED and ledger_lines(ledger) == ["A1042 1200.00"]


def test_agent_refuses_both_store_and_stores() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(UserError, match="both stores= and"):
        Agent(shop_agent.refund_model(), shop_agent.shop_box(), stores=MemoryStores(), store=MemoryStores())


# -- Agent(gate=) ---------------------------------------------------------------------------------


async def test_agent_with_a_gate_uses_it(ledger: Path) -> None:
    box = shop_agent.shop_box()
    stores = MemoryStores()
    gate = Gate(box, stores=stores)
    with no_warning():
        agent = Agent(shop_agent.refund_model(), gate=gate, limits=Limits(max_steps=6))
    assert agent.gate is gate and agent.stores is stores
    run = await agent.run("please refund order A1042", ALICE)
    assert run.status is RunStatus.PAUSED and run.pending[0].tool == "shop.issue_refund"
    assert await stores.runs.load(run.id) is not None


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"tools": shop_agent.shop_box()}, ["tools"]),
        ({"core_tools": ["shop.get_order"]}, ["core_tools"]),
        ({"notes": False}, ["notes"]),
        ({"notes": True}, ["notes"]),
        ({"policy": DefaultPolicy()}, ["policy"]),
        ({"stores": MemoryStores()}, ["stores"]),
        ({"budgets": Budgets()}, ["budgets"]),
        ({"search_index": "an index"}, ["search_index"]),
        (
            {"tools": shop_agent.shop_box(), "policy": DefaultPolicy(), "budgets": Budgets(), "notes": False},
            ["tools", "notes", "policy", "budgets"],
        ),
    ],
)
def test_agent_with_a_gate_refuses_what_it_would_ignore(kwargs: dict[str, object], named: list[str]) -> None:
    gate = Gate(shop_agent.shop_box())
    with pytest.raises(UserError, match=r"Agent\(gate=\.\.\.\)") as caught:
        Agent(shop_agent.refund_model(), gate=gate, **kwargs)  # type: ignore[arg-type]
    assert f"so {', '.join(named)} would be ignored" in str(caught.value)


def test_agent_with_a_gate_names_the_deprecated_store_keyword_as_given() -> None:
    gate = Gate(shop_agent.shop_box())
    with pytest.warns(DeprecationWarning), pytest.raises(UserError, match="so store would be ignored"):
        Agent(shop_agent.refund_model(), gate=gate, store=MemoryStores())


def test_agent_without_tools_or_a_gate_is_a_user_error() -> None:
    with pytest.raises(UserError, match="needs tools"):
        Agent(shop_agent.refund_model())


def test_agent_without_a_gate_still_takes_the_gate_building_arguments() -> None:
    box = shop_agent.shop_box()
    with no_warning():
        agent = Agent(
            shop_agent.refund_model(),
            box,
            policy=DefaultPolicy(),
            budgets=Budgets(),
            notes=False,
            core_tools=["shop.get_order"],
            search_index=ToolIndex(box),
        )
    assert agent.core_tools is not None and "shop.get_order" in agent.core_tools
    assert agent.gate.find_tool("write_notes") is None


# -- edited_arguments -----------------------------------------------------------------------------


async def test_approve_takes_edited_arguments_and_edited_args_with_a_warning(ledger: Path) -> None:
    agent = shop_agent.make_agent(MemoryStores())
    first = await agent.run("please refund order A1042", ALICE)
    second = await agent.run("please refund order A1042", Principal(user="bob", tenant="acme"))
    with no_warning():
        new = await agent.gate.approvals.approve(
            first.pending[0].approval_id, MANAGER, edited_arguments={"order_id": "A1042", "amount": "600.00"}
        )
    assert new.edited_arguments == {"order_id": "A1042", "amount": "600.00"}
    with pytest.warns(DeprecationWarning, match=r"approve\(edited_args=\.\.\.\) is deprecated"):
        old = await agent.gate.approvals.approve(
            second.pending[0].approval_id, MANAGER, edited_args={"order_id": "A1042", "amount": "700.00"}
        )
    assert old.edited_arguments == {"order_id": "A1042", "amount": "700.00"}
    assert old.approved_hash is not None and old.approved_hash != old.call_hash
    await agent.resume(first.id)
    await agent.resume(second.id)
    assert sorted(ledger_lines(ledger)) == ["A1042 600.00", "A1042 700.00"]


async def test_approve_refuses_both_edit_keywords() -> None:
    agent = shop_agent.make_agent(MemoryStores())
    run = await agent.run("please refund order A1042", ALICE)
    edits = {"order_id": "A1042", "amount": "600.00"}
    with pytest.warns(DeprecationWarning), pytest.raises(UserError, match="both edited_arguments= and"):
        await agent.gate.approvals.approve(
            run.pending[0].approval_id, MANAGER, edited_arguments=edits, edited_args=edits
        )
    request = await agent.gate.approvals.get(run.pending[0].approval_id)
    assert request is not None and request.status == "pending"


async def test_approval_decision_edited_arguments_and_its_old_name(ledger: Path) -> None:
    edits = {"order_id": "A1042", "amount": "600.00"}
    with no_warning():
        new = ApprovalDecision.approved(MANAGER, edited_arguments=edits)
        assert new == ApprovalDecision(approve=True, approver=MANAGER, edited_arguments=edits)
        assert ApprovalDecision.approved(MANAGER, edits).edited_arguments == edits
    with pytest.warns(DeprecationWarning, match=r"ApprovalDecision\.approved\(edited_args=\.\.\.\)"):
        old = ApprovalDecision.approved(MANAGER, edited_args=edits)
    with pytest.warns(DeprecationWarning, match=r"ApprovalDecision\(edited_args=\.\.\.\)"):
        assert ApprovalDecision(approve=True, approver=MANAGER, edited_args=edits) == new
    with pytest.warns(DeprecationWarning, match="ApprovalDecision.edited_args is deprecated"):
        assert old.edited_args == edits
    assert old == new
    with pytest.raises(AttributeError):
        new.approve = False  # type: ignore[misc]  # still frozen
    agent = shop_agent.make_agent(MemoryStores())
    run = await agent.run("please refund order A1042", ALICE)
    resumed = await agent.resume(run.id, decisions={run.pending[0].approval_id: old})
    assert resumed.status is RunStatus.FINISHED and ledger_lines(ledger) == ["A1042 600.00"]


# -- StopReason / FinishReason --------------------------------------------------------------------


def test_one_stop_reason_and_the_model_calls_finish_reason() -> None:
    assert maitre.agent.StopReason is StopReason and StopReason("completed") is StopReason.COMPLETED
    with no_warning():
        assert maitre.models.FinishReason is maitre.models.base.FinishReason is FinishReason
        assert maitre.models.base.ModelResponse().stop_reason == "end_turn"
    for module in (maitre.models, maitre.models.base):
        with pytest.warns(
            DeprecationWarning, match="StopReason is deprecated: it is the model call's FinishReason"
        ):
            assert module.StopReason is FinishReason
    with pytest.warns(DeprecationWarning):
        from maitre.models import StopReason as old  # noqa: F401
    assert "StopReason" not in maitre.models.__all__ and "FinishReason" in maitre.models.__all__
    with pytest.raises(AttributeError):
        maitre.models.NoSuchName  # noqa: B018


# -- the memory conversation turn -----------------------------------------------------------------


def test_memory_conversation_turn_and_its_old_name(tmp_path: Path) -> None:
    for module in (maitre.memory, maitre.memory.extract):
        with pytest.warns(
            DeprecationWarning, match=r"maitre\.memory\.Message is deprecated; it is ConversationTurn"
        ):
            assert module.Message is ConversationTurn
    assert "Message" not in maitre.memory.__all__ and "ConversationTurn" in maitre.memory.__all__
    with pytest.warns(DeprecationWarning):
        from maitre.memory import Message
    store = MemoryStore(str(tmp_path / "memory.db"))
    with no_warning():
        outcomes = store.remember("u1", [Message(role="user", id="m1", content="I live in Pune.")])
    assert [(o.current.key, o.current.value) for o in outcomes if o.current] == [("city", "Pune")]


# -- the conversation messages moved to the core --------------------------------------------------


def test_the_conversation_messages_live_in_the_core_and_the_old_path_still_imports() -> None:
    for name in maitre.agent.messages.__all__:
        assert getattr(maitre.agent.messages, name) is getattr(maitre.messages, name)
    assert maitre.agent.Message is maitre.messages.Message
    assert maitre.agent.context_manager.conversation_tokens is maitre.messages.conversation_tokens
    turn = maitre.messages.UserMessage(content="hello there")
    assert maitre.messages.conversation_tokens([turn]) == maitre.messages.message_tokens(turn) > 0
