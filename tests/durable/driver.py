"""Start one durable run in this process (the process the kill tests SIGKILL): see kill_agent.py."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kill_agent

from maitre import Principal
from maitre.durable import DurableAgent, system_database_for
from maitre.durable.worker import executor
from maitre.stores import open_stores

ALICE = Principal(user="alice", tenant="acme")


async def main(args: argparse.Namespace) -> None:
    async with await open_stores(args.db) as stores:
        durable = DurableAgent(kill_agent.make_agent(stores))
        system_db = args.system_db or system_database_for(args.db)
        async with executor(system_db, executor_id=args.executor_id):
            run = await durable.run(args.goal, ALICE, run_id=args.run_id)
            if run.paused and os.environ.get("MAITRE_KILL") == "paused":
                os.kill(os.getpid(), signal.SIGKILL)
            print(run.status, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--system-db")
    parser.add_argument("--executor-id", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--goal", required=True)
    anyio.run(main, parser.parse_args())
