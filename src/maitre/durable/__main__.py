"""`python -m maitre.durable worker --db maitre.db --agent FILE:FACTORY --executor-id worker-1`

A durable worker process: builds the agent from `FILE:FACTORY` (called with the opened stores, as
`maitre runs worker` does), takes its executor lease, launches DBOS (recovering its own pending
workflows), then pass after pass recovers dead executors' workflows and resumes decided runs.
`--once` does one pass, waits for what it recovered (bounded by `--timeout`), and exits.
"""

from __future__ import annotations

import argparse
import logging
import sys

import anyio

from ..exceptions import UserError
from .worker import run_worker


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m maitre.durable")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="recover dead executors' runs and resume decided runs")
    worker.add_argument("--db", required=True, help="maitre's stores (a SQLite file or postgresql:// URL)")
    worker.add_argument("--agent", required=True, help="FILE:FACTORY building the agent from the stores")
    worker.add_argument("--system-db", help="DBOS's system database (default: beside --db)")
    worker.add_argument(
        "--executor-id", required=True, help="this worker's executor id (stable across restarts)"
    )
    worker.add_argument("--name", default="default", help="the durable agent's name")
    worker.add_argument("--lease-s", type=float, default=30.0)
    worker.add_argument("--poll-s", type=float, default=1.0)
    worker.add_argument("--once", action="store_true", help="one pass, wait for what it recovered, exit")
    worker.add_argument("--timeout", type=float, default=30.0, help="with --once: the longest wait")
    return parser


async def _worker(args: argparse.Namespace) -> int:
    recovered, resumed, waited = await run_worker(
        args.db,
        args.agent,
        executor_id=args.executor_id,
        system_db=args.system_db,
        name=args.name,
        lease_s=args.lease_s,
        poll_s=args.poll_s,
        once=args.once,
        timeout_s=args.timeout,
    )
    if args.once:
        print(
            f"recovered {len(recovered)} workflows, resumed {len(resumed)} runs, waited for {len(waited)}",
            file=sys.stderr,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        return anyio.run(_worker, args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
