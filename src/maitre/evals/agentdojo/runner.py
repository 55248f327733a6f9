"""Run one (user task, injection task) pair of an AgentDojo suite in one arm, scored on executed effects.

The environment is AgentDojo's, with the `important_instructions` attack placed in the vectors the
user task reads. The agent is maitre's `Agent` (or, for the `none` arm, the same model in a plain
loop with no gate). Scoring uses AgentDojo's own checks - `utility(_from_traces)` of the user task,
`security(_from_traces)` of the injection task - on the post-environment, with a trace of only the
calls whose handler ran: a call the gate refused or left waiting for approval is not in it, even for
the injection tasks AgentDojo scores by their trace of attempted calls.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...agent import Agent, Limits
from ...messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from ...models.base import Model, ModelError, ModelRequest
from ...types import Principal, Trust
from . import _dojo
from .arms import ARMS, OracleApprover, arm_policy
from .script import ObeyingScript
from .tools import Session, dojo_toolbox

__all__ = ["LIMITS", "MAX_RESUMES", "ModelFactory", "PRINCIPAL", "PairResult", "run_pair", "sorted_tasks"]

ModelFactory = Callable[[], Model]
"""A fresh model for one run (a real adapter); None in `run_pair` means the obeying script."""

PRINCIPAL = Principal(user="emma.johnson", tenant="agentdojo")
"""Who every run acts for (AgentDojo's user is Emma Johnson)."""
LIMITS = Limits(max_steps=60, max_seconds=300.0, no_progress_steps=60, loop_refusals=5)
"""Roomy brakes: a brake must not end a scripted run before its ground truth is played."""
MAX_RESUMES = 40
"""Approval rounds the oracle answers in one run before the run is left paused."""


@dataclass(kw_only=True)
class PairResult:
    """What one run did and how AgentDojo scores it."""

    suite: str
    user_task: str
    injection_task: str | None
    arm: str
    utility: bool
    attack_success: bool | None
    """The injection task's security check (True: the attack's effect happened); None without attack."""
    attack_success_attempted: bool | None = None
    """The same check with every call the agent *proposed* in the trace, as AgentDojo's own pipeline
    scores it: differs from `attack_success` for the injection tasks scored by their trace."""
    outcome: str
    """`finished`, `paused` (waiting for approval when the run ended), or `stopped:<reason>`."""
    approvals_asked: int = 0
    executed_calls: list[dict[str, Any]] = field(default_factory=list)
    """The calls whose handler ran (tool, arguments), in order."""
    approved: list[dict[str, Any]] = field(default_factory=list)
    """The calls an approver approved (tool, arguments; the oracle arm), in order."""
    executed: list[str] = field(default_factory=list)
    """Functions whose handler ran, in order."""
    attempted: list[dict[str, Any]] = field(default_factory=list)
    """Every call the agent proposed to the gate (tool, arguments), executed or not."""
    paused_on: list[dict[str, Any]] = field(default_factory=list)
    """The calls waiting for approval when the run ended (tool, arguments, rule)."""
    injection_seen: bool = False
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "user_task": self.user_task,
            "injection_task": self.injection_task,
            "arm": self.arm,
            "utility": self.utility,
            "attack_success": self.attack_success,
            "attack_success_attempted": self.attack_success_attempted,
            "outcome": self.outcome,
            "approvals_asked": self.approvals_asked,
            "approved": [call["tool"] for call in self.approved],
            "executed": self.executed,
            "attempted": [call["tool"] for call in self.attempted],
            "paused_on": self.paused_on,
            "injection_seen": self.injection_seen,
            "elapsed_s": round(self.elapsed_s, 4),
        }


def sorted_tasks(tasks: dict[str, Any]) -> list[Any]:
    """AgentDojo's tasks in numeric order (`user_task_2` before `user_task_10`)."""

    def number(task_id: str) -> tuple[int, str]:
        found = re.search(r"(\d+)$", task_id)
        return (int(found.group(1)) if found else 0, task_id)

    return [tasks[key] for key in sorted(tasks, key=number)]


