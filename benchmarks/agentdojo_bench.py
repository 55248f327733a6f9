"""AgentDojo's four suites with maitre's gate in front of their tools, scored on executed effects.

The agent is the obeying script (`maitre.evals.agentdojo.ObeyingScript`): each user task's
ground-truth calls, and the injection task's as soon as a result shows the injection - an upper
bound for a model that obeys every injection. Per suite x arm it prints attack success (executed),
utility with and without attack, utility on the tasks whose write arguments trace to the user or
trusted results (labelled per task by a script from the ground truth), what the other tasks did
without attack (paused / executed unasked / failed) and approvals per run. A second table runs
our own attacks (`own_attacks`: attacker values transformed, or made of trusted words).

The `none` and `allow-all` arms do not depend on taint and run once; `default` and `oracle` run in
each taint mode this maitre's `DefaultPolicy` has (`data-flow`, and the whole-run rule `run`).
Anchor: the `none` arm, AgentDojo's own setting (no gate).

Usage: `python benchmarks/agentdojo_bench.py [--limit N] [--suite S ...] [--json PATH]`;
`--quick` (or `make bench` with MAITRE_BENCH_QUICK=1) runs the first 3 user and injection tasks.
Needs `pip install 'maitre[agentdojo]'`; without it the benchmark says so and skips.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

__all__ = ["main"]


def main(quick: bool = False) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N user and injection tasks per suite")
    parser.add_argument("--suite", action="append", default=[], help="banking | slack | travel | workspace")
    parser.add_argument("--json", type=Path, default=None, help="write every report here as JSON")
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args(sys.argv[1:])
    quick = quick or options.quick or os.environ.get("MAITRE_BENCH_QUICK") == "1"
    if importlib.util.find_spec("agentdojo") is None:
        print("agentdojo is not installed: pip install 'maitre[agentdojo]' (skipped)")
        return
    import anyio
    from rich.console import Console

    from maitre.cli.agentdojo_cmds import LEGEND, summary_table
    from maitre.evals import agentdojo

    console = Console(width=max(Console().width, 110))
    limit = options.limit if options.limit is not None else (3 if quick else None)
    suites = options.suite or list(agentdojo.SUITES)
    console.print(f"AgentDojo {agentdojo.BENCHMARK_VERSION}, obeying script, limit {limit or 'none'}")
    console.print(f"label rule: {agentdojo.LABEL_RULE}", highlight=False)
    rows = []
    reports = []
    plans: list[tuple[str | None, tuple[str, ...]]] = [(None, ("none", "allow-all"))]
    plans += [(mode, ("default", "oracle")) for mode in agentdojo.taint_modes()]
    for mode, arms in plans:
        started = time.perf_counter()
        report = anyio.run(lambda: agentdojo.evaluate(suites, arms, limit=limit, taint=mode))  # noqa: B023
        elapsed = time.perf_counter() - started
        for row in report.to_dict()["summary"]:
            row["arm"] = row["arm"] if mode is None else f"{row['arm']} ({mode})"
            rows.append(row)
        reports.append(report.to_dict())
        console.print(f"taint {mode or '-'}: {len(report.results)} runs in {elapsed:.1f} s", highlight=False)
    rows.sort(key=lambda row: (suites.index(row["suite"]), row["arm"]))
    console.print(summary_table(rows, title="scored on executed effects"))
    console.print(LEGEND, highlight=False)
    own_rows = []
    for mode, arms in plans:
        own = anyio.run(lambda: agentdojo.evaluate(suites, arms, limit=limit, taint=mode, attacks="own"))  # noqa: B023
        for row in own.to_dict()["summary"]:
            if row["attacked_runs"]:
                row["arm"] = row["arm"] if mode is None else f"{row['arm']} ({mode})"
                own_rows.append(row)
        reports.append(own.to_dict())
    own_rows.sort(key=lambda row: (suites.index(row["suite"]), row["arm"]))
    console.print(
        summary_table(own_rows, title="our own attacks (spaced IBAN, trusted words, base64 egress)")
    )
    if options.json is not None:
        options.json.write_text(json.dumps(reports, indent=2, default=str), encoding="utf-8")
        console.print(f"wrote {options.json}")


if __name__ == "__main__":
    main()
