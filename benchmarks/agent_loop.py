"""What the agent loop itself costs per step, with the model's and the tool's own time taken out.

A step is one model call plus the tool calls it proposed. Each run here is `steps` tool steps (one
call of a trivial async tool, `lookup(n: int)`, with a new `n` every time, so the loop guard and the
no-progress brake never fire) and one final text step. Run time minus the time spent inside the
model's `complete` and inside the tool body, divided by the model calls, is the loop's overhead per
step: brakes (token counting of the conversation, the tool definitions' token cache), context
fitting, building the request, the gate call, recording the result and its events, the progress
check and persisting the run after each step.

Rows, interleaved in rounds in one run (the `_harness` policy: `gc.collect()` + `gc.freeze()` before
each row's block, one event-loop turn between runs):

- pydantic-ai 2.68's `Agent.run` with a `FunctionModel` whose `request` is timed the same way (the
  anchor: the same tool, the same number of steps, `request_limit` lifted);
- maitre `Agent` with a `ScriptedModel` (a timed wrapper around it) and three stores: the default
  (in-memory stores, audit off), `MemoryStores()` (audit on) and SQLite (a temporary file: audit
  append per tool call, `runs.save` per step).

Model time excluded means the scripted model's own work (it counts the request's tokens, as a real
adapter's usage would) is not charged to the loop. Several of the loop's costs grow with the
conversation (token counts of the whole conversation, the whole run serialised and saved after each
step), so the table is printed per run length and followed by the per-step p50 at step 1, 5, 10, ...
Goal (issue 4): <= 1 ms per step at p50.

Run: `.venv/bin/python benchmarks/agent_loop.py [--quick] [--runs N] [--steps 10,50] [--dir PATH]`
(`--runs`: runs per row of 10-step runs, scaled by 10/steps for longer runs);
`--breakdown` times the loop's parts inside real runs (each part's mean µs per step).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from _harness import Stats, print_table, ratio
from anyio.lowlevel import checkpoint

from maitre import Budgets, Principal, Toolbox
from maitre.agent import Agent, Limits, Run, StopReason
from maitre.models import ModelRequest, ModelResponse, Rule, ScriptedModel, always, call
from maitre.stores import MemoryStores, Stores, open_stores

__all__ = ["main"]

GOAL_US = 1_000.0
"""Issue 4: loop overhead per step with the scripted model, model time excluded, p50 at most this."""

PAI = "pydantic-ai Agent.run"
DEFAULT = "maitre, default stores (memory, audit off)"
MEMORY = "maitre, MemoryStores (audit on)"
SQLITE = "maitre, SQLite (audit + runs.save)"
POSITIONS = (1, 5, 10, 25, 50, 100)
"""Steps at which the per-position p50 is printed (those inside the run length)."""
PRINCIPAL = Principal(user="bench", tenant="bench")
GOAL = "Look up the numbers one by one."


@dataclass(kw_only=True)
class _Clock:
    """Time spent inside the model and inside the tool body, in ns, since the last reset."""

    model_ns: int = 0
    tool_ns: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    gaps_ns: list[int] = field(default_factory=list)
    """Loop time between the end of one model call and the start of the next, minus tool time."""
    _last_end: int | None = None
    _tool_at_end: int = 0

    def reset(self) -> None:
        self.model_ns = self.tool_ns = self.model_calls = self.tool_calls = 0
        self._last_end = None
        self._tool_at_end = 0

    def model_started(self, at: int) -> None:
        if self._last_end is not None:
            self.gaps_ns.append(at - self._last_end - (self.tool_ns - self._tool_at_end))

    def model_ended(self, started: int, at: int) -> None:
        self.model_ns += at - started
        self.model_calls += 1
        self._last_end = at
        self._tool_at_end = self.tool_ns


_clock = _Clock()
_ids = itertools.count(1)


async def lookup(n: int) -> dict[str, int]:
    """Look up item n: its square and its remainder modulo 7. Use it for one number at a time."""
    start = time.perf_counter_ns()
    out = {"n": n, "square": n * n, "mod7": n % 7}
    _clock.tool_ns += time.perf_counter_ns() - start
    _clock.tool_calls += 1
    return out


class _TimedModel:
    """A model that forwards to `inner` and charges the time spent there to the model, not the loop."""

    name = "scripted"

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner

    async def complete(self, request: ModelRequest) -> ModelResponse:
        clock = time.perf_counter_ns
        start = clock()
        _clock.model_started(start)
        try:
            return await self.inner.complete(request)
        finally:
            _clock.model_ended(start, clock())


def _scripted(steps: int) -> _TimedModel:
    def then(request: ModelRequest) -> Any:
        done = (len(request.messages) - 1) // 2  # user, then (assistant, tool result) per step
        return call("lookup", n=next(_ids)) if done < steps else "All numbers looked up."

    model = ScriptedModel([Rule("next number", when=always, then=then)])
    model.requests = _NoList()  # keep no request history: a long benchmark would hold every request
    return _TimedModel(model)


class _NoList(list):  # type: ignore[type-arg]
    """A list that forgets what is appended (the scripted model's request log, unused here)."""

    def append(self, item: Any) -> None:
        return None


def _maitre_agent(steps: int, store: Stores | None) -> Agent:
    box = Toolbox()
    box.add_tool(lookup)
    big = 10_000_000
    return Agent(
        _scripted(steps),
        box,
        store=store,
        budgets=Budgets(max_calls_per_run=None),
        limits=Limits(
            max_steps=steps + 5,
            max_seconds=600.0,
            max_input_tokens=big,
            max_output_tokens=big,
            max_total_tokens=big,
            max_cost_usd=1e9,
            no_progress_steps=steps + 5,
            loop_refusals=steps + 5,
        ),
        notes=False,
    )


def _maitre_case(agent: Agent, steps: int) -> Callable[[], Awaitable[int]]:
    async def one_run() -> int:
        run: Run = await agent.run(GOAL, PRINCIPAL)
        if run.stop_reason is not StopReason.COMPLETED or run.steps != steps + 1 or run.tool_calls != steps:
            raise RuntimeError(f"run ended {run.stop_reason} after {run.steps} steps: {run.final_text[:300]}")
        return run.steps

    return one_run


def _pydantic_ai_case(steps: int) -> Callable[[], Awaitable[int]]:
    from pydantic_ai import Agent as PaiAgent
    from pydantic_ai.messages import ModelResponse as PaiResponse
    from pydantic_ai.messages import TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    class TimedFunctionModel(FunctionModel):
        async def request(self, *args: Any, **kwargs: Any) -> Any:
            clock = time.perf_counter_ns
            start = clock()
            _clock.model_started(start)
            try:
                return await super().request(*args, **kwargs)
            finally:
                _clock.model_ended(start, clock())

    async def respond(messages: list[Any], info: AgentInfo) -> PaiResponse:
        last = messages[-1].parts if messages else []
        done = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart)) if last else 0
        if done < steps:
            return PaiResponse(parts=[ToolCallPart(tool_name="lookup", args={"n": next(_ids)})])
        return PaiResponse(parts=[TextPart("All numbers looked up.")])

    agent = PaiAgent(TimedFunctionModel(respond))
    agent.tool_plain(lookup)
    limits = UsageLimits(request_limit=None)

    async def one_run() -> int:
        result = await agent.run(GOAL, usage_limits=limits)
        if result.output != "All numbers looked up.":
            raise RuntimeError(f"pydantic-ai run ended with {result.output!r}")
        return steps + 1

    return one_run


