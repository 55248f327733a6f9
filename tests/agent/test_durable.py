"""A run that needs approval pauses, is saved, and resumes - in another agent, or another process."""

import subprocess
import sys
from pathlib import Path

import pytest

from maitre import Principal
from maitre.agent import ApprovalDecision, RunStatus, StopReason, ToolResultMessage
from maitre.stores import open_stores

from . import shop_agent

pytestmark = pytest.mark.anyio
ALICE = Principal(user="alice", tenant="acme")
MANAGER = Principal(user="maria", tenant="acme")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    shop_agent.set_ledger(path)
    return path


async def test_pause_then_resume_in_a_fresh_agent_executes_the_approved_call_once(tmp_path, ledger):
    db = str(tmp_path / "runs.db")
    async with await open_stores(db) as store:
        run = await shop_agent.make_agent(store).run("please refund order A1042", ALICE)
    assert run.status is RunStatus.PAUSED and run.stop_reason is StopReason.APPROVAL_REQUIRED
    (pending,) = run.pending
    assert pending.tool == "shop.issue_refund" and pending.arguments == {
        "order_id": "A1042",
        "amount": "1200.00",
    }
    assert ledger.read_text() == ""

    async with await open_stores(db) as store:  # a new process would do exactly this
        resumed = await shop_agent.make_agent(store).resume(
            run.id, decisions={pending.approval_id: ApprovalDecision.approved(MANAGER)}
        )
        assert resumed.status is RunStatus.FINISHED, resumed.final_text
        assert "Refunded 1200.00 INR for A1042" in resumed.final_text
        again = await shop_agent.make_agent(store).resume(run.id)
        assert again.status is RunStatus.FINISHED
    assert ledger.read_text().splitlines() == ["A1042 1200.00"]
    types = [e["type"] for e in resumed.events]
    assert "approval_requested" in types and "run_paused" in types
    assert "approval_decided" in types and "run_resumed" in types and types[-1] == "run_finished"


async def test_a_denial_goes_back_to_the_model(tmp_path, ledger):
    async with await open_stores(str(tmp_path / "runs.db")) as store:
        agent = shop_agent.make_agent(store)
        run = await agent.run("please refund order A1042", ALICE)
        resumed = await agent.resume(
            run.id,
            decisions={
                run.pending[0].approval_id: ApprovalDecision.denied(
                    MANAGER, "the order is outside the refund window"
                )
            },
        )
    assert ledger.read_text() == ""
    assert resumed.status is RunStatus.FINISHED
    denial = [m for m in resumed.messages if isinstance(m, ToolResultMessage)][-1]
    assert denial.error_code == "APPROVAL_DENIED" and "outside the refund window" in denial.content
    assert "outside the refund window" in resumed.final_text


async def test_edited_arguments_are_what_runs(tmp_path, ledger):
    async with await open_stores(str(tmp_path / "runs.db")) as store:
        agent = shop_agent.make_agent(store)
        run = await agent.run("please refund order A1042", ALICE)
        edit = ApprovalDecision.approved(MANAGER, edited_arguments={"order_id": "A1042", "amount": "600.00"})
        resumed = await agent.resume(run.id, decisions={run.pending[0].approval_id: edit})
    assert ledger.read_text().splitlines() == ["A1042 600.00"]
    assert resumed.status is RunStatus.FINISHED


async def test_resuming_without_a_decision_keeps_the_run_paused(tmp_path, ledger):
    async with await open_stores(str(tmp_path / "runs.db")) as store:
        agent = shop_agent.make_agent(store)
        run = await agent.run("please refund order A1042", ALICE)
        still = await agent.resume(run.id)
    assert still.status is RunStatus.PAUSED and ledger.read_text() == ""


def test_runs_cli_resumes_a_paused_run_in_another_process(tmp_path, ledger):
    import anyio

    db = str(tmp_path / "runs.db")

    async def start() -> tuple[str, str]:
        async with await open_stores(db) as store:
            run = await shop_agent.make_agent(store).run("please refund order A1042", ALICE)
            return run.id, run.pending[0].approval_id

    run_id, approval_id = anyio.run(start)
    maitre = [sys.executable, "-m", "maitre.cli"]
    script = tmp_path / "agent_factory.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent.parent)!r})\n"
        "from pathlib import Path\n"
        "from agent import shop_agent\n"
        f"shop_agent.set_ledger(Path({str(ledger)!r}))\n"
        "make_agent = shop_agent.make_agent\n"
    )
    listed = subprocess.run([*maitre, "runs", "list", "--db", db], capture_output=True, text=True, timeout=60)
    assert run_id in listed.stdout and "paused" in listed.stdout
    approved = subprocess.run(
        [*maitre, "approvals", "approve", approval_id, "--db", db, "--approver", "maria"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    resumed = subprocess.run(
        [*maitre, "runs", "resume", run_id, "--db", db, "--agent", f"{script}:make_agent"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "finished" in resumed.stdout
    assert ledger.read_text().splitlines() == ["A1042 1200.00"]
    shown = subprocess.run(
        [*maitre, "runs", "show", run_id, "--db", db], capture_output=True, text=True, timeout=60
    )
    assert "finished" in shown.stdout
