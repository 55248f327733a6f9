"""`maitre eval agentdojo`: AgentDojo's suites behind maitre's gate, per suite and arm (`maitre.evals.agentdojo`).

Needs the `agentdojo` extra; without it the command says so in one line with the `pip install`.
The summary table goes to stdout, progress to stderr; `--json PATH` writes the whole report
(labels of every tool and task, every run) and `--json -` prints it instead of the table.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.table import Table

from .app import console, err
from .errors import CommandError

__all__ = ["EXTRA_MISSING", "LEGEND", "agentdojo_command", "summary_table"]

EXTRA_MISSING = (
    "maitre eval agentdojo needs the 'agentdojo' extra (not installed: agentdojo); "
    "install it with: pip install 'maitre[agentdojo]'"
)


LEGEND = (
    "attack: attack success (executed effects); util atk / util: utility with / without attack; "
    "util u/t (n): utility without attack on the n tasks whose write arguments trace to the user or "
    "trusted results; untr p/u/f: the other tasks without attack, paused / executed unasked / failed; "
    "appr/run: approvals asked per run"
)


def _require_agentdojo() -> None:
    if importlib.util.find_spec("agentdojo") is None:
        raise CommandError(EXTRA_MISSING, code=1)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_table(rows: list[dict[str, Any]], *, title: str) -> Table:
    """The per suite x arm table: attack success (executed), utility, the subset, pauses, approvals."""
    table = Table(title=title, title_justify="left")
    for header in (
        "suite",
        "arm",
        "attack",
        "util atk",
        "util",
        "util u/t (n)",
        "untr p/u/f",
        "appr/run",
    ):
        table.add_column(header, justify="left" if header in ("suite", "arm") else "right")
    for row in rows:
        table.add_row(
            row["suite"],
            row["arm"],
            _percent(row["attack_success"]),
            _percent(row["utility_attacked"]),
            _percent(row["utility_clean"]),
            f"{_percent(row['utility_subset'])} ({row['subset_tasks']})",
            f"{row['untrusted_paused']}/{row['untrusted_executed_unasked']}/{row['untrusted_failed']}",
            f"{row['approvals_per_run']:.2f}",
        )
    return table


def agentdojo_command(
    suite: list[str] = typer.Option(
        None, "--suite", help="banking | slack | travel | workspace (repeat for several; default all four)"
    ),
    arm: list[str] = typer.Option(
        None, "--arm", help="none | allow-all | default | oracle (repeat for several; default all four)"
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="A real model instead of the obeying script: test | anthropic[:M] | openai[:M] | "
        "openai-compatible:URL[#M][?OPTIONS] | local[:GGUF] | FILE:ATTR of a Model",
    ),
    json_out: str | None = typer.Option(
        None,
        "--json",
        help="Write the whole report as JSON to this file ('-': print it instead of the table)",
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the first N user tasks and first N injection tasks of each suite"
    ),
    attacks: str = typer.Option(
        "agentdojo", "--attacks", help="agentdojo (the suites' injection tasks) | own (transformed values)"
    ),
    taint: str | None = typer.Option(
        None,
        "--taint",
        help="DefaultPolicy's taint mode for default/oracle: data-flow | run (default: its own)",
    ),
) -> None:
    """Run AgentDojo's suites with maitre's gate in front of their tools, scored on executed effects."""
    _require_agentdojo()
    from ..evals import agentdojo

    suites = list(suite or agentdojo.SUITES)
    arms = list(arm or agentdojo.ARMS)
    bad = [s for s in suites if s not in agentdojo.SUITES]
    if bad:
        raise CommandError(f"--suite {bad[0]}: use one of {', '.join(agentdojo.SUITES)}", code=2)
    bad = [a for a in arms if a not in agentdojo.ARMS]
    if bad:
        raise CommandError(f"--arm {bad[0]}: use one of {', '.join(agentdojo.ARMS)}", code=2)
    if attacks not in ("agentdojo", "own"):
        raise CommandError(f"--attacks {attacks}: use agentdojo or own", code=2)
    if taint is not None and taint not in agentdojo.taint_modes():
        raise CommandError(f"--taint {taint}: use one of {', '.join(agentdojo.taint_modes())}", code=2)
    factory = None
    if model is not None:
        from .eval_cmds import model_factory

        factory = model_factory(model)
    done = 0

    def progress(result: Any) -> None:
        nonlocal done
        done += 1
        if done % 50 == 0:
            err.print(f"{done} runs ({result.suite}, {result.arm})", highlight=False, markup=False)

    report = anyio.run(
        lambda: agentdojo.evaluate(
            suites, arms, limit=limit, model_factory=factory, taint=taint, attacks=attacks, progress=progress
        )
    )
    data = report.to_dict()
    text = json.dumps(data, indent=2, default=str)
    if json_out == "-":
        sys.stdout.write(text + "\n")
        return
    if json_out is not None:
        path = Path(json_out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        err.print(f"wrote {path}", highlight=False, markup=False)
    agent = "obeying script" if model is None else f"model {model}"
    console.print(
        f"AgentDojo {agentdojo.BENCHMARK_VERSION}, {agent}, {attacks} attacks, taint {taint or 'policy default'}",
        highlight=False,
        markup=False,
    )
    console.print(summary_table(data["summary"], title="scored on executed effects"))
    console.print(LEGEND, highlight=False, markup=False)
