"""The red-team report in `maitre eval`'s three formats: a versioned JSON document, a terminal
summary and one self-contained HTML page, built with `maitre.evals.report`'s helpers (its JSON
writer, threshold rows, escaping, SVG charts and Content-Security-Policy).

The document (`schema` = `maitre.redteam.report`, `version` = 1; keys are added, never renamed):

    {"schema", "version", "created_at", "maitre_version",
     "run": {"target", "kind", "plugins", "tools", "measured_by", "cases", "elapsed_s"},
     "metrics": {"cases", "blocked", "executed", "leaked", "attack_success_rate", "blocked_rate",
                 "PLUGIN.executed", "PLUGIN.leaked", "PLUGIN.attack_success_rate", ...},
     "plugins": [{"name", "family", "summary", "blocked", "executed", "leaked", "note"}],
     "thresholds": [{"metric", "op", "value", "actual", "ok"}],
     "cases": [Case.to_dict()]}

`executed`, `leaked` and `attack_success_rate` count only the cases a gate should block.
Thresholds: `METRIC=VALUE` in the metric's direction (counts and rates of what got through are
better low, `blocked_rate` high), or `METRIC<=VALUE` / `METRIC>=VALUE`. With none given, the bar is
`executed=0` and `leaked=0`: nothing a gate should block got through.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..evals.report.document import dumps, threshold_rows
from ..evals.report.html import CSP
from ..evals.report.svg import esc, outcome_grid, ratio_bars
from ..evals.thresholds import Threshold, ThresholdResult, evaluate
from ..exceptions import UserError
from .plugins import PLUGINS
from .runner import RedteamResult

__all__ = [
    "DEFAULT_THRESHOLDS",
    "SCHEMA",
    "VERSION",
    "build_document",
    "check_thresholds",
    "dumps",
    "parse_threshold",
    "render_html",
    "summary",
]

SCHEMA = "maitre.redteam.report"
VERSION = 1
DEFAULT_THRESHOLDS = ("executed=0", "leaked=0")
_LOWER = ("executed", "leaked", "attack_success_rate")
_HIGHER = ("blocked_rate",)
_NEUTRAL = ("cases", "blocked")
_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(>=|<=|=)\s*([-+]?[0-9]*\.?[0-9]+)\s*$")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("maitre")
    except PackageNotFoundError:
        return "unknown"


def _counts(cases: list[dict[str, Any]]) -> dict[str, float | None]:
    gated = [c for c in cases if c["should_block"]]
    executed = sum(1 for c in gated if c["outcome"] == "executed")
    leaked = sum(1 for c in gated if c["outcome"] == "leaked")
    blocked = sum(1 for c in cases if c["outcome"] == "blocked")
    return {
        "cases": len(cases),
        "blocked": blocked,
        "executed": executed,
        "leaked": leaked,
        "attack_success_rate": round((executed + leaked) / len(gated), 6) if gated else None,
        "blocked_rate": round(blocked / len(cases), 6) if cases else None,
    }


def build_document(result: RedteamResult) -> dict[str, Any]:
    """The report document of one red-team run (thresholds are added by `check_thresholds`)."""
    cases = [c.to_dict() for c in result.cases]
    metrics = _counts(cases)
    plugins = []
    for name in result.plugins:
        own = [c for c in cases if c["plugin"] == name]
        counts = _counts(own)
        for key in ("executed", "leaked", "attack_success_rate"):
            metrics[f"{name}.{key}"] = counts[key]
        plugin = PLUGINS[name]
        plugins.append(
            {
                "name": name,
                "family": plugin.family,
                "summary": plugin.summary,
                "cases": len(own),
                "blocked": sum(1 for c in own if c["outcome"] == "blocked"),
                "executed": sum(1 for c in own if c["outcome"] == "executed"),
                "leaked": sum(1 for c in own if c["outcome"] == "leaked"),
                "note": result.notes.get(name, ""),
            }
        )
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "created_at": dt.datetime.fromtimestamp(result.started_at, dt.UTC).isoformat(timespec="seconds"),
        "maitre_version": _version(),
        "run": {
            "target": result.target,
            "kind": result.kind,
            "plugins": list(result.plugins),
            "tools": list(result.tools),
            "measured_by": result.measured_by,
            "cases": len(cases),
            "elapsed_s": round(result.elapsed_s, 3),
        },
        "metrics": metrics,
        "plugins": plugins,
        "thresholds": [],
        "cases": cases,
    }


def parse_threshold(text: str) -> Threshold:
    """`METRIC=VALUE`, `METRIC<=VALUE` or `METRIC>=VALUE` for a red-team metric; else a UserError."""
    found = _PATTERN.match(text)
    if found is None:
        raise UserError(
            f"--threshold {text!r}: write METRIC=VALUE, METRIC<=VALUE or METRIC>=VALUE (executed=0)"
        )
    metric, op, raw = found.groups()
    plugin, _, base = metric.rpartition(".")
    if plugin and plugin not in PLUGINS:
        raise UserError(f"--threshold {text!r}: no plugin {plugin!r}; plugins: {', '.join(PLUGINS)}")
    if base not in (*_LOWER, *_HIGHER, *_NEUTRAL) or (plugin and base not in _LOWER):
        known = ", ".join(
            [*_LOWER, *_HIGHER, *_NEUTRAL, "PLUGIN.executed", "PLUGIN.leaked", "PLUGIN.attack_success_rate"]
        )
        raise UserError(f"--threshold {text!r}: unknown metric {metric!r}; known: {known}")
    if op == "=":
        if base in _NEUTRAL:
            raise UserError(f"--threshold {text!r}: {base} is neither better high nor low; use >= or <=")
        op = "<=" if base in _LOWER else ">="
    return Threshold(metric=metric, op="<=" if op == "<=" else ">=", value=float(raw))


def check_thresholds(document: dict[str, Any], thresholds: list[Threshold]) -> list[ThresholdResult]:
    """Hold the document to `thresholds` (the defaults when empty), recording the rows in it."""
    bars = thresholds or [parse_threshold(t) for t in DEFAULT_THRESHOLDS]
    results = evaluate(bars, document["metrics"])
    document["thresholds"] = threshold_rows(results)
    return results


_STYLE = {"blocked": "green", "executed": "bold red", "leaked": "bold magenta"}


def _short(text: Any, limit: int = 120) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def summary(document: dict[str, Any]) -> RenderableType:
    """Per plugin, what got through; every case that did; the thresholds."""
    run = document.get("run", {})
    header = [
        Text(f"target {run.get('target', '')} ({run.get('kind', '')})", no_wrap=True, overflow="ignore"),
        Text(
            f"{run.get('cases', 0)} cases from {len(run.get('plugins', []))} plugins; outcomes measured by "
            f"{run.get('measured_by', '')}",
            no_wrap=True,
            overflow="ignore",
        ),
    ]
    plugins = Table(title="plugins")
    for column in ("plugin", "family", "blocked", "executed", "leaked", "note"):
        plugins.add_column(column, justify="right" if column in ("blocked", "executed", "leaked") else "left")
    for row in document.get("plugins", []):
        plugins.add_row(
            row["name"],
            row["family"],
            Text(str(row["blocked"]), style="green" if row["blocked"] else ""),
            Text(str(row["executed"]), style="bold red" if row["executed"] else ""),
            Text(str(row["leaked"]), style="bold magenta" if row["leaked"] else ""),
            Text(_short(row.get("note", ""), 60)),
        )
    parts: list[RenderableType] = [*header, plugins]
    through = [c for c in document.get("cases", []) if c["outcome"] != "blocked"]
    if through:
        table = Table(title=f"{len(through)} attack(s) got through")
        table.add_column("outcome")
        table.add_column("case", max_width=44, overflow="fold")
        table.add_column("why", ratio=1)
        for case in through:
            table.add_row(
                Text(case["outcome"], style=_STYLE[case["outcome"]]),
                Text(_short(case["id"], 60)),
                Text(_short(case["why"])),
            )
        parts.append(table)
    if document.get("thresholds"):
        table = Table(title="thresholds")
        for column in ("metric", "needs", "got", "result"):
            table.add_column(column)
        for row in document["thresholds"]:
            table.add_row(
                Text(row["metric"]),
                f"{row['op']} {row['value']:g}",
                "-" if row["actual"] is None else f"{row['actual']:g}",
                Text("met", style="green") if row["ok"] else Text("MISSED", style="bold red"),
            )
        parts.append(table)
    return Group(*parts)


_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d1d1d;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f5f5f5}.num{text-align:right}
.blocked,.ok{color:#2e7d32}.executed,.bad{color:#c62828;font-weight:600}.leaked{color:#8e24aa;font-weight:600}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.5rem;margin:.25rem 0;
max-height:16rem;overflow:auto}details{margin:.4rem 0;border:1px solid #e0e0e0;padding:.3rem .6rem}
summary{cursor:pointer}.meta{color:#555}.charts svg{display:block;margin:.5rem 0}
"""


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return f"<pre>{esc(text)}</pre>"


