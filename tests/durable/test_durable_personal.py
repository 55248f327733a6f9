"""Personal-data tools in a durable run: DBOS's records hold sealed text only, and forgetting reaches them."""

from __future__ import annotations

import base64
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from maitre import Principal, Toolbox
from maitre.agent import Agent, Limits
from maitre.durable import DurableAgent, launch, shutdown
from maitre.models.base import ModelRequest, ModelResponse
from maitre.stores import open_stores
from maitre.tools import Tool
from maitre.types import ToolCall

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif("personal" not in Tool.__dataclass_fields__, reason="needs Tool.personal"),
]
ALICE = Principal(user="alice", tenant="acme")
SECRET = "alice-allergy-penicillin"


class Model:
    name = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        done = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not done:
            return ModelResponse(
                tool_calls=[ToolCall(id="c0", name="recall", arguments={})], stop_reason="tool_use"
            )
        return ModelResponse(text=f"You told me: {done[0].content}")


def agent(stores: Any) -> Agent:
    box = Toolbox()

    @box.tool(personal=True)
    def recall() -> str:
        """What the user told me about their health."""
        return SECRET

    return Agent(Model(), box, stores=stores, limits=Limits(max_steps=3), notes=False)  # type: ignore[arg-type]


def recorded(path: Path) -> list[tuple[str, str]]:
    """(what, value) of everything DBOS keeps for the workflows: step outputs, inputs, outputs."""
    found: list[tuple[str, str]] = []
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT function_name, output FROM operation_outputs").fetchall()
        for table, column in (("workflow_status", "inputs"), ("workflow_input", "inputs")):
            rows += conn.execute(f"SELECT 'workflow inputs', {column} FROM {table}").fetchall()
        for table in ("workflow_status", "workflow_output"):
            rows += conn.execute(f"SELECT 'workflow output', output FROM {table}").fetchall()
    for name, value in rows:
        if value:
            found.append((name, str(pickle.loads(base64.b64decode(value)))))
    return found


async def test_recorded_steps_of_a_personal_tool_are_sealed_and_forgetting_reaches_them(
    tmp_path: Path,
) -> None:
    system = tmp_path / "m.dbos.sqlite"
    async with await open_stores(str(tmp_path / "m.db")) as stores:
        durable = DurableAgent(agent(stores), name="personal")
        launch(f"sqlite:///{system}", executor_id="personal-test")
        try:
            run = await durable.run("what did I tell you?", ALICE, run_id="p1")
            assert run.status == "finished" and SECRET in run.final_text
            records = recorded(system)
            names = {name for name, _ in records}
            assert {"maitre.model.complete", "maitre.gate.call", "workflow inputs"} <= names
            for name, value in records:
                assert SECRET not in value and "what did I tell you" not in value, name
            sealer = durable.sealer
            assert sealer is not None
            sealed = next(value for name, value in records if name == "maitre.gate.call")
            assert SECRET in await sealer.open(ALICE, sealed)
            assert await stores.erase_subject("acme", "alice")
            with pytest.raises(Exception, match="forgotten"):
                await sealer.open(ALICE, sealed)  # a replay can no longer read it
        finally:
            shutdown()
            durable.unregister()
    outputs = [value for name, value in recorded(system) if name == "workflow output"]
    assert outputs and all(SECRET not in value for value in outputs)  # the run's answer, sealed too
