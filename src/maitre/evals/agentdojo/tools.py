"""AgentDojo's tools as maitre tools, bound to one run's environment, recording what executed.

Each suite tool becomes a schema tool: the input schema is its pydantic `parameters` model's JSON
Schema, the labels come from `labels.labels_for` (the stated rule), and the handler runs the
function through AgentDojo's own `FunctionsRuntime` on the run's environment and renders the result
the way AgentDojo shows it to a model (`tool_result_to_str`, YAML). Only a handler that ran appends
to `Session.executed`: a call the gate refused, or that waits for approval, is not there, which is
what scoring on executed effects needs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ...tools import Tool, Toolbox
from ...types import Risk, ToolError
from . import _dojo
from .labels import FACTS, ToolLabels, labels_for

__all__ = ["Session", "dojo_toolbox", "tool_labels"]

_TOOL_FIELDS = frozenset(f.name for f in dataclasses.fields(Tool))


@dataclass(kw_only=True)
class Session:
    """One run's AgentDojo environment and the calls that executed on it, in order."""

    suite: Any
    environment: Any
    executed: list[Any] = field(default_factory=list)
    """AgentDojo `FunctionCall`s of every handler that ran (errors included: the call reached the service)."""

    def __post_init__(self) -> None:
        self.runtime = _dojo.FunctionsRuntime(self.suite.tools)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, str | None]:
        """Run one function on the environment: (rendered result, error text or None)."""
        self.executed.append(_dojo.FunctionCall(function=name, args=dict(arguments)))
        result, error = self.runtime.run_function(self.environment, name, arguments)
        if error is not None:
            return "", str(error)
        return str(_dojo.tool_result_to_str(result)), None


def tool_labels(suite: str, tool: str) -> ToolLabels:
    """The rule's labels for one tool of a suite (KeyError for a tool the facts table lacks)."""
    return labels_for(FACTS[suite][tool])


def dojo_toolbox(session: Session) -> Toolbox:
    """The suite's tools as a maitre `Toolbox` whose handlers act on `session`.

    The tools are built (schemas checked) once per suite; each session gets copies with its own
    handlers, which costs microseconds instead of the milliseconds a schema check takes.
    """
    box = Toolbox()
    for prototype in _prototypes(session.suite):
        box.add(dataclasses.replace(prototype, handler=_handler(session, prototype.name)))
    return box


_PROTOTYPES: dict[tuple[str, int], list[Tool]] = {}


def _prototypes(suite: Any) -> list[Tool]:
    key = (suite.name, id(suite))
    tools = _PROTOTYPES.get(key)
    if tools is None:
        tools = _PROTOTYPES[key] = [_tool(suite.name, function) for function in suite.tools]
    return tools


def _handler(session: Session, name: str) -> Callable[[dict[str, Any]], Awaitable[str]]:
    async def handler(arguments: dict[str, Any]) -> str:
        text, error = session.call(name, arguments)
        if error is not None:
            raise ToolError("INVALID_STATE", error[:500])
        return text

    return handler


async def _unbound(arguments: dict[str, Any]) -> str:
    raise ToolError("INVALID_STATE", "this AgentDojo tool is not bound to an environment")


def _tool(suite: str, function: Any) -> Tool:
    name: str = function.name
    labels = tool_labels(suite, name)
    schema: dict[str, Any] = function.parameters.model_json_schema()
    schema.pop("title", None)

    metadata: dict[str, Any] = {
        "effect": labels.effect,
        "risk": Risk.LOW,
        "trust": labels.trust,
        "open_world": labels.open_world,
    }
    if "egress" in _TOOL_FIELDS:  # the data-flow gate's label; older gates ignore reads' arguments
        metadata["egress"] = labels.egress
    return Tool.from_schema(
        name=name,
        description=function.description,
        input_schema=schema,
        handler=_unbound,
        **metadata,
    )
