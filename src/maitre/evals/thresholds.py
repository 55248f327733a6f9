"""`--threshold metric=value`: the bar a CI run must clear, checked against a report's metrics.

`metric=value` uses the metric's own direction (`pass_rate=0.9` means at least 0.9,
`error_rate=0.05` at most 0.05; see `maitre.evals.metrics.DIRECTIONS`); `metric>=value` and
`metric<=value` say it outright, and a neutral metric (`calls_per_trial`) needs one of them.
`pass^k` is the pass^k of the largest k the run measured (its number of trials). A metric that
could not be measured (no call was constrained, so no `argument_business_valid`) misses its
threshold: a bar nobody measured is not met.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ..exceptions import UserError
from .metrics import DIRECTIONS, direction

__all__ = ["Threshold", "ThresholdResult", "evaluate", "parse_threshold"]

_PATTERN = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_^]*)\s*(>=|<=|=)\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*$"
)


@dataclass(frozen=True, kw_only=True)
class Threshold:
    metric: str
    op: Literal[">=", "<="]
    value: float

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


@dataclass(frozen=True, kw_only=True)
class ThresholdResult:
    threshold: Threshold
    actual: float | None
    """The measured value (None: not measured)."""
    metric: str
    """The metric compared (`pass^k` resolved to `pass^3`, say)."""

    @property
    def ok(self) -> bool:
        if self.actual is None:
            return False
        if self.threshold.op == ">=":
            return self.actual >= self.threshold.value
        return self.actual <= self.threshold.value


def parse_threshold(text: str) -> Threshold:
    """`metric=value`, `metric>=value` or `metric<=value`; a `UserError` names what is wrong."""
    found = _PATTERN.match(text)
    if found is None:
        raise UserError(
            f"--threshold {text!r}: write METRIC=VALUE, METRIC>=VALUE or METRIC<=VALUE (pass_rate=0.9)"
        )
    metric, op, raw = found.groups()
    way = "higher" if metric == "pass^k" else direction(metric)
    if way is None:
        known = ", ".join(sorted([*DIRECTIONS, "pass^k", "pass^N"]))
        raise UserError(f"--threshold {text!r}: unknown metric {metric!r}; known: {known}")
    if op == "=":
        if way == "neutral":
            raise UserError(f"--threshold {text!r}: {metric} is neither better high nor low; use >= or <=")
        op = ">=" if way == "higher" else "<="
    return Threshold(metric=metric, op=">=" if op == ">=" else "<=", value=float(raw))


def evaluate(thresholds: list[Threshold], metrics: Mapping[str, float | None]) -> list[ThresholdResult]:
    """Each threshold against `metrics` (a report's overall metrics)."""
    results = []
    ks = sorted(int(name[5:]) for name in metrics if name.startswith("pass^") and name[5:].isdigit())
    for threshold in thresholds:
        metric = threshold.metric
        if metric == "pass^k":
            metric = f"pass^{ks[-1]}" if ks else "pass^1"
        results.append(ThresholdResult(threshold=threshold, actual=metrics.get(metric), metric=metric))
    return results
