"""Attacks on durable runs and sagas that must fail.

DBOS hands back a workflow's recorded output to anyone who starts a workflow under the same id: a
durable run id chosen by another user must not return the first user's run, start their own run
under it, or decide the first user's approvals.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from maitre import Principal, Toolbox
from maitre.agent import Agent, ApprovalDecision, Limits
from maitre.durable import DurableAgent, executor
from maitre.exceptions import UserError
from maitre.models.base import ModelRequest, ModelResponse
from maitre.stores import open_stores
from maitre.types import ToolCall

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kill_agent  # noqa: E402

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
BOB = Principal(user="bob", tenant="acme")
EVE = Principal(user="eve", tenant="other")
MARIA = Principal(user="maria", tenant="acme")
SECRET = "alice-allergy-penicillin"


def effects(path: Path) -> list[str]:
    return [line.split(" ")[0] for line in path.read_text().splitlines()] if path.exists() else []


async def test_another_user_cannot_take_a_durable_run_by_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAITRE_LEDGER", str(tmp_path / "ledger"))
    monkeypatch.delenv("MAITRE_KILL", raising=False)
    async with await open_stores(str(tmp_path / "a.db")) as stores:
        durable = DurableAgent(kill_agent.make_agent(stores), name="attack-ids")
        try:
            async with executor(f"sqlite:///{tmp_path / 'a.dbos.sqlite'}", executor_id="attack-1"):
                paused = await durable.run("book and upgrade", ALICE, run_id="r1")
                assert paused.paused
                approval = paused.pending[0].approval_id
                for other in (BOB, EVE):
                    # DBOS would return Alice's recorded (paused) run for the id: refused instead
                    with pytest.raises(UserError, match="taken"):
                        await durable.run("book and upgrade", other, run_id="r1")
                    approve = {approval: ApprovalDecision(approve=True, approver=other)}
                    with pytest.raises(UserError, match="no run"):
                        await durable.resume("r1", approve, principal=other)
                    with pytest.raises(UserError, match="no run"):
                        await durable.continue_abandoned("r1", principal=other)
                ticket = await durable.gate.approvals.get(approval)
                assert ticket is not None and ticket.status == "pending"  # Bob decided nothing
                assert effects(tmp_path / "ledger") == ["book_flight"]

                # A run id that names a resume workflow (or its prefix) is refused before DBOS sees it
                with pytest.raises(UserError, match="reserved"):
                    await durable.run("book and upgrade", BOB, run_id="r1:resume:0123456789abcdef")

                # Alice's own run is not blocked by what Bob and Eve tried
                await durable.gate.approvals.approve(approval, MARIA)
                done = await durable.resume("r1", principal=ALICE)
                assert done.status == "finished" and "Upgraded on AI-101" in done.final_text
                assert (await durable.run("book and upgrade", ALICE, run_id="r1")).paused  # recorded
                for other in (BOB, EVE):
                    with pytest.raises(UserError, match="taken"):
                        await durable.run("book and upgrade", other, run_id="r1")
                    with pytest.raises(UserError, match="no run"):
                        await durable.continue_abandoned("r1", principal=other)
                # Bob's own run under a fresh id is his
                mine = await durable.run("book it", BOB, run_id="b1")
                assert mine.status == "finished" and mine.principal.user == "bob"
                # continue_abandoned waits only on this run's workflows, not on a run whose id
                # merely starts with it (b1 -> b10)
                again = await durable.continue_abandoned("b1", principal=BOB)
                assert again.status == "finished"
            assert effects(tmp_path / "ledger") == ["book_flight", "upgrade_seat", "book_flight"]
        finally:
            durable.unregister()


class _Recall:
    name = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not done:
            return ModelResponse(
                tool_calls=[ToolCall(id="c0", name="recall", arguments={})], stop_reason="tool_use"
            )
        return ModelResponse(text=f"You told me: {getattr(done[0], 'content', '')}")


async def test_another_user_cannot_read_a_personal_durable_run_by_its_id(tmp_path: Path) -> None:
    box = Toolbox()
    calls: list[str] = []

    @box.tool(personal=True)
    def recall() -> str:
        """What the user told me about their health."""
        calls.append("recall")
        return SECRET

    async with await open_stores(str(tmp_path / "p.db")) as stores:
        agent = Agent(_Recall(), box, stores=stores, limits=Limits(max_steps=3), notes=False)
        durable = DurableAgent(agent, name="attack-personal")
        try:
            async with executor(f"sqlite:///{tmp_path / 'p.dbos.sqlite'}", executor_id="attack-p"):
                run = await durable.run("what did I tell you?", ALICE, run_id="p1")
                assert SECRET in run.final_text
                for other in (BOB, EVE):
                    with pytest.raises(UserError, match="taken") as refused:
                        await durable.run("what did I tell you?", other, run_id="p1")
                    assert SECRET not in str(refused.value)
                    with pytest.raises(UserError, match="no run"):
                        await durable.continue_abandoned("p1", principal=other)
                assert calls == ["recall"]  # nothing ran for Bob or Eve under Alice's id
        finally:
            durable.unregister()
