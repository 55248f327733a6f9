"""Seed 004's loop on maitre: allowlist, validation, policy, approval pause, id mapping, a real step brake."""

import anyio
import order_loop

from maitre import Principal
from maitre.agent import Agent, Limits, RunStatus, StopReason, ToolResultMessage
from maitre.models import Rule, ScriptedModel, always, call


def test_unknown_tool_then_status_then_a_refund_paused_for_approval_and_run_once():
    paused, finished, refunds = anyio.run(order_loop.run_order_loop)
    results = [m for m in paused.messages if isinstance(m, ToolResultMessage)]
    assert results[0].error_code == "UNKNOWN_TOOL" and "orders.get_order_status" in results[0].content
    assert paused.status is RunStatus.PAUSED and paused.pending[0].tool == "orders.create_refund_request"
    assert refunds == [{"order_id": "ORD-00001042", "reason": "quality_issue", "amount": "1200.00"}]
    assert finished.status is RunStatus.FINISHED and "RF-00001" in finished.final_text
    assistant_ids = [c.id for m in finished.messages if m.role == "assistant" for c in m.tool_calls]
    result_ids = [m.call_id for m in finished.messages if isinstance(m, ToolResultMessage)]
    assert result_ids == assistant_ids  # every call answered, in order, by id


def test_the_step_limit_ends_the_run_with_a_message_not_an_exception():
    counter = iter(range(100))
    stubborn = ScriptedModel(
        [
            Rule(
                "again",
                when=always,
                then=lambda r: call("orders.get_order_status", order_id=f"ORD-{next(counter):08d}"),
            )
        ]
    )
    agent = Agent(
        stubborn, order_loop.build([]), limits=Limits(max_steps=6, no_progress_steps=10, loop_refusals=10)
    )
    run = anyio.run(agent.run, "where is my order", Principal(user="alice", tenant="acme"))
    assert run.status is RunStatus.STOPPED
    assert run.stop_reason in (StopReason.MAX_STEPS, StopReason.LOOP_DETECTED, StopReason.BUDGET_EXCEEDED)
    assert run.final_text.startswith("I stopped before finishing")
