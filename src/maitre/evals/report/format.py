"""How the renderers group and print metrics (one table of names, shared by terminal and HTML)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["GROUPS", "RATIOS", "format_metric", "grouped", "is_ratio"]

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Outcome", ("pass_rate",)),
    ("Selection", ("selection_precision", "selection_recall")),
    ("Arguments", ("argument_schema_valid", "argument_business_valid", "argument_exact")),
    (
        "Execution reliability",
        (
            "error_rate",
            "tool_error_rate",
            "timeout_rate",
            "retries_per_call",
            "replays_per_trial",
            "approvals_per_trial",
        ),
    ),
    (
        "Trajectory efficiency",
        (
            "trajectory_efficiency",
            "calls_per_trial",
            "steps_per_trial",
            "extra_calls_per_trial",
            "extra_steps_per_trial",
            "duplicate_calls_per_trial",
        ),
    ),
    (
        "Routing",
        (
            "route_accuracy",
            "route_under_call_rate",
            "route_over_call_rate",
            "route_cost_mean",
            "route_cost_total",
        ),
    ),
    (
        "Tokens and cost",
        (
            "tokens_per_trial",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "cost_per_trial",
            "seconds_per_trial",
        ),
    ),
)
"""Seed 003's four dimensions and seed 002's routing, with the outcome first and the bill last."""

RATIOS = frozenset(
    {
        "pass_rate",
        "selection_precision",
        "selection_recall",
        "argument_schema_valid",
        "argument_business_valid",
        "argument_exact",
        "error_rate",
        "tool_error_rate",
        "timeout_rate",
        "trajectory_efficiency",
        "route_accuracy",
        "route_under_call_rate",
        "route_over_call_rate",
    }
)
"""Metrics between 0 and 1 (shown as percentages, drawn as bars); pass^k metrics are ratios too."""


def is_ratio(metric: str) -> bool:
    return metric in RATIOS or metric.startswith("pass^")


def format_metric(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if is_ratio(metric):
        return f"{value * 100:.1f}%"
    if metric.startswith("cost"):
        return f"${value:.4f}"
    if metric in ("input_tokens", "output_tokens"):
        return f"{value:,.0f}"
    return f"{value:.2f}"


def grouped(metrics: Mapping[str, float | None]) -> list[tuple[str, list[tuple[str, float | None]]]]:
    """The metrics in display order; pass^k ones join the outcome group."""
    hats = sorted((m for m in metrics if m.startswith("pass^")), key=lambda m: int(m[5:]))
    groups = []
    for title, names in GROUPS:
        listed = list(names) + (hats if title == "Outcome" else [])
        groups.append((title, [(name, metrics.get(name)) for name in listed if name in metrics]))
    return groups
