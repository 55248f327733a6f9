"""Seed 001's weekend planner: weather and events in parallel, the budget respected, a timed plan."""

import anyio
import weekend

from maitre.agent import RunStatus


def test_the_planner_calls_both_tools_in_one_step_and_respects_the_budget():
    run = anyio.run(weekend.run_weekend)
    assert run.status is RunStatus.FINISHED
    first_step = run.messages[1]
    assert [c.name for c in first_step.tool_calls] == ["get_weather", "find_events"]
    assert first_step.tool_calls[1].arguments == {"city": "Pune", "max_price_inr": 1000}
    assert "05:30  Sunrise trek to Sinhagad Fort" in run.final_text
    assert "Pottery workshop" not in run.final_text  # 1,500 rupees is over budget
    assert "Total: 600 rupees." in run.final_text
    assert run.final_text.startswith("[rule ")  # a rule, not a model, and it says so
    assert run.steps == 2


def test_an_unknown_city_teaches_the_model_the_known_ones():
    from maitre import Gate, Principal, ToolCall

    result = anyio.run(
        Gate(weekend.box).call,
        ToolCall(id="1", name="get_weather", arguments={"city": "Bangalore"}),
        Principal(user="u"),
    )
    assert result.error.code == "NOT_FOUND" and "Known cities: pune, mumbai" in result.content
