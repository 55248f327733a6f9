"""A report whose case text and model output are hostile HTML, for the escaping tests."""

from __future__ import annotations

from typing import Any

import anyio

from maitre import Agent, Toolbox
from maitre.evals import EvalCase, build_document, run_eval
from maitre.messages import UserMessage
from maitre.models import Rule, ScriptedModel, after_tool, call, last_user_says
from maitre.stores import Stores

SCRIPT = "<script>document.title='pwned'</script>"
IMAGE = "<img src=x onerror=\"document.title='pwned'\">"
CLOSE = "</pre></details></svg><script>document.title='pwned'</script>"
MARKUP = "[bold red]not markup[/bold red]"

box = Toolbox("t")


@box.tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def _said(request: Any) -> str:
    return next(m.content for m in reversed(request.messages) if isinstance(m, UserMessage))


def factory(stores: Stores) -> Agent:
    model = ScriptedModel(
        [
            Rule(
                "echo", when=last_user_says("look"), then=lambda r: call("t.lookup", query=_said(r) + CLOSE)
            ),
            Rule("answer", when=after_tool("lookup"), then=lambda r: "Answer: " + IMAGE + CLOSE),
        ]
    )
    return Agent(model, box, stores=stores, notes=False)


CASES = [
    EvalCase.model_validate(
        {
            "id": MARKUP + SCRIPT,
            "input": "look up " + IMAGE,
            "expected_tool": "lookup" + SCRIPT,
            "expected_arguments": {"query": {"$contains": SCRIPT}},
            "forbidden_tools": [IMAGE],
            "tags": [SCRIPT],
        }
    ),
    EvalCase.model_validate({"id": "plain", "input": "look at this", "expected_tool": "lookup"}),
]


def hostile_document() -> dict[str, Any]:
    result = anyio.run(lambda: run_eval(CASES, factory, trials=2, agent_name=IMAGE, cases_file=SCRIPT))
    return build_document(result)