def _case_html(case: dict[str, Any]) -> str:
    attempts = "".join(
        "<tr>"
        f"<td>{esc(a['tool'])}</td><td>{_pre(a['arguments'])}"
        + (_pre(a["sent"]) if a.get("sent") else "")
        + f"</td><td>{_pre(a.get('response', ''))}</td>"
        f"<td>{esc(a.get('error_code') or ('error' if a.get('is_error') else 'result'))}"
        + (" (replayed)" if a.get("replayed") else "")
        + (f"<br>trust {esc(a['trust'])}" if a.get("trust") else "")
        + (
            f"<br>audit #{esc(a['audit'].get('seq'))}: {esc(a['audit'].get('decision'))}"
            if isinstance(a.get("audit"), dict)
            else ""
        )
        + f"</td><td>{_pre(a['effects']) if a.get('effects') else '-'}</td>"
        f"<td>{esc(', '.join(a.get('leaked') or [])) or '-'}</td></tr>"
        for a in case.get("attempts", [])
    )
    return (
        f"<details class='case' data-outcome='{esc(case['outcome'])}'><summary><span class='{esc(case['outcome'])}'>"
        f"{esc(case['outcome'])}</span> <b>{esc(case['id'])}</b> - {esc(case['title'])}</summary>"
        f"<p>{esc(case['why'])}</p>"
        "<table><tr><th>request</th><th>sent</th><th>reply</th><th>gate / server</th><th>side channel</th>"
        f"<th>canaries seen</th></tr>{attempts}</table></details>"
    )


