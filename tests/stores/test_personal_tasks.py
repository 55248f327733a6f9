"""MCP task results in a SQL task store are sealed under their owner's key (issue 16, item 1).

A task's result is a tool's output; kept in the clear it would outlive a forget. The SQLite task
store seals `result`, `error` and `input_requests` under the owner's subject key; sharing the
gate's database, the gate's `erase_subject` shreds them too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from maitre.storage import SQLiteStores
from maitre.storage.tasks import FORGOTTEN_RESULT, SQLiteTaskStore, TaskRecord


def _rows(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return repr(conn.execute("SELECT * FROM maitre_mcp_tasks").fetchall())


@pytest.mark.anyio
async def test_task_results_are_sealed_opened_for_their_owner_and_shredded_by_the_forget(
    tmp_path: Path,
) -> None:
    path = tmp_path / "maitre.db"
    stores = SQLiteStores(path)
    tasks = SQLiteTaskStore(path)
    await tasks.create(TaskRecord(task_id="t1", tenant="acme", user="asha", tool="slow", owner="p"))
    await tasks.create(TaskRecord(task_id="t2", tenant="acme", user="ravi", tool="slow", owner="p"))
    result = {"content": [{"type": "text", "text": "Asha lives in Pune-task-1"}], "isError": False}
    await tasks.update("t1", status="completed", result=result)
    await tasks.update(
        "t2", status="completed", result={"content": [{"type": "text", "text": "Chennai-task-2"}]}
    )
    await tasks.update("missing", status="completed", result=result)  # no such task: nothing written
    assert "Pune-task-1" not in _rows(path) and "Chennai-task-2" not in _rows(path)
    got = await tasks.get("t1")
    assert got is not None and got.result == result and got.status == "completed"

    await stores.erase_subject("acme", "asha")  # the gate's forget, on the same database
    gone = await tasks.get("t1")
    assert gone is not None and gone.result == FORGOTTEN_RESULT
    theirs = await tasks.get("t2")
    assert theirs is not None and "Chennai-task-2" in repr(theirs.result)
    # A task created with its result already set is sealed too.
    await tasks.create(
        TaskRecord(task_id="t3", tenant="acme", user="asha", tool="slow", owner="p", result=result)
    )
    assert "Pune-task-1" not in _rows(path)
    again = await tasks.get("t3")
    assert again is not None and again.result == result
    await tasks.close()
    await stores.close()


@pytest.mark.anyio
async def test_tasks_in_a_database_of_their_own_are_shredded_by_the_gates_forget(tmp_path: Path) -> None:
    """`maitre serve --tasks OTHER.db` hands the task store the gate's subject keys: the forget on
    the gate's database reaches a task result kept in another file."""
    stores = SQLiteStores(tmp_path / "maitre.db")
    tasks = SQLiteTaskStore(tmp_path / "tasks.db")
    tasks.subject_keys = stores.subject_keys
    result = {"content": [{"type": "text", "text": "Asha lives in Pune-task-9"}], "isError": False}
    await tasks.create(TaskRecord(task_id="t9", tenant="acme", user="asha", tool="slow", owner="p"))
    await tasks.update("t9", status="completed", result=result)
    assert "Pune-task-9" not in _rows(tmp_path / "tasks.db")
    got = await tasks.get("t9")
    assert got is not None and got.result == result
    await stores.erase_subject("acme", "asha")
    gone = await tasks.get("t9")
    assert gone is not None and gone.result == FORGOTTEN_RESULT
    await tasks.close()
    await stores.close()
