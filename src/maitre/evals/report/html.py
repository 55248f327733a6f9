"""The HTML report: one self-contained page (inline CSS and SVG, no script, nothing fetched).

Case files and model output are untrusted, so every text they contribute is escaped
(`svg.esc`), and the page carries a Content-Security-Policy that forbids scripts and every
external load: were an escape ever missed, an injected `<script>` or `<img src=...>` still could
not run or call out. Details per case use `<details>`, which needs no script.
"""

from __future__ import annotations

import json
from typing import Any

from .format import format_metric, grouped, is_ratio
from .svg import confusion_matrix, esc, grouped_bars, outcome_grid, ratio_bars

__all__ = ["CSP", "render_html"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d1d1d;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f5f5f5}.num{text-align:right}
.ok{color:#2e7d32}.bad{color:#c62828;font-weight:600}pre{white-space:pre-wrap;word-break:break-word;
background:#f7f7f7;padding:.5rem;margin:.25rem 0;max-height:20rem;overflow:auto}
details{margin:.4rem 0;border:1px solid #e0e0e0;padding:.3rem .6rem}summary{cursor:pointer}
.meta{color:#555}.charts svg{display:block;margin:.5rem 0}
"""


def _metrics_table(document: dict[str, Any]) -> str:
    rows = []
    for title, metrics in grouped(document.get("metrics", {})):
        for index, (name, value) in enumerate(metrics):
            head = f'<th rowspan="{len(metrics)}">{esc(title)}</th>' if index == 0 else ""
            rows.append(
                f'<tr>{head}<td>{esc(name)}</td><td class="num">{esc(format_metric(name, value))}</td></tr>'
            )
    return "<table><tr><th>dimension</th><th>metric</th><th>value</th></tr>" + "".join(rows) + "</table>"


def _thresholds(document: dict[str, Any]) -> str:
    rows = document.get("thresholds") or []
    if not rows:
        return "<p class='meta'>No thresholds were set.</p>"
    body = "".join(
        f"<tr><td>{esc(r['metric'])}</td><td>{esc(r['op'])} {esc(r['value'])}</td>"
        f"<td class='num'>{esc(format_metric(r['metric'], r['actual']))}</td>"
        f"<td class='{'ok' if r['ok'] else 'bad'}'>{'met' if r['ok'] else 'MISSED'}</td></tr>"
        for r in rows
    )
    return "<table><tr><th>metric</th><th>needs</th><th>got</th><th>result</th></tr>" + body + "</table>"


def _confusion(document: dict[str, Any]) -> str:
    cells = document.get("confusion") or []
    if not cells:
        return "<p class='meta'>No case said which tools to call.</p>"
    expected = sorted({c["expected"] for c in cells})
    chosen = sorted({c["chosen"] for c in cells})
    for name in expected:  # the diagonal first, in the same order on both axes
        if name not in chosen:
            chosen.append(name)
    chosen = sorted(chosen, key=lambda n: (n not in expected, expected.index(n) if n in expected else 0, n))
    counts = {(c["expected"], c["chosen"]): int(c["count"]) for c in cells}
    return confusion_matrix(expected, chosen, counts)


_ROUTES = ["CONTEXT", "RETRIEVE", "ACT"]


def _routing(document: dict[str, Any]) -> str:
    """Seed 002's numbers, the matrix they were priced under and the route confusion matrix."""
    routing = document.get("routing")
    if not routing or not routing.get("routed"):
        return "<p class='meta'>No case set an expected_route.</p>"
    routed, correct, cost = int(routing["routed"]), int(routing["correct"]), float(routing["cost"])
    costs = routing.get("costs") or {}
    matrix = "".join(
        f"<tr><th>{esc(t)}</th>"
        + "".join(f"<td class='num'>{esc(f'{costs.get(t, {}).get(c, 0):g}')}</td>" for c in _ROUTES)
        + "</tr>"
        for t in _ROUTES
    )
    counts = {(c["expected"], c["chosen"]): int(c["count"]) for c in document.get("route_confusion", [])}
    return (
        f"<p id='route-summary'>router <code>{esc(routing.get('router', ''))}</code>: {correct}/{routed} = "
        f"{100 * correct / routed:.1f}% right, cost {cost:.1f} ({cost / routed:.2f} each), "
        f"<span class='{'bad' if routing.get('under_calls') else 'ok'}'>{esc(routing.get('under_calls', 0))} "
        f"under-calls</span> (a wrong, confident answer), {esc(routing.get('over_calls', 0))} over-calls "
        "(a wasted call).</p>"
        "<p class='meta'>Priced under cost[expected][chosen]:</p><table><tr><th>expected \\ chosen</th>"
        + "".join(f"<th>{esc(c)}</th>" for c in _ROUTES)
        + f"</tr>{matrix}</table>"
        f"<div class='charts' id='route-confusion'>{confusion_matrix(_ROUTES, _ROUTES, counts)}</div>"
        "<p class='meta'>Rows: the expected route; columns: the route chosen. Below the diagonal are "
        "under-calls, above it over-calls.</p>"
    )


def _route_rows(run: dict[str, Any]) -> str:
    route = run.get("route")
    if not isinstance(route, dict):
        return ""
    probabilities = ", ".join(
        f"{esc(r)} {float(p):.2f}" for r, p in (route.get("probabilities") or {}).items()
    )
    ok = route.get("chosen") == route.get("expected")
    return (
        "<table><tr><th>expected route</th><th>chosen</th><th>cost</th><th>probabilities</th><th>reason</th></tr>"
        f"<tr><td>{esc(route.get('expected'))}</td><td class='{'ok' if ok else 'bad'}'>{esc(route.get('chosen'))}"
        f"</td><td class='num'>{esc(route.get('cost'))}</td><td>{probabilities or '-'}</td>"
        f"<td>{esc(route.get('reason') or '-')}</td></tr></table>"
    )


def _failures(run: dict[str, Any]) -> str:
    return "; ".join(f"{c['name']}: {c.get('detail', '')}" for c in run.get("checks", []) if not c["ok"])


def _case_details(case: dict[str, Any]) -> str:
    verdict = "ok" if case["passed"] == case["trials"] else "bad"
    runs = []
    for run in case.get("runs", []):
        checks = "".join(
            f"<tr><td>{esc(c['name'])}</td><td class='{'ok' if c['ok'] else 'bad'}'>{'ok' if c['ok'] else 'FAILED'}"
            f"</td><td>{esc(c.get('detail', ''))}</td></tr>"
            for c in run.get("checks", [])
        )
        calls = "".join(
            f"<tr><td class='num'>{esc(c['step'])}</td><td>{esc(c['tool'])}</td>"
            f"<td><pre>{esc(json.dumps(c.get('arguments'), ensure_ascii=False, indent=1))}</pre></td>"
            f"<td>{esc(c.get('decision'))}</td><td>{esc(c.get('error_code') or '-')}</td></tr>"
            for c in run.get("calls", [])
        )
        verdict_span = (
            f"<h4>trial {esc(run['trial'] + 1)}: <span class='{'ok' if run.get('passed') else 'bad'}'>"
            f"{'passed' if run.get('passed') else 'failed'}</span> "
        )
        if run.get("ran_agent", True) is False:  # a routing case: the decision, no agent run
            runs.append(
                verdict_span
                + "<span class='meta'>(routed)</span></h4>"
                + f"<table><tr><th>check</th><th></th><th>detail</th></tr>{checks}</table>"
                + _route_rows(run)
                + (f"<p class='bad'>{esc(run['error'])}</p>" if run.get("error") else "")
            )
            continue
        runs.append(
            verdict_span + f"<span class='meta'>({esc(run.get('status'))}, {esc(run.get('stop_reason'))}, "
            f"{esc(run.get('steps'))} steps)</span></h4>"
            f"<table><tr><th>check</th><th></th><th>detail</th></tr>{checks}</table>"
            + _route_rows(run)
            + (
                f"<table><tr><th>step</th><th>tool</th><th>arguments</th><th>decision</th><th>error</th></tr>"
                f"{calls}</table>"
                if calls
                else "<p class='meta'>No tool calls.</p>"
            )
            + f"<p>final text:</p><pre>{esc(run.get('final_text', ''))}</pre>"
            + (f"<p class='bad'>{esc(run['error'])}</p>" if run.get("error") else "")
        )
    return (
        f"<details><summary><b>{esc(case['id'])}</b> - <span class='{verdict}'>{esc(case['passed'])}/"
        f"{esc(case['trials'])} passed</span> <span class='meta'>{esc(case.get('source', ''))}</span></summary>"
        f"<p>input:</p><pre>{esc(case['input'])}</pre>"
        f"<p>expected:</p><pre>{esc(json.dumps(case.get('expectation'), ensure_ascii=False, indent=1))}</pre>"
        + "".join(runs)
        + "</details>"
    )


def render_html(document: dict[str, Any]) -> str:
    """The page for a report document."""
    run = document.get("run", {})
    metrics = document.get("metrics", {})
    cases = document.get("cases", [])
    bars = ratio_bars(
        [(name, value) for _, rows in grouped(metrics) for name, value in rows if is_ratio(name)],
        title="metrics between 0 and 1",
    )
    outcomes = outcome_grid(
        [(c["id"], [(bool(r.get("passed")), _failures(r)) for r in c.get("runs", [])]) for c in cases]
    )
    lengths = grouped_bars(
        [
            (
                c["id"],
                float(c["metrics"].get("calls_per_trial") or 0.0),
                float(c.get("minimum_calls", 0)),
                float(c["metrics"].get("steps_per_trial") or 0.0),
                float(c.get("minimum_steps", 0)),
            )
            for c in cases
            if c.get("runs_agent", True)
        ]
    )
    if not any(c.get("runs_agent", True) for c in cases):
        lengths = "<p class='meta'>No agent case ran.</p>"
    codes = document.get("error_codes") or {}
    code_text = ", ".join(f"{esc(k)} x{esc(v)}" for k, v in codes.items()) or "none"
    failing = sum(1 for r in document.get("thresholds", []) if not r["ok"])
    verdict = (
        f"<p class='bad'>{failing} threshold(s) missed.</p>"
        if failing
        else ("<p class='ok'>Every threshold met.</p>" if document.get("thresholds") else "")
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>maitre eval - {esc(run.get('cases_file', ''))}</title><style>{_STYLE}</style></head><body>"
        f"<h1>maitre eval: {esc(run.get('cases_file', ''))}</h1>"
        f"<p class='meta'>{esc(run.get('cases', 0))} cases x {esc(run.get('trials', 1))} trials; "
        + (f"router <code>{esc(run.get('router'))}</code>; " if run.get("router") else "")
        + "agent "
        f"<code>{esc(run.get('agent', ''))}</code>; model <code>{esc(run.get('model', ''))}</code>; "
        f"{esc(document.get('created_at', ''))}; maitre {esc(document.get('maitre_version', ''))}; report schema "
        f"{esc(document.get('schema'))} v{esc(document.get('version'))}</p>"
        f"{verdict}"
        f"<h2>Metrics</h2><div class='charts' id='metric-bars'>{bars}</div>{_metrics_table(document)}"
        f"<p>Error codes: {code_text}</p>"
        f"<h2>Thresholds</h2>{_thresholds(document)}"
        f"<h2>Per-case outcomes</h2><div class='charts' id='outcomes'>{outcomes}</div>"
        f"<h2>Chosen versus expected tools</h2><div class='charts' id='confusion'>{_confusion(document)}</div>"
        f"<h2>Trajectory lengths</h2><div class='charts' id='trajectories'>{lengths}</div>"
        f"<h2>Routes: chosen versus expected</h2><div id='routing'>{_routing(document)}</div>"
        f"<h2>Cases</h2><div id='cases'>{''.join(_case_details(c) for c in cases)}</div>"
        "</body></html>\n"
    )
