"""Seed 001's weekend planner on maitre: two tools, called in parallel, the budget respected.

With ANTHROPIC_API_KEY or OPENAI_API_KEY set it can run on a real model (see `model_from_env`);
by default it runs on deterministic rules (`ScriptedModel`), which say they are rules.

Run it: `.venv/bin/python examples/seed001_weekend/weekend.py`
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import anyio
from pydantic import Field

from maitre import Principal, Toolbox
from maitre.agent import Agent, Limits, Run
from maitre.models import Rule, ScriptedModel, after_tool, call, last_tool_result, last_user_says

WEATHER = {
    "pune": {"temp_c": 31, "sky": "sunny", "rain_chance_pct": 10},
    "mumbai": {"temp_c": 29, "sky": "heavy rain", "rain_chance_pct": 90},
}
EVENTS = {
    "pune": [
        {"name": "Sunrise trek to Sinhagad Fort", "start": "05:30", "outdoor": True, "price_inr": 0},
        {"name": "Pottery workshop", "start": "11:00", "outdoor": False, "price_inr": 1500},
        {"name": "Indie music night", "start": "20:00", "outdoor": False, "price_inr": 600},
    ],
}
City = Annotated[str, Field(pattern=r"^[A-Za-z .'-]{2,40}$", description="City name, e.g. 'Pune'")]

box = Toolbox()


@box.tool
def get_weather(city: City) -> dict[str, Any]:
    """Get Saturday's weather forecast for a city. Use before suggesting outdoor plans.
    Do not use it for other days."""
    data = WEATHER.get(city.lower())
    if data is None:
        from maitre import ToolError

        raise ToolError("NOT_FOUND", f"No weather data for '{city}'. Known cities: {', '.join(WEATHER)}.")
    return data


@box.tool
def find_events(
    city: City, max_price_inr: Annotated[int, Field(ge=0, le=100_000)] = 100_000
) -> dict[str, Any]:
    """List events happening on Saturday in a city, optionally under a maximum price.
    Use it to fill a plan. Do not use it to book anything."""
    events = EVENTS.get(city.lower())
    if events is None:
        from maitre import ToolError

        raise ToolError("NOT_FOUND", f"No events for '{city}'. Known cities: {', '.join(EVENTS)}.")
    return {"events": [e for e in events if e["price_inr"] <= max_price_inr]}


SYSTEM = (
    "You are a friendly weekend planner. Always check the weather before recommending outdoor events. "
    "Respect the user's budget. Finish with a short timed plan."
)


def plan(request: Any) -> str:
    weather = json.loads(last_tool_result(request, "get_weather").content)
    events = json.loads(last_tool_result(request, "find_events").content)["events"]
    lines = [f"Saturday looks {weather['sky']} at {weather['temp_c']}°C. Here's your plan:"]
    total = 0
    for event in sorted(events, key=lambda e: e["start"]):
        if event["outdoor"] and weather["rain_chance_pct"] > 50:
            continue
        total += event["price_inr"]
        lines.append(f"{event['start']}  {event['name']} ({event['price_inr']} rupees)")
    lines.append(f"Total: {total} rupees.")
    return "\n".join(lines)


def scripted_planner() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(
                "check weather and events together",
                when=last_user_says("plan my saturday"),
                then=lambda req: [
                    call("get_weather", city="Pune"),
                    call("find_events", city="Pune", max_price_inr=1000),
                ],
            ),
            Rule("write the timed plan", when=after_tool("find_events", ok=True), then=plan),
        ]
    )


def model_from_env() -> Any:
    import os

    if os.environ.get("ANTHROPIC_API_KEY"):
        from maitre.models.anthropic import AnthropicModel

        return AnthropicModel()
    if os.environ.get("OPENAI_API_KEY"):
        from maitre.models.openai import OpenAIChatModel

        return OpenAIChatModel("gpt-4.1-mini")
    return scripted_planner()


async def run_weekend(model: Any = None) -> Run:
    agent = Agent(model or scripted_planner(), box, system=SYSTEM, limits=Limits(max_steps=8))
    return await agent.run(
        "Plan my Saturday in Pune. Budget 1,000 rupees. I love being outdoors.", Principal(user="u1")
    )


if __name__ == "__main__":
    result = anyio.run(run_weekend, model_from_env())
    print(result.final_text, file=sys.stderr)