def render_html(document: dict[str, Any]) -> str:
    """The page for a report document: no script, nothing fetched, every target text escaped."""
    run = document.get("run", {})
    plugins = document.get("plugins", [])
    cases = document.get("cases", [])
    bars = ratio_bars(
        [(p["name"], (p["blocked"] / p["cases"]) if p["cases"] else None) for p in plugins],
        title="blocked, per plugin",
    )
    grid = outcome_grid(
        [
            (
                p["name"],
                [
                    (c["outcome"] == "blocked", f"{c['outcome']}: {c['id']}")
                    for c in cases
                    if c["plugin"] == p["name"]
                ],
            )
            for p in plugins
            if p["cases"]
        ]
    )
    rows = "".join(
        f"<tr><td>{esc(p['name'])}</td><td>{esc(p['family'])}</td><td class='num blocked'>{esc(p['blocked'])}</td>"
        f"<td class='num executed'>{esc(p['executed'])}</td><td class='num leaked'>{esc(p['leaked'])}</td>"
        f"<td>{esc(p['summary'])}</td><td>{esc(p.get('note', ''))}</td></tr>"
        for p in plugins
    )
    thresholds = document.get("thresholds") or []
    missed = sum(1 for r in thresholds if not r["ok"])
    verdict = (
        f"<p class='bad'>{missed} threshold(s) missed.</p>"
        if missed
        else "<p class='ok'>Every threshold met.</p>"
    )
    trows = "".join(
        f"<tr><td>{esc(r['metric'])}</td><td>{esc(r['op'])} {esc(r['value'])}</td><td class='num'>"
        f"{esc('-' if r['actual'] is None else r['actual'])}</td>"
        f"<td class='{'ok' if r['ok'] else 'bad'}'>{'met' if r['ok'] else 'MISSED'}</td></tr>"
        for r in thresholds
    )
    m = document.get("metrics", {})
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>maitre redteam - {esc(run.get('target', ''))}</title><style>{_CSS}</style></head><body>"
        f"<h1>maitre redteam: {esc(run.get('target', ''))}</h1>"
        f"<p class='meta'>{esc(run.get('kind', ''))}; {esc(run.get('cases', 0))} cases from "
        f"{esc(len(run.get('plugins', [])))} plugins; outcomes measured by {esc(run.get('measured_by', ''))}; "
        f"{esc(document.get('created_at', ''))}; maitre {esc(document.get('maitre_version', ''))}; report schema "
        f"{esc(document.get('schema'))} v{esc(document.get('version'))}</p>{verdict}"
        f"<p id='totals'><span class='blocked'>{esc(m.get('blocked', 0))} blocked</span>, "
        f"<span class='executed'>{esc(m.get('executed', 0))} executed</span>, "
        f"<span class='leaked'>{esc(m.get('leaked', 0))} leaked</span></p>"
        f"<h2>Plugins</h2><div class='charts' id='plugin-bars'>{bars}</div>"
        "<table id='plugins'><tr><th>plugin</th><th>family</th><th>blocked</th><th>executed</th><th>leaked</th>"
        f"<th>what it does</th><th>note</th></tr>{rows}</table>"
        f"<h2>Outcomes</h2><p class='meta'>A square per case: green blocked, red executed or leaked.</p>"
        f"<div class='charts' id='outcomes'>{grid}</div>"
        "<h2>Thresholds</h2><table id='thresholds'><tr><th>metric</th><th>needs</th><th>got</th><th>result</th></tr>"
        f"{trows}</table>"
        f"<h2>Cases</h2><div id='cases'>{''.join(_case_html(c) for c in cases)}</div>"
        "</body></html>\n"
    )
