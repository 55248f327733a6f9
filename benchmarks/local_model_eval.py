"""A real small model on this CPU, with constrained tool calls on and off (issue 19, item 6).

The committed case file `benchmarks/data/local_model/cases.jsonl` holds the seeds' scenarios: ten
tool decisions (the order lookup with a malformed id, the weekend planner's parallel calls, the
refund that needs approval, search then call in a 200-tool box, ...) and five recoveries from
errors a schema cannot prevent (an unknown order, an unknown city, no refund for an order that
does not exist, a denied refund, a plan for a city with no events). Each runs through the real
agent, gate and evaluation harness (`maitre.evals.run_eval`), on the demo's tools.

Reported per mode (constrained on / off), with `os.getloadavg()`:

- correct tool decisions: decision cases whose checks all pass (goal on the 0.5B model: >= 9/10
  with constrained decoding);
- valid arguments: calls the gate's validation accepted, of all calls;
- self-corrections: recovery cases that end well after the tool's error (goal >= 4/5);
- real answers: completed runs whose final text is prose, not JSON (goal: all);
- steps, and wall time per step.

Run it where a model is available (nothing is downloaded):

    MAITRE_GGUF=/path/to/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \\
        .venv/bin/python benchmarks/local_model_eval.py            # in process: pip install 'maitre[local]'
    .venv/bin/python benchmarks/local_model_eval.py \\
        --model 'openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder?temperature=0&seed=7'

`--trials N` repeats each case, `--json OUT` writes the numbers, `--cases ID,ID` runs a subset.
Without a model (no `--model`, no `$MAITRE_GGUF`, no shipped chunk packages) it says so and exits 0,
so `make bench` runs everywhere.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from maitre.agent import Agent
from maitre.demo import DemoWorld, build_toolbox, demo_limits
from maitre.demo.story import SYSTEM
from maitre.evals import EvalCase, load_cases, run_eval
from maitre.exceptions import UserError
from maitre.stores import Stores
from maitre.tools import Toolbox

CASES = Path(__file__).parent / "data" / "local_model" / "cases.jsonl"


def filler_box(count: int = 199) -> Toolbox:
    """The 200-tool box of the search case: `shop.cancel_subscription` among `count` look-alikes."""
    shop = Toolbox("shop")

    @shop.tool(effect="write")
    def cancel_subscription(order_id: str) -> str:
        """Cancel the subscription that came with an order. Use it when the customer asks to cancel."""
        return f"Subscription for {order_id} cancelled."

    topics = ["invoice", "coupon", "address", "warranty", "gift card", "review", "wishlist", "loyalty points"]
    for index in range(count):
        topic = topics[index % len(topics)]

        async def handler(arguments: dict[str, Any], topic: str = topic) -> str:
            return f"No {topic} found."

        from maitre.tools import Tool

        shop.add(
            Tool.from_schema(
                name=f"lookup_{topic.replace(' ', '_')}_{index:03d}",
                description=f"Look up a customer's {topic} record number {index}. Do not use it to change anything.",
                input_schema={
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}},
                    "required": ["customer_id"],
                },
                handler=handler,
            )
        )
    return shop


def agent_factory(model: Any, *, search: bool) -> Any:
    def make(stores: Stores) -> Agent:
        box = build_toolbox(DemoWorld())
        if not search:
            return Agent(model, box, stores=stores, system=SYSTEM, limits=demo_limits(model))
        return Agent(
            model,
            [box, filler_box()],
            stores=stores,
            system=SYSTEM + " Use search_tools to find a tool you do not have.",
            limits=demo_limits(model),
            core_tools=["orders.get_order"],
        )

    return make


def model_maker(spec: str | None) -> Callable[[bool], Any]:
    """`make(constrained) -> model`: a fresh adapter per trial for a server (the harness closes each
    trial's model); the one in-process model, its weights loaded once, for a GGUF."""
    from maitre.models.spec import ModelOptions, build_model, parse_model_spec

    if spec:
        parsed = parse_model_spec(spec)
        build_model(parsed)  # refuse a bad string before any trial
        return lambda constrained: build_model(parsed, ModelOptions(constrained=constrained))
    from maitre.models.llama_cpp import LlamaCppModel, find_gguf

    path = find_gguf()  # $MAITRE_GGUF or the shipped chunk packages; a UserError otherwise
    shared = LlamaCppModel(path, n_ctx=8192, temperature=0.0, seed=7)

    def same(constrained: bool) -> Any:
        shared.constrained = constrained
        return shared

    return same


def _is_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


async def run_mode(
    make: Callable[[bool], Any], cases: list[EvalCase], *, constrained: bool, trials: int
) -> dict[str, Any]:
    model = make(constrained)
    plain = [c for c in cases if "search" not in c.tags]
    search = [c for c in cases if "search" in c.tags]
    started = time.monotonic()
    trial_records: list[tuple[EvalCase, Any]] = []
    for group, is_search in ((plain, False), (search, True)):
        if not group:
            continue
        result = await run_eval(
            group,
            agent_factory(model, search=is_search),
            trials=trials,
            model_factory=lambda: make(constrained),
        )
        for case in group:
            trial_records.extend((case, record) for record in result.trials[case.id])
    elapsed = time.monotonic() - started
    decisions = [(c, r) for c, r in trial_records if "decision" in c.tags]
    recoveries = [(c, r) for c, r in trial_records if "recovery" in c.tags]
    calls = [call for _, r in trial_records for call in r.calls]
    steps = sum(r.steps for _, r in trial_records)
    completed = [r for _, r in trial_records if r.stop_reason == "completed"]
    return {
        "constrained": constrained,
        "correct_tool_decisions": [sum(r.passed for _, r in decisions), len(decisions)],
        "valid_arguments": [sum(call.schema_valid for call in calls), len(calls)],
        "self_corrections": [sum(r.passed for _, r in recoveries), len(recoveries)],
        "real_answers": [
            sum(bool(r.final_text.strip()) and not _is_json(r.final_text) for r in completed),
            len(completed),
        ],
        "steps": steps,
        "wall_s": round(elapsed, 1),
        "wall_s_per_step": round(elapsed / steps, 2) if steps else None,
        "failed_cases": sorted({c.id for c, r in trial_records if not r.passed}),
        "trials": [_trial_detail(case, record) for case, record in trial_records],
    }


def _trial_detail(case: EvalCase, record: Any) -> dict[str, Any]:
    """What one trial did, in enough detail to tell a model's mistake from maitre's."""
    return {
        "case": case.id,
        "passed": record.passed,
        "stop_reason": record.stop_reason,
        "steps": record.steps,
        "elapsed_s": round(record.elapsed_s, 1),
        "calls": [
            {
                "tool": call.tool,
                "arguments": call.arguments,
                "known": call.known,
                "schema_valid": call.schema_valid,
                "decision": call.decision,
                "error_code": call.error_code,
            }
            for call in record.calls
        ],
        "final_text": record.final_text[:300],
        "error": record.error,
        "failed_checks": [f"{check.name}: {check.detail}" for check in record.checks if not check.ok],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a --model string (default: the in-process GGUF from $MAITRE_GGUF)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--cases", help="comma-separated case ids (default: all 15)")
    parser.add_argument("--modes", default="on,off", help="constrained modes to run: on,off | on | off")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--details", action="store_true", help="print each trial's calls, checks and answer")
    args = parser.parse_args()

    cases = load_cases(str(CASES))
    if args.cases:
        wanted = set(args.cases.split(","))
        cases = [c for c in cases if c.id in wanted]
    try:
        make = model_maker(args.model)
    except (UserError, ImportError) as exc:
        print(f"local_model_eval: skipped, no model to run: {exc}", file=sys.stderr)
        print("local_model_eval: skipped (set MAITRE_GGUF or pass --model openai-compatible:URL#MODEL)")
        return 0
    model = make(True)
    if not hasattr(model, "constrained"):
        print(
            f"local_model_eval: {args.model} is not a local model (constrained decoding needs one)",
            file=sys.stderr,
        )
        return 2
    rows = []
    for mode in args.modes.split(","):
        load = os.getloadavg()
        row = anyio.run(
            functools.partial(run_mode, make, cases, constrained=mode == "on", trials=args.trials)
        )
        row["loadavg_before"] = [round(x, 2) for x in load]
        rows.append(row)
        print(
            f"constrained={mode:<3} decisions {row['correct_tool_decisions'][0]}/{row['correct_tool_decisions'][1]}"
            f"  valid args {row['valid_arguments'][0]}/{row['valid_arguments'][1]}"
            f"  self-corrections {row['self_corrections'][0]}/{row['self_corrections'][1]}"
            f"  real answers {row['real_answers'][0]}/{row['real_answers'][1]}"
            f"  steps {row['steps']}  {row['wall_s_per_step']} s/step  load {row['loadavg_before']}"
            f"  failed: {', '.join(row['failed_cases']) or '-'}"
        )
        if args.details:
            for trial in row["trials"]:
                print("  " + json.dumps(trial, ensure_ascii=False, default=str))
    if args.json:
        args.json.write_text(json.dumps({"model": getattr(model, "name", ""), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
