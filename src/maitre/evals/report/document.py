"""The report as one JSON document, with a versioned schema: what every renderer and `compare` read.

The terminal summary, the HTML page and `maitre eval compare` all start from this document, so a
report saved with `--json` can be rendered or compared later, by a newer maitre too. Its shape
(`schema` = `maitre.eval.report`, `version` = 1); keys are added within a version, never renamed
or removed:

    {"schema": "maitre.eval.report", "version": 1,
     "created_at": ISO-8601, "maitre_version": str,
     "run": {"cases_file", "agent", "model", "trials", "elapsed_s", "router"},
     "metrics": {NAME: number | null},          # overall; NAME as in metrics.DIRECTIONS, plus pass^k
     "pass_hat_k": {"1": ..., "2": ...},        # the same pass^k values, by k
     "error_codes": {CODE: count},
     "confusion": [{"expected": TOOL, "chosen": TOOL, "count": n}],   # "(none)" for nothing
     "thresholds": [{"metric", "op", "value", "actual", "ok"}],
     "routing": null | {"router", "costs": {TRUE: {CHOSEN: cost}}, "routed", "correct", "cost",
                        "under_calls", "over_calls"},
     "route_confusion": [{"expected": ROUTE, "chosen": ROUTE, "count": n}],   # all 9 cells, or []
     "cases": [{"id", "source", "input", "tags", "expectation": {...the fields the case sets...},
                "runs_agent", "routed", "passed", "trials", "pass_hat_k", "metrics": {...},
                "minimum_calls", "minimum_steps", "runs": [TrialRecord.to_dict()]}]}

A routing case's runs carry `route` ({"expected", "chosen", "cost", "under_call", "over_call",
"probabilities", "reason"}) and `ran_agent: false`; its metrics are `pass_rate`, pass^k and the
`route_*` ones (`maitre.evals.metrics`).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from ...exceptions import UserError
from ..metrics import Tally, confusion, pass_hat_ks, route_confusion, tally_trial
from ..runner import EvalResult
from ..thresholds import ThresholdResult

__all__ = ["SCHEMA", "VERSION", "build_document", "dumps", "load_document", "threshold_rows"]

SCHEMA = "maitre.eval.report"
VERSION = 1


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("maitre")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def build_document(result: EvalResult, thresholds: list[ThresholdResult] | None = None) -> dict[str, Any]:
    """The report document of `result` (and of the thresholds it was held to)."""
    overall = Tally()
    counts: list[tuple[int, int]] = []
    cases: list[dict[str, Any]] = []
    pairs = []
    for case in result.cases:
        runs = result.trials.get(case.id, [])
        tally = Tally()
        for trial in runs:
            tally = tally + tally_trial(case, trial)
            pairs.append((case, trial))
        overall = overall + tally
        passed = sum(1 for t in runs if t.passed)
        counts.append((passed, len(runs)))
        case_hats = pass_hat_ks([(passed, len(runs))])
        metrics = {name: _round(value) for name, value in tally.metrics().items()}
        metrics.update({f"pass^{k}": _round(v) for k, v in case_hats.items()})
        cases.append(
            {
                "id": case.id,
                "source": case.source,
                "input": case.input,
                "tags": list(case.tags),
                "expectation": case.model_dump(
                    mode="json", exclude={"id", "input", "source", "tags"}, exclude_defaults=True
                ),
                "runs_agent": case.runs_agent,
                "routed": case.is_routed,
                "passed": passed,
                "trials": len(runs),
                "pass_hat_k": {str(k): _round(v) for k, v in case_hats.items()},
                "metrics": metrics,
                "minimum_calls": case.minimum_calls,
                "minimum_steps": case.minimum_steps,
                "error_codes": dict(sorted(tally.error_codes.items())),
                "runs": [t.to_dict() for t in runs],
            }
        )
    hats = pass_hat_ks(counts)
    metrics = {name: _round(value) for name, value in overall.metrics().items()}
    metrics.update({f"pass^{k}": _round(v) for k, v in hats.items()})
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "created_at": dt.datetime.fromtimestamp(result.started_at, dt.UTC).isoformat(timespec="seconds"),
        "maitre_version": _version(),
        "run": {
            "cases_file": result.cases_file,
            "agent": result.agent,
            "model": result.model,
            "trials": result.trials_per_case,
            "cases": len(result.cases),
            "elapsed_s": round(result.elapsed_s, 3),
            "router": result.router,
        },
        "metrics": metrics,
        "pass_hat_k": {str(k): _round(v) for k, v in hats.items()},
        "error_codes": dict(sorted(overall.error_codes.items())),
        "confusion": [
            {"expected": expected, "chosen": chosen, "count": count}
            for (expected, chosen), count in sorted(confusion(pairs).items())
        ],
        "thresholds": threshold_rows(thresholds or []),
        "routing": _routing(result, overall),
        "route_confusion": [
            {"expected": expected, "chosen": chosen, "count": count}
            for (expected, chosen), count in route_confusion(t for _, t in pairs).items()
        ]
        if overall.routed
        else [],
        "cases": cases,
    }


def _routing(result: EvalResult, overall: Tally) -> dict[str, Any] | None:
    if not overall.routed or result.route_costs is None:
        return None
    from ...routing import ROUTES

    matrix = result.route_costs
    return {
        "router": result.router,
        "costs": {t.value: {c.value: matrix.cost(t, c) for c in ROUTES} for t in ROUTES},
        "routed": overall.routed,
        "correct": overall.route_correct,
        "cost": round(overall.route_cost, 6),
        "under_calls": overall.route_under_calls,
        "over_calls": overall.route_over_calls,
    }


def threshold_rows(results: list[ThresholdResult]) -> list[dict[str, Any]]:
    """The document's `thresholds` entries."""
    return [
        {"metric": r.metric, "op": r.threshold.op, "value": r.threshold.value, "actual": r.actual, "ok": r.ok}
        for r in results
    ]


def dumps(document: dict[str, Any]) -> str:
    """The document as JSON text (stable: indented, keys in the order above)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def load_document(path: str | Path) -> dict[str, Any]:
    """A report saved with `--json`, checked to be one this maitre can read."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{file}: no such report") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{file}: not a JSON report ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UserError(f"{file}: not a maitre eval report (write one with maitre eval ... --json {file})")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise UserError(f"{file}: report version {version!r}; this maitre reads up to version {VERSION}")
    if not isinstance(data.get("metrics"), dict) or not isinstance(data.get("cases"), list):
        raise UserError(f"{file}: the report has no metrics or cases")
    return data
