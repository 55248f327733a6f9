"""Seed 003's four dimensions, pass^k, tokens and cost: per case and overall, from trial records.

Counts are added up first and divided last (micro-averages), so a case with many calls weighs as
much as its calls, and a ratio with nothing to count is `None` (shown as "-"), never a made-up 0
or 1:

- **Selection**: per trial, the set of tools chosen (maitre's runtime tools aside, see
  `records.RUNTIME_TOOLS`) against the set expected. precision = hits / chosen, recall = hits /
  expected, over every trial of every case that says which tools to call.
- **Arguments**: `argument_schema_valid` = calls the gate's validation accepted / calls to known
  tools; `argument_business_valid` = calls that kept the case's constraints / calls the
  constraints apply to; `argument_exact` = expected calls whose arguments matched / expected calls
  with arguments.
- **Execution reliability**: `error_rate` = calls that ended in an error (refusals included) /
  calls; `tool_error_rate` = executed calls that failed / executed calls; `timeout_rate`;
  `retries_per_call` (the gate's retries of retryable errors); `replays` (idempotency replays, per
  trial); `approvals_per_trial`.
- **Trajectory efficiency**: `extra_calls_per_trial` and `extra_steps_per_trial` (over the case's
  minimum, never below 0); `trajectory_efficiency` = minimum calls / max(calls, minimum calls);
  `duplicate_calls_per_trial` (the same tool with the same arguments again).
- **Routing** (seed 002; cases that set `expected_route`, see `maitre.evals.routing`):
  `route_accuracy` = routed trials whose route was right / routed trials; `route_cost_total` and
  `route_cost_mean` = `cost[expected][chosen]` summed and per routed trial, under the matrix the
  report names (an under-call 10, an over-call 1 per extra step by default);
  `route_under_call_rate` (a wrong, confident answer) and `route_over_call_rate` (a wasted call).
  The agent metrics above count only trials an agent ran, so routing cases in a file do not thin
  out `calls_per_trial`; a tally with no agent trial has no agent metrics, one with no routed trial
  no routing metrics (they are absent, not 0). `pass_rate` and pass^k count every case.
- **pass^k** (tau-bench, Yao et al. 2024, arXiv:2406.12045, `tau_bench/run.py`): for each case with
  c passing trials out of n, C(c, k) / C(n, k) - the chance that k trials drawn from its n all
  pass - averaged over cases, for k = 1..n. pass^1 is the plain pass rate; pass^k falls as k grows
  unless every case passes every time.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from math import comb
from typing import TYPE_CHECKING, Literal

from .matching import argument_results, constraint_mismatches, selection_sets
from .records import TrialRecord

if TYPE_CHECKING:
    from .cases import EvalCase

__all__ = [
    "DIRECTIONS",
    "Direction",
    "NONE_LABEL",
    "ROUTING_METRICS",
    "Tally",
    "confusion",
    "direction",
    "pass_at_k",
    "pass_hat_k",
    "pass_hat_ks",
    "route_confusion",
    "tally_trial",
]

NONE_LABEL = "(none)"
"""The confusion matrix's row for a tool chosen unasked and column for an expected tool not chosen."""

Direction = Literal["higher", "lower", "neutral"]

DIRECTIONS: dict[str, Direction] = {
    "pass_rate": "higher",
    "selection_precision": "higher",
    "selection_recall": "higher",
    "argument_exact": "higher",
    "argument_schema_valid": "higher",
    "argument_business_valid": "higher",
    "trajectory_efficiency": "higher",
    "error_rate": "lower",
    "tool_error_rate": "lower",
    "timeout_rate": "lower",
    "retries_per_call": "lower",
    "extra_calls_per_trial": "lower",
    "extra_steps_per_trial": "lower",
    "duplicate_calls_per_trial": "lower",
    "tokens_per_trial": "lower",
    "cost_per_trial": "lower",
    "cost_usd": "lower",
    "input_tokens": "lower",
    "output_tokens": "lower",
    "replays_per_trial": "neutral",
    "approvals_per_trial": "neutral",
    "calls_per_trial": "neutral",
    "steps_per_trial": "neutral",
    "seconds_per_trial": "neutral",  # wall time is noise on a shared machine: shown, never a regression
    "route_accuracy": "higher",
    "route_cost_total": "lower",
    "route_cost_mean": "lower",
    "route_under_call_rate": "lower",
    "route_over_call_rate": "lower",
}
"""Which way is better for each metric (pass^k metrics are "higher"): what thresholds and
`compare` read. A neutral metric changes without being better or worse."""


ROUTING_METRICS = frozenset(name for name in DIRECTIONS if name.startswith("route_"))
"""The metrics of routed cases (present only when some case was routed)."""


