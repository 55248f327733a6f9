"""A decision from the command line carries a real identity (issue 12, precise terms): the OS account,
marked via=cli, in the approval record and in the audit chain; `--approver NAME` is only a claim
recorded beside it and never gets anyone past the self-approval rule or a required role."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.cli import app
from maitre.cli.identity import os_user
from maitre.stores import ApprovalRequest, AuditEntry, open_stores

runner = CliRunner()


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MAITRE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def _box() -> Toolbox:
    box = Toolbox()

    @box.tool(effect="write", risk="high")
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        return "refunded"

    return box


def request_as(db: Path, user: str) -> str:
    """A pending approval requested by `user`; its id."""

    async def main() -> str:
        async with await open_stores(str(db)) as stores:
            result = await Gate(_box(), stores=stores).call(
                ToolCall(id=user, name="refund", arguments={"order_id": "A1", "amount": 3}),
                Principal(user=user, tenant="acme"),
            )
            assert result.error is not None
            return str(result.error.details["approval_id"])

    return anyio.run(main)


def read(db: Path, approval_id: str) -> tuple[ApprovalRequest | None, list[AuditEntry]]:
    async def main() -> tuple[ApprovalRequest | None, list[AuditEntry]]:
        async with await open_stores(str(db)) as stores:
            return await stores.approvals.get(approval_id), await stores.audit.entries()

    return anyio.run(main)


def test_the_os_account_decides_and_the_audit_chain_says_so(tmp_path: Path):
    db = tmp_path / "m.db"
    approval = request_as(db, "alice")
    done = runner.invoke(app, ["approvals", "approve", approval, "--db", str(db), "--note", "ok by phone"])
    assert done.exit_code == 0, done.output
    request, audit = read(db, approval)
    assert request is not None and request.status == "approved"
    assert request.approver == f"{os_user()} (via=cli)"
    (decision,) = [e for e in audit if e.decision == "approval_decided"]
    assert decision.user == os_user() and decision.approval_id == approval
    assert decision.detail == f"approved by {os_user()} (via=cli)"
    assert decision.call_hash == request.call_hash
    verified = runner.invoke(app, ["audit", "verify", "--db", str(db)])
    assert verified.exit_code == 0 and "2 entries" in verified.stdout


def test_a_claimed_name_is_recorded_beside_the_account_never_instead(tmp_path: Path):
    db = tmp_path / "m.db"
    approval = request_as(db, "alice")
    done = runner.invoke(
        app, ["approvals", "deny", approval, "--db", str(db), "--approver", "ops-bob", "--message", "no"]
    )
    assert done.exit_code == 0, done.output
    request, audit = read(db, approval)
    assert request is not None and request.status == "denied" and request.message == "no"
    assert request.approver == f"ops-bob (claimed; os={os_user()} via=cli)"
    assert [e.detail for e in audit if e.decision == "approval_decided"] == [
        f"denied by ops-bob (claimed; os={os_user()} via=cli)"
    ]


def test_neither_the_account_nor_a_claimed_name_may_approve_their_own_call(tmp_path: Path):
    db = tmp_path / "m.db"
    mine = request_as(db, os_user())
    claimed = runner.invoke(
        app, ["approvals", "approve", mine, "--db", str(db), "--approver", "someone-else"]
    )
    assert claimed.exit_code == 1 and "self-approval" in claimed.stderr  # claiming a name changes nothing
    theirs = request_as(db, "alice")
    posing = runner.invoke(app, ["approvals", "approve", theirs, "--db", str(db), "--approver", "Alice"])
    assert posing.exit_code == 1 and "self-approval" in posing.stderr  # nor does claiming theirs
    assert read(db, mine)[0].status == "pending" and read(db, theirs)[0].status == "pending"  # type: ignore[union-attr]


def test_a_required_role_comes_from_the_config_file_for_the_os_account_only(tmp_path: Path):
    db = tmp_path / "m.db"
    approval = request_as(db, "alice")
    (tmp_path / "maitre.toml").write_text('[policy]\napprover_role = "approver"\n')
    refused = runner.invoke(
        app, ["approvals", "approve", approval, "--db", str(db), "--approver", "approver"]
    )
    assert refused.exit_code == 1 and "role 'approver'" in refused.stderr
    (tmp_path / "maitre.toml").write_text(
        '[policy]\napprover_role = "approver"\n[approvals.cli_roles]\n"someone-else" = ["approver"]\n'
    )
    still = runner.invoke(
        app, ["approvals", "approve", approval, "--db", str(db), "--approver", "someone-else"]
    )
    assert still.exit_code == 1  # roles follow the account, not a claimed name
    (tmp_path / "maitre.toml").write_text(
        f'[policy]\napprover_role = "approver"\n[approvals.cli_roles]\n"{os_user()}" = ["approver"]\n'
    )
    allowed = runner.invoke(app, ["approvals", "approve", approval, "--db", str(db)])
    assert allowed.exit_code == 0, allowed.output
    assert read(db, approval)[0].approver == f"{os_user()} (via=cli)"  # type: ignore[union-attr]


def test_listed_ids_are_never_cut_however_narrow_the_terminal(tmp_path: Path):
    db = tmp_path / "m.db"
    ids = [request_as(db, f"user{i}") for i in range(3)]
    for columns in ("40", "80"):
        listed = runner.invoke(app, ["approvals", "list", "--db", str(db)], env={"COLUMNS": columns})
        assert listed.exit_code == 0, listed.output
        for approval in ids:
            assert approval in listed.stdout, (columns, listed.stdout)
    wide = runner.invoke(app, ["approvals", "list", "--db", str(db), "--wide"], env={"COLUMNS": "40"})
    rows = [line for line in wide.stdout.splitlines() if "apr_" in line]
    assert len(rows) == 3 and all("refund" in row for row in rows)  # one request per line
    as_json = json.loads(runner.invoke(app, ["approvals", "list", "--db", str(db), "--json"]).stdout)
    assert sorted(r["id"] for r in as_json) == sorted(ids)
    runs = runner.invoke(app, ["runs", "list", "--db", str(db), "--json"])
    assert runs.exit_code == 0 and json.loads(runs.stdout) == []
