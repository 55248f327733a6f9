"""`maitre demo` tells the seeds' story through the real runtime, for people and as JSON Lines."""

import json

from typer.testing import CliRunner

from maitre.cli import app

REQUIRED_TYPES = {
    "tool_call",
    "tool_result",
    "approval_requested",
    "approval_decided",
    "run_paused",
    "run_resumed",
    "run_finished",
    "audit_verified",
}


def events() -> list[dict]:
    result = CliRunner().invoke(app, ["demo", "--json", "--model", "scripted"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]


def test_demo_json_lines_tell_the_whole_story():
    story = events()
    assert {e["type"] for e in story} >= REQUIRED_TYPES
    by_chapter: dict[str, list[dict]] = {}
    for event in story:
        by_chapter.setdefault(event.get("chapter", ""), []).append(event)

    weekend_calls = [e["name"] for e in by_chapter["weekend"] if e["type"] == "tool_call"]
    assert weekend_calls == ["weekend.get_weather", "weekend.find_events"]

    order_codes = [e["error_code"] for e in by_chapter["order"] if e["type"] == "tool_result"]
    assert order_codes == ["INVALID_ARGUMENTS", None]

    refund = [e["type"] for e in by_chapter["refund"]]
    assert refund.index("approval_requested") < refund.index("run_paused") < refund.index("approval_decided")
    assert refund.index("approval_decided") < refund.index("run_resumed")
    retry = [e for e in by_chapter["refund-retry"] if e["type"] == "tool_result"]
    assert retry[0]["replayed"] is True and retry[0]["error_code"] is None

    loop_codes = [e["error_code"] for e in by_chapter["loop"] if e["type"] == "tool_result"]
    assert loop_codes.count("LOOP_DETECTED") == 2
    loop_end = [e for e in by_chapter["loop"] if e["type"] == "run_finished"][-1]
    assert loop_end["stop_reason"] == "loop_detected"

    injection = by_chapter["injection"]
    assert next(e for e in injection if e["type"] == "tool_result")["trust"] == "untrusted"
    assert [e["status"] for e in injection if e["type"] == "approval_decided"] == ["denied"]
    assert "APPROVAL_DENIED" in [e["error_code"] for e in injection if e["type"] == "tool_result"]

    (audit,) = [e for e in story if e["type"] == "audit_verified"]
    assert audit["ok"] is True and audit["entries"] >= 12


def test_demo_renders_for_people_and_nothing_unwanted_happened():
    result = CliRunner().invoke(app, ["demo", "--model", "scripted"])
    assert result.exit_code == 0, result.output
    assert "refunds issued: 1" in result.output and "emails sent: 0" in result.output
    assert "hash chain intact" in result.output


def test_demo_keep_leaves_one_refund_waiting_for_the_console_and_says_how_to_open_it(tmp_path):
    import asyncio

    from maitre.demo import console_agent
    from maitre.stores import open_stores

    folder = tmp_path / "kept"
    result = CliRunner().invoke(app, ["demo", "--model", "scripted", "--keep", str(folder)])
    assert result.exit_code == 0, result.output
    db = folder / "maitre.db"
    assert f"maitre console --stores {db} --resume-agent maitre.demo:console_agent" in result.output
    assert "pip install 'maitre[console]'" in result.output

    async def check() -> None:
        async with await open_stores(str(db)) as stores:
            pending = await stores.approvals.list(status="pending")
            assert [(r.tool, r.arguments["order_id"], r.arguments["amount"]) for r in pending] == [
                ("orders.issue_refund", "A2077", "800.00")
            ]
            paused = await stores.runs.list(status="paused")
            assert [s.run_id for s in paused] == [pending[0].run_id]
            # the factory the README names resumes it once a person (not the customer) approved
            agent = console_agent(stores)
            from maitre import Principal

            manager = Principal(user="maria", tenant="demo", roles=frozenset({"approver"}))
            await agent.gate.approvals.approve(pending[0].id, manager)
            run = await agent.resume(pending[0].run_id)
            assert str(run.status) == "finished" and "A2077" in run.final_text

    asyncio.run(check())


def test_demo_keep_and_db_together_are_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["demo", "--keep", str(tmp_path), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "--keep DIR or --db FILE" in result.output
