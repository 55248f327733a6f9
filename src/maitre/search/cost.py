"""What tool definitions cost: seed 000's arithmetic with measured token counts instead of "~150".

Seed 000: 200 tools x 150 tokens x 12 calls x 10,000 tasks = 3.6 billion input tokens a day; a core
set of 5 + `search_tools` + the 5 tools a search revealed cut that by ~94%. Here every number is
counted: each definition is exported in the provider's format (`Toolbox.definitions`) and counted
with the offline cl100k_base tokenizer over its compact JSON. Providers wrap the definitions in
their own prompt text, so the absolute count is a close estimate; the comparison between the two
set-ups, which is the point, does not depend on that.

The revealed tools are priced at the mean cost of the non-core tools (a search can reveal any of
them). The third scenario adds one model call per task for the search itself, as the seed does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..exceptions import UserError
from ..tools import ExportFormat, Toolbox
from .reveal import SEARCH_TOOL_NAME

__all__ = ["CostReport", "CostScenario", "DEFAULT_FORMATS", "estimate_tool_costs", "search_tool_tokens"]

DEFAULT_FORMATS: tuple[ExportFormat, ...] = ("anthropic", "openai", "mcp")


@dataclass(kw_only=True)
class CostScenario:
    """One way of loading tools, priced per call, per task and per day."""

    label: str
    """What is loaded, e.g. "all 200 tools"."""
    tokens_per_call: int
    """Definition tokens sent with every model call."""
    calls_per_task: int
    """Model calls in one task."""
    tokens_per_task: int
    """tokens_per_call x calls_per_task."""
    tokens_per_day: int
    """tokens_per_task x tasks per day."""
    usd_per_day: float
    """tokens_per_day at the given price per million input tokens."""
    saving: float
    """Share of the all-tools-loaded daily tokens saved (0.0 for that baseline)."""


@dataclass(kw_only=True)
class CostReport:
    """Measured definition costs of one toolbox in one provider format."""

    format: ExportFormat
    """anthropic | openai | openai-responses | mcp."""
    tools: int
    """Tools in the toolbox (the search tool not counted)."""
    all_tokens: int
    """All definitions, per call."""
    core: list[str]
    """The always-loaded tools."""
    core_tokens: int
    """Their definitions, per call."""
    search_tokens: int
    """The `search_tools` definition, per call."""
    revealed: int
    """Tools a search reveals and that then travel with every call."""
    revealed_tokens: int
    """Their estimated definitions per call (revealed x mean non-core tool)."""
    mean_tool_tokens: float
    """Mean definition size over all tools."""
    scenarios: list[CostScenario]
    """All loaded; core + search + revealed; the same plus one model call for the search."""


def search_tool_tokens(format: ExportFormat = "anthropic") -> int:
    """Tokens of the `search_tools` definition in a provider's format."""
    from .index import ToolIndex
    from .meta import search_tools_toolbox

    index = ToolIndex(embedder=None)
    try:
        return search_tools_toolbox(index).definitions(format).total_tokens
    finally:
        index.close()


def estimate_tool_costs(
    toolbox: Toolbox,
    *,
    core: Iterable[str],
    revealed: int = 5,
    calls_per_task: int = 12,
    tasks_per_day: int = 10_000,
    price_per_mtok: float = 1.0,
    formats: Sequence[ExportFormat] = DEFAULT_FORMATS,
) -> list[CostReport]:
    """Seed 000's table for `toolbox`, one `CostReport` per provider format."""
    if revealed < 0 or calls_per_task < 1 or tasks_per_day < 0 or price_per_mtok < 0:
        raise UserError("revealed, tasks_per_day and price must be >= 0 and calls_per_task >= 1")
    names = [n for n in toolbox.names() if n != SEARCH_TOOL_NAME]
    core_names = []
    for name in core:
        tool = toolbox.get(name)
        if tool is None:
            raise UserError(f"core tool {name!r} is not in {toolbox!r}")
        core_names.append(tool.name)
    others = [n for n in names if n not in core_names]
    shown = min(revealed, len(others))
    reports = []
    for format in formats:
        definitions = toolbox.definitions(format, names=names)
        tokens = definitions.tokens
        all_tokens = definitions.total_tokens
        core_tokens = sum(tokens[n] for n in core_names)
        mean_other = sum(tokens[n] for n in others) / len(others) if others else 0.0
        revealed_tokens = round(shown * mean_other)
        search = search_tool_tokens(format)
        on_demand = core_tokens + search + revealed_tokens

        def scenario(label: str, per_call: int, calls: int, baseline: int | None) -> CostScenario:
            per_day = per_call * calls * tasks_per_day
            return CostScenario(
                label=label,
                tokens_per_call=per_call,
                calls_per_task=calls,
                tokens_per_task=per_call * calls,
                tokens_per_day=per_day,
                usd_per_day=per_day / 1_000_000 * price_per_mtok,
                saving=0.0 if not baseline else 1.0 - per_day / baseline,
            )

        baseline = all_tokens * calls_per_task * tasks_per_day
        reports.append(
            CostReport(
                format=format,
                tools=len(names),
                all_tokens=all_tokens,
                core=core_names,
                core_tokens=core_tokens,
                search_tokens=search,
                revealed=shown,
                revealed_tokens=revealed_tokens,
                mean_tool_tokens=all_tokens / len(names) if names else 0.0,
                scenarios=[
                    scenario(f"all {len(names)} tools loaded", all_tokens, calls_per_task, None),
                    scenario(
                        f"{len(core_names)} core + search_tools + {shown} revealed",
                        on_demand,
                        calls_per_task,
                        baseline,
                    ),
                    scenario("same, +1 call for the search", on_demand, calls_per_task + 1, baseline),
                ],
            )
        )
    return reports
