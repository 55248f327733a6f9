"""`ScriptedModel`: deterministic rules in place of a language model, for tests and the offline demo.

It is not a model and says so: every text it writes starts with `[rule <name>]` (unless the host
shows the rule apart: `label=False`, then `last_rule`), and its responses report
`model="scripted"`. Rules are tried in order; the first whose `when` matches the request answers.
A rule answers with text, tool calls, or both - computed from the request, so a rule can read the
tool results the gate sent back (for example to fix a call after a teaching error).

```python
model = ScriptedModel([
    Rule("weather first", when=last_user_says("Plan my Saturday"),
         then=lambda req: [call("get_weather", city="Pune"), call("find_events", city="Pune")]),
    Rule("answer", when=after_tool("find_events"), then=lambda req: "Here is your plan ..."),
])
```

Token usage is measured with the offline tokenizer over what a real model would have read and
written, so budgets, cost tables and the context manager behave as they would with a model.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import ToolResultMessage, UserMessage, conversation_tokens
from ..tokens import count_tokens
from ..types import ToolCall
from .base import ModelRequest, ModelResponse, Usage

__all__ = [
    "Reply",
    "Respond",
    "Rule",
    "ScriptedModel",
    "after_tool",
    "always",
    "call",
    "last_tool_result",
    "last_user_says",
    "tool_error",
]

Reply = str | ToolCall | list[ToolCall | str] | ModelResponse
Respond = Callable[[ModelRequest], Reply] | Reply
_ids = itertools.count(1)


def call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call as a model would write it (a fresh id each time)."""
    return ToolCall(id=f"rule_call_{next(_ids)}", name=name, arguments=arguments)


@dataclass(kw_only=True)
class _Rule:
    name: str
    when: Callable[[ModelRequest], bool]
    then: Respond
    once: bool = False
    used: int = 0


def Rule(name: str, *, when: Callable[[ModelRequest], bool], then: Respond, once: bool = False) -> _Rule:
    """A rule: when `when(request)` is true, answer with `then` (a reply, or a function of the request)."""
    return _Rule(name=name, when=when, then=then, once=once)


# -- conditions -----------------------------------------------------------------------------------------


def always(request: ModelRequest) -> bool:
    return True


def _last_user(request: ModelRequest) -> UserMessage | None:
    return next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)


def last_user_says(fragment: str) -> Callable[[ModelRequest], bool]:
    """The latest user message contains `fragment` and no tool has answered since."""

    def check(request: ModelRequest) -> bool:
        if request.messages and not isinstance(request.messages[-1], UserMessage):
            return False
        user = _last_user(request)
        return user is not None and fragment.lower() in user.content.lower()

    return check


def last_tool_result(request: ModelRequest, name: str | None = None) -> ToolResultMessage | None:
    """The newest tool result (optionally of tool `name`) in the current turn."""
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return None
        if isinstance(message, ToolResultMessage) and (name is None or message.name.endswith(name)):
            return message
    return None


def _latest_results(request: ModelRequest) -> list[ToolResultMessage]:
    """The tool results of the latest step (everything after the last assistant message)."""
    results: list[ToolResultMessage] = []
    for message in reversed(request.messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.append(message)
    return results[::-1]


def after_tool(name: str, *, ok: bool | None = None) -> Callable[[ModelRequest], bool]:
    """The latest step returned a result of tool `name` (ok=True: a success; ok=False: an error)."""

    def check(request: ModelRequest) -> bool:
        for result in _latest_results(request):
            if result.name == name or result.name.endswith("." + name):
                return ok is None or result.is_error is not ok
        return False

    return check


def tool_error(code: str) -> Callable[[ModelRequest], bool]:
    """The last tool result is an error with this code."""

    def check(request: ModelRequest) -> bool:
        last = request.messages[-1] if request.messages else None
        return isinstance(last, ToolResultMessage) and last.is_error and last.error_code == code

    return check


# -- the model ------------------------------------------------------------------------------------------


class ScriptedModel:
    """Deterministic rules that stand in for a model. See the module docstring.

    Args:
        rules: tried in order; the first whose `when` matches answers.
        fallback: the text when no rule matches.
        label: start every text with `[rule <name>]` (the default). A host that shows the rule
            another way (the demo prints it apart, dimmed) turns it off and reads `last_rule`.
    """

    name = "scripted"
    otel_provider = "maitre.scripted"
    """`gen_ai.provider.name` on its `chat` spans: a custom name, since no provider answers."""

    def __init__(
        self, rules: Sequence[_Rule], *, fallback: str = "I have nothing more to do.", label: bool = True
    ) -> None:
        self.rules = list(rules)
        self.fallback = fallback
        self.label = label
        self.requests: list[ModelRequest] = []
        """Every request received, for tests to inspect (tool definitions sent, messages...)."""
        self.last_rule: str | None = None
        """The name of the rule that gave the latest answer (`fallback` when none matched)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        for rule in self.rules:
            if rule.once and rule.used:
                continue
            if rule.when(request):
                rule.used += 1
                reply = rule.then(request) if callable(rule.then) else rule.then
                return self._respond(rule.name, reply, request)
        return self._respond("fallback", self.fallback, request)

    def _respond(self, name: str, reply: Reply, request: ModelRequest) -> ModelResponse:
        self.last_rule = name
        if isinstance(reply, ModelResponse):
            return reply
        parts = reply if isinstance(reply, list) else [reply]
        texts = [p for p in parts if isinstance(p, str)]
        calls = [p for p in parts if isinstance(p, ToolCall)]
        text = ""
        if texts or not calls:
            text = f"[rule {name}] " + " ".join(texts) if self.label else " ".join(texts)
        usage = Usage(
            input_tokens=_input_tokens(request), output_tokens=count_tokens(text) + _call_tokens(calls)
        )
        return ModelResponse(
            text=text,
            tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls],
            usage=usage,
            stop_reason="tool_use" if calls else "end_turn",
            model="scripted",
        )


def _input_tokens(request: ModelRequest) -> int:
    total = count_tokens(request.system or "") + conversation_tokens(request.messages)
    for tool in request.tools:
        cached = tool.__dict__.get("_definition_tokens")
        if cached is None:
            cached = count_tokens(
                {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            )
            tool.__dict__["_definition_tokens"] = cached
        total += cached
    return total


def _call_tokens(calls: list[ToolCall]) -> int:
    return sum(count_tokens(c.name) + count_tokens(json.dumps(c.arguments, default=str)) for c in calls)
