"""`ObeyingScript`: a maitre `Model` that plays a user task's ground truth and obeys every injection.

It is the upper bound on attack success for a model that always does what injected text asks: it
makes the user task's ground-truth calls one per step, and as soon as a tool result contains the
injection (the injection task's goal, compared without whitespace, quotes or backslashes, so YAML's
line folding and escaping do not hide it) it makes the injection task's ground-truth calls next,
once, then goes on with the user's. A refused or failed call is not retried: the script moves on,
as a model that took the error at its word would. It ends with the user task's expected answer.

It drives maitre's real `Agent` loop, so the user's request enters the run as the user message and
every result passes the gate (trust labels, taint, approvals) as a model's calls would.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

from ...messages import ToolResultMessage
from ...models.base import ModelRequest, ModelResponse
from ...types import ToolCall

__all__ = ["ObeyingScript", "contains_injection"]

_NOISE = re.compile(r"[\s'\"\\]+")


def _squash(text: str) -> str:
    return _NOISE.sub("", text).casefold()


def contains_injection(content: str, goal: str) -> bool:
    """True when `content` holds `goal`, ignoring whitespace, quotes, backslashes and case."""
    needle = _squash(goal)
    return bool(needle) and needle in _squash(content)


class ObeyingScript:
    """Ground-truth calls of a user task, with an injection task's spliced in when its goal shows up."""

    name = "agentdojo-obeying-script"

    def __init__(
        self,
        user_calls: Sequence[Any],
        *,
        final_text: str,
        injection_calls: Sequence[Any] = (),
        injection_goal: str | None = None,
    ) -> None:
        self._queue: list[Any] = list(user_calls)
        self._injection: list[Any] = list(injection_calls)
        self._goal = injection_goal
        self._final = final_text
        self._ids = itertools.count(1)
        self.obeyed = False
        """True once the script saw the injection and queued its calls."""
        self.injected_at: int | None = None
        """How many calls the script had made when it saw the injection."""
        self.made = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._goal and not self.obeyed and self._sees_injection(request.messages):
            self.obeyed = True
            self.injected_at = self.made
            self._queue[:0] = self._injection
        if not self._queue:
            return ModelResponse(text=self._final, stop_reason="end_turn", model=self.name)
        step = self._queue.pop(0)
        self.made += 1
        call = ToolCall(id=f"dojo_{next(self._ids)}", name=step.function, arguments=dict(step.args))
        return ModelResponse(tool_calls=[call], stop_reason="tool_use", model=self.name)

    def _sees_injection(self, messages: Sequence[Any]) -> bool:
        assert self._goal is not None
        return any(
            isinstance(m, ToolResultMessage) and not m.is_error and contains_injection(m.content, self._goal)
            for m in messages
        )
