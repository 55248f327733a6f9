"""The demo's answers read as plain sentences; the scripted rule behind each turn travels beside them."""

from pathlib import Path

import pytest

from maitre.demo import run_story, scripted_model
from maitre.models import ModelResponse
from maitre.stores import open_stores

pytestmark = pytest.mark.anyio


async def tell(model, path: Path) -> list[dict]:
    events: list[dict] = []
    async with await open_stores(str(path)) as stores:
        await run_story(model, stores, events.append)
    return events


async def test_final_answers_are_plain_sentences_with_the_rule_apart(tmp_path: Path):
    events = await tell(scripted_model(), tmp_path / "demo.db")
    finished = {e["chapter"]: e for e in events if e["type"] == "run_finished"}
    weekend = finished["weekend"]
    assert weekend["text"].startswith("Saturday looks sunny at 31°C. Your plan:")
    assert weekend["rule"] == "plan: timed plan"
    assert finished["order"]["text"] == "Order A1042 has shipped and arrives Friday."
    assert finished["order"]["rule"] == "order: answer"
    assert not any(e.get("text", "").startswith("[rule") for e in events)
    # a brake's own message is not a rule's answer, so it names no rule
    assert finished["loop"]["stop_reason"] == "loop_detected" and "rule" not in finished["loop"]
    turns = [e["rule"] for e in events if e["type"] == "model_call" and e["chapter"] == "weekend"]
    assert turns == ["plan: weather and events at once", "plan: timed plan"]


async def test_a_model_that_is_not_scripted_adds_no_rule(tmp_path: Path):
    class Plain:
        name = "plain"

        async def complete(self, request):
            return ModelResponse(text="Nothing to do.", model="plain")

    events = await tell(Plain(), tmp_path / "demo.db")
    assert not any("rule" in e for e in events)
