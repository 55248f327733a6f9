"""Evaluate a tool-using agent the way seed 003 (§13) asks: `maitre eval CASES --agent FILE:FACTORY`.

Layer: a door. It runs an `Agent` (through `maitre.agent`'s public names) on cases, watches its
gate with `maitre.testing.capture_calls`, and scores what happened on seed 003's four dimensions -
selection precision, argument validity, execution reliability, trajectory efficiency - plus
tau-bench's pass^k, tokens and cost. One module per job:

- `cases`: the case format (JSON Lines or YAML), checked with pydantic, errors with file:line;
- `matching`: BFCL-style matching of arguments, and every check a case can ask for;
- `records`: what one trial produced (the seam between running and scoring);
- `runner`: trials on fresh in-memory stores, any model adapter;
- `routing`: routing cases (`expected_route`: CONTEXT / RETRIEVE / ACT) scored by a router, priced
  under an asymmetric cost matrix (seed 002: an under-call costs 10, an over-call 1 per step);
- `metrics`: the numbers, per case and overall, and pass^k;
- `thresholds`: `--threshold metric=value`, for CI;
- `compare`: regressions from one report to another;
- `report`: the JSON document, the terminal summary, the HTML page.

```python
cases = load_cases("examples/evals/cases.jsonl")
result = await run_eval(cases, make_agent, trials=3)
document = build_document(result)
document["metrics"]["pass^3"], document["metrics"]["selection_precision"]

routes = await run_eval(load_cases("examples/router/questions.jsonl"), None, router=KeywordRouter())
build_document(routes)["metrics"]["route_accuracy"]   # 12/18
```

The library never prints: the command line (`maitre.cli.eval_cmds`) does.
"""

from .cases import CaseFileError, EvalCase, ExpectedCall, load_cases, parse_cases
from .compare import Comparison, compare_documents
from .matching import Mismatch, check_trial, match_value
from .metrics import Tally, pass_at_k, pass_hat_k, pass_hat_ks
from .records import CallRecord, Check, RouteRecord, TrialRecord
from .report import build_document, load_document, render_html
from .routing import AnyRouter, route_case
from .runner import AgentFactory, EvalResult, ModelFactory, run_eval, run_trial
from .thresholds import Threshold, ThresholdResult, evaluate, parse_threshold

__all__ = [
    "AgentFactory",
    "AnyRouter",
    "CallRecord",
    "CaseFileError",
    "Check",
    "Comparison",
    "EvalCase",
    "EvalResult",
    "ExpectedCall",
    "Mismatch",
    "ModelFactory",
    "RouteRecord",
    "Tally",
    "Threshold",
    "ThresholdResult",
    "TrialRecord",
    "build_document",
    "check_trial",
    "compare_documents",
    "evaluate",
    "load_cases",
    "load_document",
    "match_value",
    "parse_cases",
    "parse_threshold",
    "pass_at_k",
    "pass_hat_k",
    "pass_hat_ks",
    "render_html",
    "route_case",
    "run_eval",
    "run_trial",
]