def direction(metric: str) -> Direction | None:
    """Which way `metric` is better; None for a name that is not a metric."""
    if metric.startswith("pass^") and metric[5:].isdigit():
        return "higher"
    return DIRECTIONS.get(metric)


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> float | None:
    """tau-bench's pass^k over `(passed, trials)` per case; None when a case has fewer than k trials."""
    if not counts or k < 1 or any(n < k for _, n in counts):
        return None
    return sum(comb(c, k) / comb(n, k) for c, n in counts) / len(counts)


def pass_hat_ks(counts: Sequence[tuple[int, int]]) -> dict[int, float]:
    """pass^k for every k from 1 to the fewest trials any case had."""
    if not counts:
        return {}
    top = min(n for _, n in counts)
    return {k: value for k in range(1, top + 1) if (value := pass_hat_k(counts, k)) is not None}


def pass_at_k(passed: int, trials: int, k: int) -> float:
    """The chance that at least one of k trials drawn from `trials` passes (Chen et al. 2021), for
    contrast with pass^k: 1 - C(n - c, k) / C(n, k)."""
    return 1.0 - comb(trials - passed, k) / comb(trials, k)


@dataclass(kw_only=True)
class Tally:
    """Counts over some trials; `+` adds two tallies, `metrics()` divides."""

    trials: int = 0
    passed: int = 0
    agent_trials: int = 0
    """Trials an agent ran (every trial but a routing case's): the agent metrics' denominator."""
    routed: int = 0
    route_correct: int = 0
    route_cost: float = 0.0
    route_under_calls: int = 0
    route_over_calls: int = 0
    selection_hits: int = 0
    selection_chosen: int = 0
    selection_expected: int = 0
    argument_expected: int = 0
    argument_matched: int = 0
    known_calls: int = 0
    schema_valid: int = 0
    constrained_calls: int = 0
    constrained_ok: int = 0
    calls: int = 0
    executed: int = 0
    errors: int = 0
    tool_errors: int = 0
    timeouts: int = 0
    retries: int = 0
    replays: int = 0
    approvals: int = 0
    steps: int = 0
    minimum_calls: int = 0
    efficient_denominator: int = 0
    extra_calls: int = 0
    extra_steps: int = 0
    duplicate_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0
    error_codes: Counter[str] = field(default_factory=Counter)

    def __add__(self, other: Tally) -> Tally:
        total = Tally()
        for f in fields(self):
            setattr(total, f.name, getattr(self, f.name) + getattr(other, f.name))
        return total

    def metrics(self) -> dict[str, float | None]:
        """The metrics of `DIRECTIONS` but the pass^k ones (they need per-case counts): the agent
        metrics when an agent ran (or nothing was routed), the routing ones when something was."""

        def ratio(part: float, whole: float) -> float | None:
            return part / whole if whole else None

        found: dict[str, float | None] = {"pass_rate": ratio(self.passed, self.trials)}
        if self.agent_trials or not self.routed:
            found.update(self._agent_metrics())
        if self.routed:
            found.update(
                {
                    "route_accuracy": self.route_correct / self.routed,
                    "route_cost_total": self.route_cost,
                    "route_cost_mean": self.route_cost / self.routed,
                    "route_under_call_rate": self.route_under_calls / self.routed,
                    "route_over_call_rate": self.route_over_calls / self.routed,
                }
            )
        return found

    def _agent_metrics(self) -> dict[str, float | None]:
        def ratio(part: float, whole: float) -> float | None:
            return part / whole if whole else None

        per_trial = self.agent_trials or 1
        return {
            "selection_precision": ratio(self.selection_hits, self.selection_chosen),
            "selection_recall": ratio(self.selection_hits, self.selection_expected),
            "argument_exact": ratio(self.argument_matched, self.argument_expected),
            "argument_schema_valid": ratio(self.schema_valid, self.known_calls),
            "argument_business_valid": ratio(self.constrained_ok, self.constrained_calls),
            "error_rate": ratio(self.errors, self.calls),
            "tool_error_rate": ratio(self.tool_errors, self.executed),
            "timeout_rate": ratio(self.timeouts, self.calls),
            "retries_per_call": ratio(self.retries, self.calls),
            "replays_per_trial": self.replays / per_trial,
            "approvals_per_trial": self.approvals / per_trial,
            "calls_per_trial": self.calls / per_trial,
            "steps_per_trial": self.steps / per_trial,
            "extra_calls_per_trial": self.extra_calls / per_trial,
            "extra_steps_per_trial": self.extra_steps / per_trial,
            "duplicate_calls_per_trial": self.duplicate_calls / per_trial,
            "trajectory_efficiency": ratio(self.minimum_calls, self.efficient_denominator)
            if self.efficient_denominator
            else (1.0 if self.agent_trials else None),
            "input_tokens": float(self.input_tokens),
            "output_tokens": float(self.output_tokens),
            "tokens_per_trial": (self.input_tokens + self.output_tokens) / per_trial,
            "cost_usd": self.cost_usd,
            "cost_per_trial": self.cost_usd / per_trial,
            "seconds_per_trial": self.elapsed_s / per_trial,
        }


