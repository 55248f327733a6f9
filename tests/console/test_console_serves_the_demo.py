"""The README's path, as a newcomer takes it: `maitre demo --keep DIR`, `maitre console add-user`,
`maitre console --resume-agent maitre.demo:console_agent`, sign in, approve; the run finishes by itself.

Real processes: the CLI in a subprocess, the console over HTTP on 127.0.0.1, the worker inside it.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from maitre.stores import open_stores

MAITRE = [sys.executable, "-m", "maitre.cli"]
PASSWORD = "correct horse battery staple"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MAITRE, *args], input=stdin, capture_output=True, text=True, timeout=120)


def pending(db: Path) -> list[tuple[str, str | None, str]]:
    async def read() -> list[tuple[str, str | None, str]]:
        async with await open_stores(str(db)) as stores:
            return [(r.id, r.run_id, r.status) for r in await stores.approvals.list(status="pending")]

    return asyncio.run(read())


def run_status(db: Path, run_id: str) -> str | None:
    async def read() -> str | None:
        async with await open_stores(str(db)) as stores:
            saved = await stores.runs.load(run_id)
            return None if saved is None else saved.status

    return asyncio.run(read())


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


@pytest.mark.slow
def test_a_newcomer_decides_the_demos_waiting_refund_and_the_run_finishes_by_itself(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    demo = run_cli("demo", "--model", "scripted", "--keep", str(folder))
    assert demo.returncode == 0, demo.stderr
    db = folder / "maitre.db"
    [(approval_id, run_id, _)] = pending(db)
    assert run_id is not None
    added = run_cli(
        "console", "add-user", "maria", "--tenant", "demo", "--role", "approver",
        "--stores", str(db), "--password-stdin", stdin=PASSWORD + "\n",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr

    port = free_port()
    env = {**os.environ, "MAITRE_CONSOLE_SECRET": "a-test-secret-of-enough-length"}
    server = subprocess.Popen(
        [*MAITRE, "console", "--stores", str(db), "--port", str(port),
         "--resume-agent", "maitre.demo:console_agent"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as web:
            for _ in range(200):
                try:
                    form = web.get("/sign-in")
                    break
                except httpx.ConnectError:
                    time.sleep(0.05)
            else:
                pytest.fail("the console did not start")
            signed = web.post(
                "/sign-in", data={"csrf": csrf_of(form.text), "name": "maria", "password": PASSWORD}
            )
            assert signed.status_code == 303
            inbox = web.get("/")
            assert "issue_refund" in inbox.text and "A2077" in inbox.text
            page = web.get(f"/approvals/{approval_id}")
            assert page.status_code == 200
            decided = web.post(f"/approvals/{approval_id}/approve", data={"csrf": csrf_of(page.text)})
            assert decided.status_code == 200, decided.text
            assert "maria (via=console)" in decided.text
        deadline = time.monotonic() + 20
        while run_status(db, run_id) != "finished" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert run_status(db, run_id) == "finished"
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=10)
    assert "resuming decided runs with maitre.demo:console_agent" in stderr

    async def check() -> None:
        async with await open_stores(str(db)) as stores:
            from maitre.agent.run import Run

            saved = await stores.runs.load(run_id)
            assert saved is not None
            run = Run.from_json(saved.state_json)
            assert "A2077" in run.final_text and "800.00" in run.final_text
            entries = (
                [e async for e in stores.audit.iter_entries()]
                if hasattr(stores.audit, "iter_entries")
                else []
            )
            del entries

    asyncio.run(check())
