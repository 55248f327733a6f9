"""The terminal summary: rich tables built from a report document (the CLI prints them).

Every text that comes from a case or a model goes into a `rich.text.Text`, never into markup, so a
case named `[red]x[/red]` or a final answer full of brackets prints as it is.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..compare import Comparison
from .format import format_metric, grouped

__all__ = ["comparison_tables", "summary_tables"]

_MAX_DETAIL = 160


def _short(text: str, limit: int = _MAX_DETAIL) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary_tables(document: dict[str, Any]) -> RenderableType:
    """Overall metrics by dimension, thresholds, and one line per case with what failed."""
    run = document.get("run", {})
    # What ran, one fact a line and never wrapped: an agent's path can be longer than the terminal,
    # and a wrapped title splits "model test" over two lines where neither a reader nor grep finds it.
    header = [
        Text(f"{run.get('cases', 0)} cases x {run.get('trials', 1)} trials", no_wrap=True, overflow="ignore"),
        Text(f"agent {run.get('agent', '')}", no_wrap=True, overflow="ignore"),
        Text(f"model {run.get('model', '') or '?'}", no_wrap=True, overflow="ignore"),
    ]
    metrics = Table(title="metrics")
    metrics.add_column("dimension")
    metrics.add_column("metric")
    metrics.add_column("value", justify="right")
    for title, rows in grouped(document.get("metrics", {})):
        for index, (name, value) in enumerate(rows):
            metrics.add_row(title if index == 0 else "", name, format_metric(name, value))
        if rows:
            metrics.add_section()
    parts: list[RenderableType] = [*header, metrics]
    if document.get("thresholds"):
        table = Table(title="thresholds")
        for column in ("metric", "needs", "got", "result"):
            table.add_column(column)
        for row in document["thresholds"]:
            table.add_row(
                row["metric"],
                f"{row['op']} {row['value']:g}",
                format_metric(row["metric"], row["actual"]),
                Text("met", style="green") if row["ok"] else Text("MISSED", style="bold red"),
            )
        parts.append(table)
    cases = Table(title="cases")
    cases.add_column("case", no_wrap=True)
    cases.add_column("passed", justify="right")
    cases.add_column("calls", justify="right")
    cases.add_column("failed checks")
    for case in document.get("cases", []):
        failed: dict[str, str] = {}
        for trial in case.get("runs", []):
            for check in trial.get("checks", []):
                if not check["ok"]:
                    failed.setdefault(check["name"], check.get("detail", ""))
        style = "green" if case["passed"] == case["trials"] else ("red" if case["passed"] == 0 else "yellow")
        cases.add_row(
            Text(_short(case["id"], 40)),
            Text(f"{case['passed']}/{case['trials']}", style=style),
            format_metric("calls_per_trial", case["metrics"].get("calls_per_trial")),
            Text(_short("; ".join(f"{name}: {detail}" for name, detail in failed.items())) or "-"),
        )
    parts.append(cases)
    return Group(*parts)


def comparison_tables(comparison: Comparison, *, show_all: bool = False) -> RenderableType:
    """Metrics and cases that changed from A to B; regressions in red."""
    regressed = sum(m.regression for m in comparison.metrics)
    metrics = Table(title=f"{regressed} of {len(comparison.metrics)} metrics regressed")
    for column in ("metric", "A", "B", "change", ""):
        metrics.add_column(column)
    for change in comparison.metrics:
        if not show_all and not change.regression and change.before == change.after:
            continue
        delta = change.delta
        metrics.add_row(
            change.metric,
            format_metric(change.metric, change.before),
            format_metric(change.metric, change.after),
            "-" if delta is None else f"{delta:+.4g}",
            Text("REGRESSION", style="bold red") if change.regression else Text(""),
        )
    fell = sum(c.regression for c in comparison.cases)
    cases = Table(title=f"{fell} of {len(comparison.cases)} cases regressed")
    for column in ("case", "A", "B", "", "failing in B"):
        cases.add_column(column)
    for case in comparison.cases:
        if not show_all and not case.regression and case.before == case.after and case.before is not None:
            continue
        label = "REGRESSION" if case.regression else ("added" if case.before is None else "")
        if case.after is None:
            label = "removed"
        cases.add_row(
            Text(_short(case.case_id, 40)),
            f"{case.before[0]}/{case.before[1]}" if case.before else "-",
            f"{case.after[0]}/{case.after[1]}" if case.after else "-",
            Text(label, style="bold red" if case.regression else "dim"),
            Text(", ".join(case.failing_checks) or "-"),
        )
    return Group(metrics, cases)