def tally_trial(case: EvalCase, trial: TrialRecord) -> Tally:
    """The counts of one trial (its checks already filled)."""
    tally = Tally(trials=1, passed=int(trial.passed))
    if case.is_routed:
        tally.routed = 1
        if trial.route is not None:
            tally.route_correct = int(trial.route.chosen == trial.route.expected)
            tally.route_cost = trial.route.cost
            tally.route_under_calls = int(trial.route.under_call)
            tally.route_over_calls = int(trial.route.over_call)
    if not trial.ran_agent:
        return tally
    tally.agent_trials = 1
    calls = trial.calls
    if case.scores_selection:
        chosen, expected = selection_sets(calls, case)
        tally.selection_hits = len(chosen & expected)
        tally.selection_chosen = len(chosen)
        tally.selection_expected = len(expected)
    for _, found in argument_results(case, calls):
        tally.argument_expected += 1
        tally.argument_matched += int(found == [])
    seen: set[str] = set()
    for call in calls:
        tally.calls += 1
        if call.known:
            tally.known_calls += 1
            tally.schema_valid += int(call.schema_valid)
        broken = constraint_mismatches(call, case)
        if broken is not None:
            tally.constrained_calls += 1
            tally.constrained_ok += int(not broken)
        if call.executed:
            tally.executed += 1
            tally.tool_errors += int(call.error_code is not None)
        if call.error_code is not None:
            tally.errors += 1
            tally.error_codes[call.error_code] += 1
        tally.timeouts += int(call.error_code == "TIMEOUT")
        tally.retries += call.retries
        tally.replays += int(call.replayed)
        tally.approvals += int(call.approval_requested)
        key = call.tool + json.dumps(call.arguments, sort_keys=True, default=str)
        tally.duplicate_calls += int(key in seen)
        seen.add(key)
    tally.steps = trial.steps
    tally.minimum_calls = case.minimum_calls
    tally.efficient_denominator = max(len(calls), case.minimum_calls)
    tally.extra_calls = max(0, len(calls) - case.minimum_calls)
    tally.extra_steps = max(0, trial.steps - case.minimum_steps)
    tally.input_tokens = trial.input_tokens
    tally.output_tokens = trial.output_tokens
    tally.cost_usd = trial.cost_usd
    tally.elapsed_s = trial.elapsed_s
    return tally


def route_confusion(trials: Iterable[TrialRecord]) -> dict[tuple[str, str], int]:
    """Counts of (expected route, chosen route) over routed trials, every one of the 9 cells (a
    trial whose router raised has no route and is not counted here)."""
    counts = {(expected, chosen): 0 for expected in _ROUTES for chosen in _ROUTES}
    for trial in trials:
        if trial.route is not None:
            counts[(trial.route.expected, trial.route.chosen)] += 1
    return counts


_ROUTES = ("CONTEXT", "RETRIEVE", "ACT")


def confusion(pairs: Iterable[tuple[EvalCase, TrialRecord]]) -> dict[tuple[str, str], int]:
    """Counts of (expected tool, chosen tool) over trials of cases that score selection.

    A tool both expected and chosen counts on the diagonal. Then, per trial, each expected tool
    not chosen is paired with a chosen tool not expected (in name order): that is the confusion a
    person wants to see ("asked for status, called create_ticket_draft"). What is left over pairs
    with `(none)`: an expected tool nothing replaced, a tool chosen unasked. A chosen tool goes by
    the name any case expects it under (`support.search_kb` as `search_kb`), so each tool has one
    row and one column.
    """
    counts: Counter[tuple[str, str]] = Counter()
    scored = [(case, trial) for case, trial in pairs if case.scores_selection]
    names = sorted({e.tool for case, _ in scored for e in case.expected_calls}, key=lambda n: (-len(n), n))
    for case, trial in scored:
        chosen, expected = selection_sets(trial.calls, case, names=names)
        for tool in sorted(chosen & expected):
            counts[(tool, tool)] += 1
        missed, extra = sorted(expected - chosen), sorted(chosen - expected)
        for index in range(max(len(missed), len(extra))):
            want = missed[index] if index < len(missed) else NONE_LABEL
            got = extra[index] if index < len(extra) else NONE_LABEL
            counts[(want, got)] += 1
        if not expected and not chosen:
            counts[(NONE_LABEL, NONE_LABEL)] += 1
    return dict(counts)
