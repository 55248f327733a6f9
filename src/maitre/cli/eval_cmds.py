"""`maitre eval CASES --agent FILE:FACTORY` and `maitre eval compare A.json B.json`.

`maitre eval CASES ...` is `maitre eval run CASES ...`: the group runs its `run` command when the
first word is not one of its commands, so seed 003's one-liner reads as it should while
`compare` (and later ones) sit beside it. The evaluation itself is `maitre.evals`; this module
parses, draws the progress bar on stderr, prints the summary and writes the report files.

Routing cases (`expected_route`) are scored by `--router`: `learned` (`maitre.Router()` as shipped),
`words` (the same, by words only), `keyword` (seed 002's baseline) or `FILE:ATTR` of a router or a
zero-argument function that returns one. Without `--router`, a file with routing cases is routed by
a `Router` whose tool evidence is the agent's toolbox when `--agent` is given (the factory is called
once more, on stores of its own, to read it), else by `learned`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer
from typer.core import TyperGroup

from .agentdojo_cmds import agentdojo_command
from .app import App, console
from .errors import CommandError
from .reports import exit_if_missed, write_report

if TYPE_CHECKING:
    from ..models.base import Model

__all__ = ["EXIT_CODES", "app", "eval_compare", "eval_run", "load_router", "model_factory"]

EXIT_CODES = """Exit status: 0 every threshold met (or none set), 1 a threshold missed, 2 a usage error
(a bad case file, an unknown metric, an agent or router that cannot be loaded, cases that need an
agent run without --agent, --router for a file with no routing case)."""


class _RunByDefault(TyperGroup):
    """A group whose first word, when it names no command, is the `run` command's first argument."""

    default_command = "run"
    """The command a first word that names none runs (the README's command check reads it too)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


app = App(
    cls=_RunByDefault,
    help="Evaluate an agent on cases (maitre eval CASES --agent FILE:FACTORY), a router on routing cases "
    "(maitre eval CASES --router FILE:FACTORY), or compare two reports.\n\n" + EXIT_CODES,
)

_BUILTIN_MODELS = ("test", "anthropic", "openai", "openai-compatible", "local")


def model_factory(spec: str | None) -> Callable[[], Model] | None:
    """A fresh model per trial from `--model`, or None to keep the agent's own.

    `test` is `maitre.testing.TestModel`; `anthropic[:MODEL]`, `openai[:MODEL]` and
    `openai-compatible:URL[#MODEL]` are the adapters, as `maitre demo --model` names them; anything
    else is `FILE.py:NAME` or `module:NAME` of a Model, or of a function that returns one (a
    `ScriptedModel` with other rules, say). A Model object is shared by every trial; name a function
    to give each trial a fresh one (a scripted model's `once` rules keep their count otherwise).
    """
    if spec is None:
        return None
    kind = spec.partition(":")[0]
    if kind == "test":
        from ..testing import TestModel

        return TestModel
    if kind in _BUILTIN_MODELS:
        from .demo import model_from_spec

        model_from_spec(spec)  # refuse a missing key or extra now, before any trial runs
        return lambda: model_from_spec(spec)
    from ..models.base import Model
    from .loader import load_object

    target = load_object(spec)
    if isinstance(target, Model):
        return lambda: target
    if callable(target):
        return lambda: _model(target(), spec)
    raise CommandError(f"--model {spec} is a {type(target).__name__}, not a Model", code=2)


def _model(value: Any, spec: str) -> Model:
    from ..models.base import Model

    if not isinstance(value, Model):
        raise CommandError(f"--model {spec} returned a {type(value).__name__}, not a Model", code=2)
    return value


def _agent_factory(spec: str) -> Callable[[Any], Any]:
    from .loader import load_object

    factory = load_object(spec)
    if not callable(factory):
        raise CommandError(
            f"--agent {spec} is a {type(factory).__name__}; name a function that takes the stores and "
            "returns an Agent",
            code=2,
        )
    try:
        takes_stores = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        takes_stores = True
    return factory if takes_stores else (lambda stores: factory())


_BUILTIN_ROUTERS = ("learned", "words", "keyword")


def load_router(spec: str) -> Any:
    """`--router`: a built-in name, or `FILE:ATTR` of a router, or of a class or zero-argument function
    that makes one."""
    if spec in _BUILTIN_ROUTERS:
        from ..routing import KeywordRouter, Router

        if spec == "keyword":
            return KeywordRouter()
        return Router() if spec == "learned" else Router(embedder=None)
    if ":" not in spec:
        raise CommandError(
            f"--router {spec}: use {', '.join(_BUILTIN_ROUTERS)} or FILE.py:ATTR (MODULE:ATTR) of a router",
            code=2,
        )
    from .loader import load_object

    target = load_object(spec)
    if isinstance(target, type) or (not callable(getattr(target, "route", None)) and callable(target)):
        try:
            target = target()
        except TypeError as exc:
            raise CommandError(
                f"--router {spec} is a function that needs arguments ({exc}); name a router or a "
                "zero-argument function that returns one",
                code=2,
            ) from exc
    if not callable(getattr(target, "route", None)):
        raise CommandError(
            f"--router {spec} is a {type(target).__name__}, not a router (an object with route(request))",
            code=2,
        )
    return target


def _toolbox_router(factory: Callable[[Any], Any], *, embedder: Any = "default") -> Any:
    """The default router beside an agent: `maitre.Router` with the agent's own tools as evidence
    (maitre's runtime tools - notes, tool search - left out: they are not the agent's choices)."""
    from ..evals.records import RUNTIME_TOOLS
    from ..routing import Router
    from ..stores import MemoryStores

    agent = factory(MemoryStores())
    tools = [t for t in agent.gate.toolbox if t.name.rpartition(".")[2] not in RUNTIME_TOOLS]
    return Router(tools=tools or None, embedder=embedder)


@app.command("run")
def eval_run(
    cases: Path = typer.Argument(
        ...,
        help="Cases: a .jsonl (JSON Lines) or .yaml file, seed 003's format (expected_route: routing cases)",
    ),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="MODULE_OR_FILE:ATTR of a function(stores) -> Agent (as maitre runs resume takes); needed "
        "unless every case is a routing case",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Replace the agent's model: test | anthropic[:M] | openai[:M] | openai-compatible:URL[#M][?OPTIONS] | "
        "local[:GGUF] | FILE:ATTR of a Model (default: the factory's own; OPTIONS e.g. temperature=0&seed=7)",
    ),
    router: str | None = typer.Option(
        None,
        "--router",
        help="Route the cases that set expected_route: learned | words | keyword | FILE:ATTR of a router "
        "or a function returning one (default: a Router over the agent's tools with --agent, else learned)",
    ),
    trials: int = typer.Option(
        1, "--trials", "-k", min=1, max=100, help="Trials per case (pass^k for k=1..trials)"
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Write the JSON report here"),
    html_out: Path | None = typer.Option(None, "--html", help="Write the HTML report here"),
    threshold: list[str] = typer.Option(
        [],
        "--threshold",
        help="METRIC=VALUE (in the metric's direction), METRIC>=VALUE or METRIC<=VALUE; repeatable",
    ),
    concurrency: int = typer.Option(1, "--concurrency", min=1, max=64, help="Trials run at the same time"),
) -> None:
    """Run every case --trials times against the agent (and route the routing cases); print the
    summary, write the reports.

    Metrics: pass_rate and pass^k (tau-bench), selection_precision/recall, argument_schema_valid,
    argument_business_valid, argument_exact, error_rate, tool_error_rate, timeout_rate,
    retries_per_call, approvals_per_trial, extra_calls_per_trial, extra_steps_per_trial,
    trajectory_efficiency, tokens_per_trial, cost_usd, ...; for routing cases (expected_route:
    CONTEXT | RETRIEVE | ACT) route_accuracy, route_cost_mean, route_cost_total,
    route_under_call_rate, route_over_call_rate (seed 002's cost: an under-call 10, an over-call 1
    per extra step, unless the router has a cost matrix of its own) and a route confusion matrix.

    Exit status: 0 every threshold met (or none set), 1 a threshold missed, 2 a usage error (a bad
    case file, an unknown metric, an agent or router that cannot be loaded, cases that need an agent
    run without --agent, --router for a file with no routing case).
    """
    from ..evals import build_document, evaluate, load_cases, parse_threshold, run_eval
    from ..evals.report import dumps, render_html, run_header, summary_tables
    from ..evals.report.document import threshold_rows
    from ..progress import progress_bar

    bars = [parse_threshold(t) for t in threshold]
    loaded = load_cases(cases)
    runs = [c.id for c in loaded if c.runs_agent]
    routed = [c.id for c in loaded if c.is_routed]
    if runs and agent is None:
        raise CommandError(
            f"{cases}: {len(runs)} case(s) need an agent run ({', '.join(runs[:3])}"
            f"{', ...' if len(runs) > 3 else ''}); give --agent FILE:FACTORY (only cases with nothing but "
            "an input and an expected_route run without one)",
            code=2,
        )
    if router is not None and not routed:
        raise CommandError(
            f"--router: no case in {cases} sets expected_route, so there is nothing to route", code=2
        )
    factory = _agent_factory(agent) if agent is not None else None
    models = model_factory(model)
    chosen, label = None, ""
    if routed:
        if router is not None:
            chosen = load_router(router)
            label = _router_label(router, chosen)
        elif factory is not None:
            chosen = _toolbox_router(factory)
            label = f"{_router_label('', chosen)} over the agent's tools (the default with --agent)"
        else:
            chosen = load_router("learned")
            label = f"{_router_label('', chosen)} (the default)"
    try:
        with progress_bar(f"{len(loaded)} cases x {trials}") as progress:
            result = anyio.run(
                lambda: run_eval(
                    loaded,
                    factory,
                    trials=trials,
                    model_factory=models,
                    concurrency=concurrency,
                    progress=progress,
                    agent_name=agent or "",
                    cases_file=str(cases),
                    router=chosen,
                    router_label=label,
                )
            )
    finally:
        close = getattr(chosen, "close", None)
        if callable(close):
            close()
    document = build_document(result)
    outcomes = evaluate(bars, document["metrics"])
    document["thresholds"] = threshold_rows(outcomes)
    for line in run_header(document):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    console.print(summary_tables(document))
    if json_out is not None:
        write_report(json_out, dumps(document))
    if html_out is not None:
        write_report(html_out, render_html(document))
    exit_if_missed(outcomes)


def _router_label(spec: str, router: Any) -> str:
    """`keyword`, `learned (by meaning)`, or `examples/router/score.py:make_router: learned (by meaning)`."""
    from ..evals.routing import router_name

    name = router_name(router)
    return name if spec in ("", *_BUILTIN_ROUTERS) else f"{spec}: {name}"


@app.command("compare")
def eval_compare(
    before: Path = typer.Argument(..., help="Report A (the baseline), written with --json"),
    after: Path = typer.Argument(..., help="Report B (the new run)"),
    tolerance: float = typer.Option(
        0.0, "--tolerance", min=0.0, help="A change smaller than this is not a regression"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON"),
    show_all: bool = typer.Option(False, "--all", help="List unchanged metrics and cases too"),
) -> None:
    """Show what regressed from report A to report B, per metric and per case.

    Exit status: 0 no regression, 1 some metric or case regressed, 2 a usage error (a file that is
    not a maitre eval report).
    """
    import json

    from ..evals import compare_documents, load_document
    from ..evals.report import comparison_tables

    comparison = compare_documents(load_document(before), load_document(after), tolerance=tolerance)
    if as_json:
        typer.echo(json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False))
    else:
        console.print(comparison_tables(comparison, show_all=show_all))
    if comparison.regressions:
        raise typer.Exit(1)


# `maitre eval agentdojo`: AgentDojo's suites behind the gate (maitre[agentdojo]); the command
# imports agentdojo only when it runs, so `maitre eval` works without the extra.
app.command("agentdojo")(agentdojo_command)
