"""The runner: fresh stores per trial, approvals decided by a stand-in, what the gate did recorded."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from maitre import Agent, Toolbox, ToolCall, ToolError
from maitre.evals import EvalCase, build_document, run_eval
from maitre.exceptions import UserError
from maitre.models import Rule, ScriptedModel, after_tool, call, last_user_says, tool_error
from maitre.stores import Stores
from maitre.testing import TestModel


def case(**fields: Any) -> EvalCase:
    return EvalCase.model_validate({"id": "c", "input": "refund A1", **fields})


class World:
    """A toolbox whose write records what really ran, and a flaky read that works on its third try."""

    def __init__(self) -> None:
        self.refunds: list[str] = []
        self.attempts = 0
        self.stores: list[Stores] = []
        self.box = Toolbox("shop")

        @self.box.tool(effect="write", risk="high")
        def issue_refund(order_id: str) -> str:
            """Refund an order."""
            self.refunds.append(order_id)
            return f"refunded {order_id}"

        @self.box.tool(retries=2)
        def get_order(order_id: str) -> dict[str, str]:
            """Look up an order."""
            self.attempts += 1
            if self.attempts % 3:
                raise ToolError("TEMPORARY_UNAVAILABLE", "try again")
            return {"order_id": order_id}

    def factory(self, stores: Stores) -> Agent:
        self.stores.append(stores)
        model = ScriptedModel(
            [
                Rule("refund", when=last_user_says("refund"), then=call("shop.issue_refund", order_id="A1")),
                Rule("look", when=last_user_says("look"), then=call("shop.get_order", order_id="A1")),
                Rule(
                    "many",
                    when=last_user_says("many"),
                    then=[call("shop.get_order", order_id=f"A{i}") for i in range(3)],
                ),
                Rule("denied", when=tool_error("APPROVAL_DENIED"), then="The refund was denied."),
                Rule("done", when=after_tool("issue_refund", ok=True), then="Refunded."),
            ]
        )
        return Agent(model, self.box, stores=stores, notes=False)


def test_every_trial_gets_its_own_stores() -> None:
    world = World()
    result = anyio.run(lambda: run_eval([case()], world.factory, trials=3))
    assert len({id(s) for s in world.stores}) == 3
    first_run = result.trials["c"][0].run_id

    async def seen_in(stores: Stores) -> bool:
        return await stores.runs.load(first_run) is not None

    assert anyio.run(seen_in, world.stores[0])
    assert not anyio.run(seen_in, world.stores[1])  # trial 2 never sees trial 1's paused run


def test_on_approval_stop_leaves_the_write_unexecuted() -> None:
    world = World()
    result = anyio.run(
        lambda: run_eval(
            [case(expected_approval=True, expected_stop_reason="approval_required")], world.factory
        )
    )
    [trial] = result.trials["c"]
    assert trial.passed and world.refunds == []
    [refund] = trial.calls
    assert refund.approval_requested and not refund.executed and refund.error_code is None


def test_on_approval_approve_runs_the_write_once_and_deny_never() -> None:
    world = World()
    approved = anyio.run(
        lambda: run_eval([case(on_approval="approve", expected_stop_reason="completed")], world.factory)
    )
    [trial] = approved.trials["c"]
    assert trial.passed, trial.checks
    assert world.refunds == ["A1"]
    [refund] = trial.calls
    assert refund.approval_requested and refund.executed and refund.decision == "approved"
    denied = anyio.run(lambda: run_eval([case(on_approval="deny")], world.factory))
    [trial] = denied.trials["c"]
    assert world.refunds == ["A1"]
    assert trial.calls[0].error_code == "APPROVAL_DENIED" and "denied" in trial.final_text


def test_retries_are_counted_from_the_gate() -> None:
    world = World()
    result = anyio.run(lambda: run_eval([case(input="look A1", expected_tool="get_order")], world.factory))
    [trial] = result.trials["c"]
    [lookup] = trial.calls
    assert lookup.attempts == 3 and lookup.retries == 2 and lookup.error_code is None
    assert build_document(result)["metrics"]["retries_per_call"] == 2.0


def test_calls_beyond_the_per_step_limit_are_recorded_as_refused() -> None:
    world = World()

    def tight(stores: Stores) -> Agent:
        agent = world.factory(stores)
        agent.limits.max_tool_calls_per_step = 1
        return agent

    result = anyio.run(lambda: run_eval([case(input="many")], tight))
    codes = [c.error_code for c in result.trials["c"][0].calls]
    assert len(codes) == 3 and codes[1:] == ["BUDGET_EXCEEDED", "BUDGET_EXCEEDED"]


def test_a_model_factory_replaces_the_agents_model_every_trial() -> None:
    world = World()
    result = anyio.run(
        lambda: run_eval(
            [case(input="anything", expected_tools=["get_order", "issue_refund"])],
            world.factory,
            trials=2,
            model_factory=TestModel,
        )
    )
    assert result.model == "test"
    for trial in result.trials["c"]:
        assert {c.tool for c in trial.calls} == {"shop.get_order", "shop.issue_refund"}
        assert not [c for c in trial.calls if not c.schema_valid]


def test_each_model_the_runner_made_is_closed_after_its_trial() -> None:
    """A model made by `model_factory` is the trial's (an HTTP adapter holds a client): closed when
    the trial ends, once, even when the trial fails; the factory's own agent model is left alone."""
    closed: list[str] = []

    class Closing(TestModel):
        async def aclose(self) -> None:
            closed.append(self.name)

    def broken() -> Closing:
        model = Closing()
        model.name = "broken"

        async def fail(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("provider down")

        model.generate = fail  # type: ignore[method-assign]
        return model

    world = World()
    cases = [case(input="anything", expected_tools=["get_order"])]
    anyio.run(lambda: run_eval(cases, world.factory, trials=3, model_factory=Closing))
    assert closed == ["test"] * 3
    closed.clear()
    anyio.run(lambda: run_eval(cases, world.factory, trials=2, model_factory=broken))
    assert closed == ["broken"] * 2


def test_a_factory_that_raises_fails_its_trial_and_one_that_returns_no_agent_is_a_usage_error() -> None:
    def broken(stores: Stores) -> Agent:
        raise RuntimeError("no model key")

    result = anyio.run(lambda: run_eval([case()], broken))
    [trial] = result.trials["c"]
    assert not trial.passed and "no model key" in (trial.error or "")
    with pytest.raises(UserError, match="not an Agent"):
        anyio.run(lambda: run_eval([case()], lambda stores: "agent"))  # type: ignore[arg-type, return-value]


def test_trials_run_concurrently_with_the_same_outcome_and_report_progress() -> None:
    world = World()
    seen: list[tuple[int, int]] = []
    cases = [case(id=f"c{i}", expected_approval=True) for i in range(4)]
    result = anyio.run(
        lambda: run_eval(
            cases, world.factory, trials=2, concurrency=4, progress=lambda d, t: seen.append((d, t))
        )
    )
    assert [len(result.trials[c.id]) for c in cases] == [2, 2, 2, 2]
    assert all(t.passed and t.trial == i for c in cases for i, t in enumerate(result.trials[c.id]))
    assert seen[0] == (0, 8) and seen[-1] == (8, 8) and len(seen) == 9


def test_a_model_that_reuses_a_call_id_gets_a_record_per_call() -> None:
    world = World()
    same = ToolCall(id="dup", name="shop.get_order", arguments={"order_id": "A1"})
    again = ToolCall(id="dup", name="shop.get_order", arguments={"order_id": "A2"})

    def factory(stores: Stores) -> Agent:
        model = ScriptedModel(
            [
                Rule("first", when=last_user_says("twice"), then=same),
                Rule("second", when=lambda r: len(r.messages) == 3, then=again),
            ],
            fallback="done",
        )
        world.attempts = 2  # get_order now works on the next attempt
        return Agent(model, world.box, stores=stores, notes=False)

    result = anyio.run(lambda: run_eval([case(input="twice")], factory))
    calls = result.trials["c"][0].calls
    assert [(c.call_id, c.arguments, c.step) for c in calls] == [
        ("dup", {"order_id": "A1"}, 1),
        ("dup", {"order_id": "A2"}, 2),
    ]