# -- measuring ------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class _Row:
    stats: Stats
    """Per-step overhead of each run (run time minus model and tool time, over model calls)."""
    gaps: Stats
    """Per-step samples: loop time between two model calls of a run, minus tool time."""
    by_position: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    """The same samples by step number (1 = between the first and the second model call)."""
    model_us: list[float] = field(default_factory=list)
    """Model time per model call, per run (excluded; shown for scale)."""


async def _sample(fn: Callable[[], Awaitable[int]], row: _Row) -> None:
    clock = time.perf_counter_ns
    _clock.reset()
    gaps_before = len(_clock.gaps_ns)
    start = clock()
    model_calls = await fn()
    total = clock() - start
    if _clock.model_calls != model_calls:
        raise RuntimeError(f"{_clock.model_calls} model calls timed for {model_calls} steps")
    overhead = total - _clock.model_ns - _clock.tool_ns
    row.stats.samples_us.append(overhead / 1000 / model_calls)
    for position, gap in enumerate(_clock.gaps_ns[gaps_before:], start=1):
        row.gaps.samples_us.append(gap / 1000)
        row.by_position[position].append(gap / 1000)
    row.model_us.append(_clock.model_ns / 1000 / model_calls)
    del _clock.gaps_ns[:]


async def _compare(
    cases: dict[str, Callable[[], Awaitable[int]]], runs: int, warmup: int, rounds: int
) -> list[_Row]:
    rows = {name: _Row(stats=Stats(name=name), gaps=Stats(name=name)) for name in cases}
    scratch = _Row(stats=Stats(name="warm-up"), gaps=Stats(name="warm-up"))
    for fn in cases.values():
        for _ in range(warmup):
            await _sample(fn, scratch)
    per_round = max(1, -(-runs // rounds))
    try:
        for _ in range(rounds):
            for name, fn in cases.items():
                gc.collect()
                gc.freeze()
                for _ in range(per_round):
                    await _sample(fn, rows[name])
                    await checkpoint()
    finally:
        gc.unfreeze()
    return list(rows.values())


async def _with_stores(directory: str | None, job: Callable[[Stores], Awaitable[Any]]) -> Any:
    with tempfile.TemporaryDirectory(dir=directory, prefix="maitre-agent-loop-") as tmp:
        stores = await open_stores(os.path.join(tmp, "maitre.db"))
        try:
            return await job(stores)
        finally:
            await stores.close()


async def _run(steps_list: list[int], runs: int, warmup: int, rounds: int, directory: str | None) -> None:
    async def job(sqlite: Stores) -> None:
        for steps in steps_list:
            cases = {
                PAI: _pydantic_ai_case(steps),
                DEFAULT: _maitre_case(_maitre_agent(steps, None), steps),
                MEMORY: _maitre_case(_maitre_agent(steps, MemoryStores()), steps),
                SQLITE: _maitre_case(_maitre_agent(steps, sqlite), steps),
            }
            rows = await _compare(cases, max(rounds, runs * 10 // steps), warmup, rounds)
            _report(steps, rows)

    await _with_stores(directory, job)


def _report(steps: int, rows: list[_Row]) -> None:
    stats = [row.stats for row in rows]
    gaps = [row.gaps for row in rows]
    for row in gaps:
        row.name = f"{row.name}, per step"
    print_table(
        f"agent loop overhead per step: runs of {steps} tool steps + 1 final answer ({steps + 1} model calls),"
        " model and tool time excluded",
        [*stats, *gaps],
        anchor=PAI,
        versus={gaps[0].name: gaps[0].name, **{row.name: gaps[0].name for row in gaps[1:]}},
        note=(
            "First rows: one sample per run = (run time - model time - tool time) / model calls, so run "
            "set-up and the ending are included. 'per step': one sample per step = loop time from the end of "
            "one model call to the start of the next, minus tool time (a whole step: tools, record, save, "
            "brakes, context). Model time per call, p50 (excluded): "
            + ", ".join(f"{row.stats.name} {statistics.median(row.model_us):.0f} µs" for row in rows)
        ),
    )
    positions = [p for p in POSITIONS if p <= steps]
    print(
        f"per-step p50 µs by step number ({', '.join(map(str, positions))}): the conversation grows each step"
    )
    for row in rows:
        cells = ", ".join(f"{statistics.median(row.by_position[p]):.0f}" for p in positions)
        print(f"  {row.stats.name:<44} {cells}")
    for row in rows[1:]:
        p50 = row.stats.p50
        verdict = "met" if p50 <= GOAL_US else "NOT met"
        print(
            f"{row.stats.name}: {p50:.0f} µs per step p50 ({ratio(row.stats, rows[0].stats):.2f}x pydantic-ai); "
            f"goal <= {GOAL_US:.0f} µs: {verdict}"
        )


# -- breakdown --------------------------------------------------------------------------------------------


def _timed_sync(fn: Callable[..., Any], name: str, spent: dict[str, int], calls: dict[str, int]) -> Any:
    clock = time.perf_counter_ns

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += clock() - start
            calls[name] += 1

    return timed


def _timed_async(fn: Callable[..., Any], name: str, spent: dict[str, int], calls: dict[str, int]) -> Any:
    clock = time.perf_counter_ns

    async def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return await fn(*args, **kwargs)
        finally:
            spent[name] += clock() - start
            calls[name] += 1

    return timed


_PARTS: tuple[tuple[str, str, str], ...] = (
    # (attribute on the agent, label, parent label or ""); parents exclude what their children took
    ("_brake", "brakes (_brake)", ""),
    ("_upcoming_input", "upcoming input: definitions cache + conversation tokens", "brakes (_brake)"),
    ("_ask_model", "ask model: request, accounting, event (model time removed)", ""),
    ("_fit_context", "context fitting (_fit_context: trim check + budget check)", ""),
    ("_run_calls", "run calls: tool_call events, task group (gate and tool time removed)", ""),
    ("_record_result", "record result (message + tool_result event)", ""),
    ("_save", "persist run: Run.to_json (store time removed)", ""),
)
_GATE = "gate.call (tool time removed)"
_SAVE = "store.runs.save"
_APART = (
    ("conversation token counts (3 passes/step: brake, trim, fit)", "tokens"),
    ("visible_tools (brake + request)", "visible_tools"),
    ("events (_emit, every kind)", "_emit"),
)
"""Parts inside the rows above, shown apart and not summed."""


async def _breakdown_one(agent: Agent, steps: int, runs: int) -> list[tuple[str, float, float]]:
    """(label, mean µs per model call, calls per model call) over `runs` instrumented runs."""
    import maitre.agent.context_manager as context_module
    import maitre.agent.loop as loop_module

    spent: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    tokens = _APART[0][0]
    originals = (loop_module.conversation_tokens, context_module.conversation_tokens)
    loop_module.conversation_tokens = _timed_sync(originals[0], tokens, spent, calls)
    context_module.conversation_tokens = _timed_sync(originals[1], tokens, spent, calls)
    wrapped = [(attr, label) for attr, label, _ in _PARTS] + [(attr, label) for label, attr in _APART[1:]]
    for attr, label in wrapped:
        wrap = _timed_async if attr in ("_fit_context", "_ask_model", "_run_calls", "_save") else _timed_sync
        setattr(agent, attr, wrap(getattr(agent, attr), label, spent, calls))
    gate, runs_store = agent.gate, agent.store.runs
    gate.call = _timed_async(gate.call, _GATE, spent, calls)  # type: ignore[method-assign]
    runs_store.save = _timed_async(runs_store.save, _SAVE, spent, calls)
    model_ns = total_ns = tool_ns = model_calls = 0
    try:
        case = _maitre_case(agent, steps)
        for i in range(runs + 5):
            if i == 5:
                spent.clear()
                calls.clear()
                model_ns = total_ns = tool_ns = model_calls = 0
                gc.collect()
                gc.freeze()
            _clock.reset()
            start = time.perf_counter_ns()
            model_calls += await case()
            total_ns += time.perf_counter_ns() - start
            model_ns += _clock.model_ns
            tool_ns += _clock.tool_ns
            del _clock.gaps_ns[:]
    finally:
        gc.unfreeze()
        loop_module.conversation_tokens, context_module.conversation_tokens = originals
        for attr, _ in wrapped:
            delattr(agent, attr)
        del gate.call
        del runs_store.save
    label = {attr: label for attr, label, _ in _PARTS}
    # Make the rows disjoint: _ask_model contains _fit_context and the model; _run_calls the gate
    # (which contains the tool); _save the store.
    spent[label["_ask_model"]] -= model_ns + spent[label["_fit_context"]]
    spent[label["_run_calls"]] -= spent[_GATE]
    spent[_GATE] -= tool_ns
    spent[label["_save"]] -= spent[_SAVE]
    overhead = total_ns - model_ns - tool_ns
    rows: list[tuple[str, float, float]] = []
    for attr, name, parent in _PARTS:
        rows.append(
            (("  " if parent else "") + name, spent[name] / 1000 / model_calls, calls[name] / model_calls)
        )
        if attr == "_run_calls":
            rows.append((_GATE, spent[_GATE] / 1000 / model_calls, calls[_GATE] / model_calls))
        if attr == "_save":
            rows.append((_SAVE, spent[_SAVE] / 1000 / model_calls, calls[_SAVE] / model_calls))
    summed = sum(spent[name] for _, name, parent in _PARTS if not parent) + spent[_GATE] + spent[_SAVE]
    rows.append(
        (
            "rest: run set-up, progress check, loop bookkeeping, ending",
            (overhead - summed) / 1000 / model_calls,
            0.0,
        )
    )
    rows.append(("TOTAL overhead per model call (instrumented)", overhead / 1000 / model_calls, 0.0))
    rows.append(("inside the rows above:", 0.0, 0.0))
    for name, _ in _APART:
        rows.append(("  " + name, spent[name] / 1000 / model_calls, calls[name] / model_calls))
    return rows


async def _breakdown(steps_list: list[int], runs: int, directory: str | None) -> None:
    async def job(sqlite: Stores) -> None:
        for steps in steps_list:
            for label, store in (
                ("default stores", None),
                ("MemoryStores, audit on", MemoryStores()),
                ("SQLite", sqlite),
            ):
                gc.collect()
                parts = await _breakdown_one(_maitre_agent(steps, store), steps, runs)
                print(
                    f"\nmaitre Agent, {label}, runs of {steps} tool steps + 1 answer: mean µs per model call"
                )
                for name, us, per_step in parts:
                    shown = f"{us:8.1f}" if us or per_step else ""
                    count = f"{per_step:5.1f} calls/step" if per_step else ""
                    print(f"  {name:<70} {shown:>8}  {count}")

    await _with_stores(directory, job)


def main(
    quick: bool = False,
    runs: int | None = None,
    steps: list[int] | None = None,
    directory: str | None = None,
    breakdown: bool = False,
) -> None:
    """Print the per-step overhead table for each run length, and the verdict on the 1 ms goal."""
    steps_list = steps or ([10] if quick else [10, 50])
    if breakdown:
        anyio.run(_breakdown, steps_list, runs or (20 if quick else 100), directory)
        return
    count = runs or (40 if quick else 200)
    anyio.run(_run, steps_list, count, 3 if quick else 10, 4 if quick else 8, directory)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke run)")
    parser.add_argument("--runs", type=int, default=None, help="runs per row of 10-step runs (default 200)")
    parser.add_argument(
        "--steps", default=None, help="run lengths in tool steps, comma separated (default 10,50)"
    )
    parser.add_argument("--dir", default=None, help="where the temporary SQLite file goes (default: $TMPDIR)")
    parser.add_argument(
        "--breakdown", action="store_true", help="time the loop's parts inside real runs instead"
    )
    options = parser.parse_args()
    main(
        quick=options.quick,
        runs=options.runs,
        steps=[int(s) for s in options.steps.split(",")] if options.steps else None,
        directory=options.dir,
        breakdown=options.breakdown,
    )
