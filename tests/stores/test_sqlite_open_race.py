"""Many processes opening one new SQLite file at once, each then writing, all get a WAL store.

CI once saw one of eight durable workers started together fail its open with "database is locked"
while switching the file to WAL; the engine now reads the mode first and retries the switch until
its busy timeout. (This test did not reproduce that failure on a quiet machine: it guards the open.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPEN = """
import sys, time
from pathlib import Path
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
from maitre.storage.engine.sqlite import SQLiteEngine
engine = SQLiteEngine(sys.argv[1])
mode = engine.conn.execute("PRAGMA journal_mode").fetchone()[0]
engine.conn.execute("BEGIN IMMEDIATE")  # what a migration or a write holds while others open
engine.conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
engine.conn.execute("INSERT INTO t VALUES (1)")
time.sleep(0.05)
engine.conn.execute("COMMIT")
print(mode)
"""


def test_twelve_processes_opening_one_new_file_together_all_get_a_wal_store(tmp_path: Path) -> None:
    db, go = tmp_path / "new.db", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(db), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(12)
    ]
    time.sleep(1.0)  # every process imported maitre and waits at the line
    go.touch()
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 12, [err[-800:] for _, err in results]
    assert [out.strip() for out, _ in results] == ["wal"] * 12
