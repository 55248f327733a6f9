"""`maitre approvals list|approve|deny` and `maitre audit verify|show` on a SQLite file."""

import json
import sqlite3
from pathlib import Path

import anyio
from typer.testing import CliRunner

from maitre import Principal, ToolCall
from maitre.cli import app
from maitre.stores import open_stores

from .conftest import Shop, make_gate

runner = CliRunner()


def seed(db: Path) -> list[str]:
    async def main() -> list[str]:
        async with await open_stores(str(db)) as stores:
            gate = make_gate(Shop(), stores)
            alice = Principal(user="alice", tenant="acme")
            ids = []
            for note in ("N-001", "N-002", "N-003"):
                result = await gate.call(
                    ToolCall(id=note, name="shop.delete_note", arguments={"note_id": note}), alice
                )
                ids.append(result.error.details["approval_id"])
            await gate.call(
                ToolCall(id="r", name="shop.get_order", arguments={"order_id": "ORD-00000001"}), alice
            )
            return ids

    return anyio.run(main)


def test_approvals_cli_lists_approves_and_denies(tmp_path: Path):
    db = tmp_path / "m.db"
    first, second, third = seed(db)
    listed = runner.invoke(app, ["approvals", "list", "--db", str(db), "--json"])
    assert listed.exit_code == 0
    assert {r["id"] for r in json.loads(listed.output)} == {first, second, third}
    assert (
        runner.invoke(
            app, ["approvals", "approve", first, "--db", str(db), "--approver", "manager"]
        ).exit_code
        == 0
    )
    denied = runner.invoke(
        app, ["approvals", "deny", second, "--db", str(db), "--approver", "manager", "--message", "no"]
    )
    assert denied.exit_code == 0
    selfish = runner.invoke(app, ["approvals", "approve", third, "--db", str(db), "--approver", "alice"])
    assert selfish.exit_code == 1 and "self-approval" in selfish.output
    twice = runner.invoke(app, ["approvals", "approve", first, "--db", str(db), "--approver", "manager"])
    assert twice.exit_code == 1
    pending = json.loads(runner.invoke(app, ["approvals", "list", "--db", str(db), "--json"]).output)
    assert [r["id"] for r in pending] == [third]


def tamper(db: Path, statement: str) -> None:
    """What an attacker with the file does: drop the append-only triggers, then rewrite history."""
    con = sqlite3.connect(db)
    for (trigger,) in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        con.execute(f"DROP TRIGGER {trigger}")
    con.executescript(statement)
    con.commit()
    con.close()


def test_audit_verify_detects_an_altered_a_removed_and_a_reordered_entry(tmp_path: Path):
    db = tmp_path / "m.db"
    seed(db)
    ok = runner.invoke(app, ["audit", "verify", "--db", str(db)])
    assert ok.exit_code == 0 and "4 entries" in ok.output
    shown = runner.invoke(app, ["audit", "show", "--db", str(db), "--json"])
    assert len(shown.output.splitlines()) == 4
    pristine = db.read_bytes()

    cases = {
        "altered": ("UPDATE audit SET decision = 'allow' WHERE seq = 2", "seq 2"),
        "removed": ("DELETE FROM audit WHERE seq = 3", "seq 3"),
        "reordered": (
            "UPDATE audit SET seq = -seq WHERE seq IN (2, 3); "
            "UPDATE audit SET seq = 5 - (-seq) WHERE seq IN (-2, -3)",
            "seq 2",
        ),
    }
    for name, (statement, where) in cases.items():
        copy = tmp_path / f"{name}.db"
        copy.write_bytes(pristine)
        tamper(copy, statement)
        broken = runner.invoke(app, ["audit", "verify", "--db", str(copy)])
        assert broken.exit_code == 1, name
        assert where in broken.output, (name, broken.output)


def test_an_anchor_catches_a_log_cut_short(tmp_path: Path):
    db = tmp_path / "m.db"
    seed(db)
    ok = runner.invoke(app, ["audit", "verify", "--db", str(db)])
    anchor = next(line.split("anchor: ")[1] for line in ok.output.splitlines() if line.startswith("anchor: "))
    assert anchor.startswith("4:")
    tamper(db, "DELETE FROM audit WHERE seq = 4")
    plain = runner.invoke(app, ["audit", "verify", "--db", str(db)])
    assert plain.exit_code == 0  # a chain cut at its end still links: that is what the anchor is for
    anchored = runner.invoke(app, ["audit", "verify", "--db", str(db), "--anchor", anchor])
    assert anchored.exit_code == 1
    bad = runner.invoke(app, ["audit", "verify", "--db", str(db), "--anchor", "nonsense"])
    assert bad.exit_code == 2
