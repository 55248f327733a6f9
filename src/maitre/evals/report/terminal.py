"""The terminal summary: rich tables built from a report document (the CLI prints them).

Every text that comes from a case or a model goes into a `rich.text.Text`, never into markup, so a
case named `[red]x[/red]` or a final answer full of brackets prints as it is.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..compare import CaseChange, Comparison
from .format import format_metric, grouped

__all__ = ["comparison_tables", "routing_tables", "run_header", "summary_tables"]

_MAX_DETAIL = 160
_ROUTES = ("CONTEXT", "RETRIEVE", "ACT")
"""`maitre.routing.ROUTES` in order: calls increase to the right, so below the diagonal is an
under-call and above it an over-call."""


def _short(text: str, limit: int = _MAX_DETAIL) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_header(document: dict[str, Any]) -> list[str]:
    """What ran, one fact a line: cases x trials, the agent, the model.

    Print each with `soft_wrap=True` (never wrapped nor cropped): an agent's path can be longer
    than the terminal, and a wrapped or cropped line loses "model test" where neither a reader nor
    grep finds it."""
    run = document.get("run", {})
    lines = [f"{run.get('cases', 0)} cases x {run.get('trials', 1)} trials"]
    routing = document.get("routing")
    if run.get("agent") or not routing:
        lines.append(f"agent {run.get('agent', '')}")
        lines.append(f"model {run.get('model', '') or '?'}")
    if routing:
        lines.append(f"router {routing.get('router', '')}")
    return lines


def summary_tables(document: dict[str, Any]) -> RenderableType:
    """Overall metrics by dimension, thresholds, and one line per case with what failed (what ran
    is `run_header`'s)."""
    routing = document.get("routing")
    metrics = Table(title="metrics")
    metrics.add_column("dimension")
    metrics.add_column("metric")
    metrics.add_column("value", justify="right")
    for title, rows in grouped(document.get("metrics", {})):
        for index, (name, value) in enumerate(rows):
            metrics.add_row(title if index == 0 else "", name, format_metric(name, value))
        if rows:
            metrics.add_section()
    parts: list[RenderableType] = [metrics]
    if routing:
        parts.extend(routing_tables(document))
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
    agent_ran = any(case.get("runs_agent", True) for case in document.get("cases", []))
    if agent_ran:
        cases.add_column("calls", justify="right")
    if routing:
        cases.add_column("route")
    cases.add_column("failed checks")
    for case in document.get("cases", []):
        failed: dict[str, str] = {}
        for trial in case.get("runs", []):
            for check in trial.get("checks", []):
                if not check["ok"]:
                    failed.setdefault(check["name"], check.get("detail", ""))
        style = "green" if case["passed"] == case["trials"] else ("red" if case["passed"] == 0 else "yellow")
        cells: list[RenderableType] = [
            Text(_short(case["id"], 40)),
            Text(f"{case['passed']}/{case['trials']}", style=style),
        ]
        if agent_ran:
            cells.append(format_metric("calls_per_trial", case["metrics"].get("calls_per_trial")))
        if routing:
            cells.append(_route_cell(case))
        cells.append(Text(_short("; ".join(f"{name}: {detail}" for name, detail in failed.items())) or "-"))
        cases.add_row(*cells)
    parts.append(cases)
    return Group(*parts)


def _route_cell(case: dict[str, Any]) -> Text:
    """The routes a case's trials chose (`ACT`, `CONTEXT x2, ACT x1`), red when any was wrong."""
    chosen: dict[str, int] = {}
    wrong = False
    for trial in case.get("runs", []):
        route = trial.get("route")
        if route:
            chosen[route["chosen"]] = chosen.get(route["chosen"], 0) + 1
            wrong = wrong or route["chosen"] != route["expected"]
    if not chosen:
        return Text("-" if not case.get("routed") else "error", style="" if not case.get("routed") else "red")
    text = next(iter(chosen)) if len(chosen) == 1 else ", ".join(f"{r} x{n}" for r, n in chosen.items())
    return Text(text, style="red" if wrong else "green")


def _route_change(case: CaseChange) -> Text:
    """`ACT -> CONTEXT, wants ACT` (red: B chose wrong), `CONTEXT -> ACT` (green: B is right)."""
    if not case.expected_route:
        return Text("-")
    after = case.route_after or "-"
    text = f"{case.route_before or '-'} -> {after}"
    if after != case.expected_route:
        return Text(f"{text}, wants {case.expected_route}", style="red")
    return Text(text, style="green" if case.route_before != after else "")


def routing_tables(document: dict[str, Any]) -> list[RenderableType]:
    """Seed 002's summary line (`18/18 = 100.0%, cost 0.0 ...`), the matrix it was priced under, and
    the route confusion matrix: rows the expected route, columns the chosen one."""
    routing = document.get("routing") or {}
    routed = int(routing.get("routed", 0))
    if not routed:
        return []
    correct, cost = int(routing.get("correct", 0)), float(routing.get("cost", 0.0))
    line = Text(
        f"routes: {correct}/{routed} = {100 * correct / routed:.1f}%, cost {cost:.1f} ({cost / routed:.2f} each), "
        f"{routing.get('under_calls', 0)} under-calls, {routing.get('over_calls', 0)} over-calls",
        no_wrap=True,
        overflow="ignore",
    )
    costs = routing.get("costs") or {}
    priced = Text(
        "cost[expected][chosen] (C/R/A): "
        + ", ".join(f"{t} {'/'.join(f'{costs.get(t, {}).get(c, 0):g}' for c in _ROUTES)}" for t in _ROUTES),
        style="dim",
        no_wrap=True,
        overflow="ignore",
    )
    counts = {(c["expected"], c["chosen"]): int(c["count"]) for c in document.get("route_confusion", [])}
    table = Table(title="routes: expected (rows) x chosen (columns)")
    table.add_column("expected")
    for route in _ROUTES:
        table.add_column(route, justify="right")
    table.add_column("right", justify="right")
    for row, expected in enumerate(_ROUTES):
        cells: list[RenderableType] = [expected]
        for column, chosen in enumerate(_ROUTES):
            count = counts.get((expected, chosen), 0)
            style = "green" if column == row else ("red" if column < row else "yellow")
            cells.append(Text(str(count), style=style if count else "dim"))
        total = sum(counts.get((expected, c), 0) for c in _ROUTES)
        cells.append(f"{counts.get((expected, expected), 0)}/{total}")
        table.add_row(*cells)
    legend = Text(
        "under-calls below the diagonal (wrong answers), over-calls above it (wasted calls)",
        style="dim",
        no_wrap=True,
        overflow="ignore",
    )
    return [line, priced, table, legend]


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
    routed = any(c.expected_route for c in comparison.cases)
    cases = Table(title=f"{fell} of {len(comparison.cases)} cases regressed")
    for column in ("case", "A", "B", *(["route A -> B"] if routed else []), "", "failing in B"):
        cases.add_column(column)
    for case in comparison.cases:
        unchanged = case.before == case.after and case.route_cost_before == case.route_cost_after
        if not show_all and not case.regression and unchanged and case.before is not None:
            continue
        label = "REGRESSION" if case.regression else ("added" if case.before is None else "")
        if case.after is None:
            label = "removed"
        cells: list[RenderableType] = [
            Text(_short(case.case_id, 40)),
            f"{case.before[0]}/{case.before[1]}" if case.before else "-",
            f"{case.after[0]}/{case.after[1]}" if case.after else "-",
        ]
        if routed:
            cells.append(_route_change(case))
        cells += [
            Text(label, style="bold red" if case.regression else "dim"),
            Text(", ".join(case.failing_checks) or "-"),
        ]
        cases.add_row(*cells)
    notes = [Text(note, style="yellow") for note in comparison.notes]
    return Group(metrics, cases, *notes)