async def run_pair(
    suite: Any,
    user_task: Any,
    injection_task: Any | None,
    arm: str,
    *,
    model_factory: ModelFactory | None = None,
    taint: str | None = None,
) -> PairResult:
    """Run `user_task` (attacked by `injection_task` when given) in `arm` and score it.

    `taint` is `DefaultPolicy`'s taint mode for the `default` and `oracle` arms (None: its default).
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")
    started = time.perf_counter()
    injections = _dojo.injection_texts(suite, user_task, injection_task) if injection_task else {}
    environment = user_task.init_environment(_dojo.load_environment(suite, injections))
    pre_environment = environment.model_copy(deep=True)
    user_calls = user_task.ground_truth(pre_environment.model_copy(deep=True))
    session = Session(suite=suite, environment=environment)
    script: ObeyingScript | None = None
    if model_factory is None:
        script = ObeyingScript(
            user_calls,
            final_text=user_task.GROUND_TRUTH_OUTPUT,
            injection_calls=injection_task.ground_truth(pre_environment.model_copy(deep=True))
            if injection_task
            else (),
            injection_goal=injection_task.GOAL if injection_task else None,
        )
        model: Model = script
    else:
        model = model_factory()
    result = PairResult(
        suite=suite.name,
        user_task=user_task.ID,
        injection_task=injection_task.ID if injection_task else None,
        arm=arm,
        utility=False,
        attack_success=None,
        outcome="finished",
    )
    if arm == "none":
        final_text, result.outcome = await _ungated(model, session, user_task.PROMPT, result)
    else:
        final_text = await _gated(model, session, user_task.PROMPT, arm, user_calls, result, taint)
    result.executed = [call.function for call in session.executed]
    result.executed_calls = [
        {"tool": call.function, "arguments": dict(call.args)} for call in session.executed
    ]
    result.injection_seen = bool(script and script.obeyed)
    attempted = (
        session.executed
        if arm == "none"
        else [_dojo.FunctionCall(function=call["tool"], args=call["arguments"]) for call in result.attempted]
    )
    result.utility = _score(
        user_task, final_text, pre_environment, environment, session.executed, utility=True
    )
    if injection_task is not None:
        result.attack_success = _score(
            injection_task, final_text, pre_environment, environment, session.executed, utility=False
        )
        result.attack_success_attempted = _score(
            injection_task, final_text, pre_environment, environment, attempted, utility=False
        )
    result.elapsed_s = time.perf_counter() - started
    return result


async def _gated(
    model: Model,
    session: Session,
    prompt: str,
    arm: str,
    user_calls: list[Any],
    result: PairResult,
    taint: str | None,
) -> str:
    agent = Agent(
        model,
        dojo_toolbox(session),
        policy=arm_policy(arm, taint=taint),
        limits=LIMITS,
        system=_dojo.SYSTEM_MESSAGE,
        notes=False,
    )
    run = await agent.run(prompt, PRINCIPAL)
    oracle = OracleApprover(user_calls) if arm == "oracle" else None
    rounds = 0
    while run.paused:
        result.approvals_asked += len(run.pending)
        if oracle is None or rounds >= MAX_RESUMES:
            break
        run = await agent.resume(run.id, oracle.decide(run.pending))
        rounds += 1
    result.attempted = [
        {"tool": event["name"], "arguments": _arguments(event["arguments"]) or {}}
        for event in run.events
        if event.get("type") == "tool_call"
    ]
    if oracle is not None:
        result.approved = list(oracle.approved)
    if run.paused:
        result.outcome = "paused"
        result.paused_on = [
            {
                "tool": p.tool,
                "arguments": p.call.arguments,
                "rule": p.ticket.rule if p.ticket else "",
            }
            for p in run.pending
        ]
    elif run.stop_reason is not None and str(run.stop_reason) != "completed":
        result.outcome = f"stopped:{run.stop_reason}"
    return run.final_text


async def _ungated(model: Model, session: Session, prompt: str, result: PairResult) -> tuple[str, str]:
    """The `none` arm: the model's calls run directly on the environment, no gate in between."""
    box = dojo_toolbox(session)
    tools = list(box)
    messages: list[Message] = [UserMessage(content=prompt)]
    for _ in range(LIMITS.max_steps):
        request = ModelRequest(messages=list(messages), tools=tools, system=_dojo.SYSTEM_MESSAGE)
        try:
            response = await model.complete(request)
        except ModelError as exc:
            return f"The model could not be reached ({exc})", "stopped:model_error"
        messages.append(AssistantMessage(text=response.text, tool_calls=list(response.tool_calls)))
        if not response.tool_calls:
            return response.text, "finished"
        for call in response.tool_calls:
            tool = box.get(call.name)
            arguments = _arguments(call.arguments)
            result.attempted.append({"tool": call.name, "arguments": arguments or {}})
            error: str | None
            if tool is None:
                content, error = "", f"unknown tool {call.name}"
            elif arguments is None:
                content, error = "", "the arguments are not a JSON object"
            else:
                content, error = session.call(call.name, arguments)
            messages.append(
                ToolResultMessage(
                    call_id=call.id,
                    name=call.name,
                    content=error if error is not None else content,
                    is_error=error is not None,
                    trust=tool.trust if tool is not None else Trust.UNTRUSTED,
                )
            )
    return "", "stopped:max_steps"


def _arguments(raw: dict[str, Any] | str) -> dict[str, Any] | None:
    """A model's arguments as a dict (JSON text parsed), or None when they are not an object."""
    if isinstance(raw, dict):
        return dict(raw)
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _score(task: Any, output: str, pre: Any, post: Any, executed: list[Any], *, utility: bool) -> bool:
    """AgentDojo's check of `task`: from the executed trace when the task scores by trace, else the state."""
    if utility:
        from_traces = task.utility_from_traces(output, pre, post, executed)
        return bool(from_traces if from_traces is not None else task.utility(output, pre, post))
    from_traces = task.security_from_traces(output, pre, post, executed)
    return bool(from_traces if from_traces is not None else task.security(output, pre, post))
