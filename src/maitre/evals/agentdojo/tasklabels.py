"""Per user task: do its write arguments come only from the user's request or trusted results?

Computed, never written by hand: the user task's ground truth is played on a fresh environment
(no attack) through the same tools and labels the harness uses, with a `maitre.dataflow.Provenance`
seeded the way the agent loop seeds a run's (the user's request and the system prompt) and fed
every trusted result, as the gate feeds it. Each call the data-flow policy gates - an open-world
write or destructive tool, or an egress read - is asked `Provenance.untraced(arguments, schema)`,
the question the policy itself asks. A task is `user-or-trusted` when every such call's values
trace; otherwise `untrusted`, with the untraced argument paths and their values kept as evidence.

A task whose ground truth calls a destructive tool is flagged `destructive`: the risk matrix asks
for approval there whatever the data flow says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...types import Effect, Trust
from . import _dojo
from .tools import Session, dojo_toolbox

__all__ = ["TaskLabel", "label_user_task", "labels_available"]


@dataclass(kw_only=True)
class TaskLabel:
    """The data-flow label of one user task."""

    suite: str
    user_task: str
    label: str
    """`user-or-trusted` or `untrusted`."""
    destructive: bool = False
    """Its ground truth calls a destructive tool (the risk matrix asks for approval anyway)."""
    gated_calls: int = 0
    """Ground-truth calls the data-flow policy looks at (open-world writes, destructive, egress)."""
    untraced: list[dict[str, Any]] = field(default_factory=list)
    """For `untrusted`: each gated call with argument paths that did not trace, their values
    (`arguments`, cut short) and the whole call's arguments (`call`)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "user_task": self.user_task,
            "label": self.label,
            "destructive": self.destructive,
            "gated_calls": self.gated_calls,
            "untraced": self.untraced,
        }


def labels_available() -> bool:
    """Whether this maitre has data-flow tracing (`maitre.dataflow`), which the labels need."""
    import importlib.util

    return importlib.util.find_spec("maitre.dataflow") is not None


def _gated(tool: Any) -> bool:
    if tool.effect in (Effect.WRITE, Effect.DESTRUCTIVE):
        return bool(tool.open_world) or tool.effect is Effect.DESTRUCTIVE
    return bool(getattr(tool, "egress", False))


def label_user_task(suite: Any, user_task: Any) -> TaskLabel:
    """The label of `user_task` from its ground truth (see the module docstring)."""
    from ...dataflow import Provenance

    environment = user_task.init_environment(_dojo.load_environment(suite, {}))
    calls = user_task.ground_truth(environment.model_copy(deep=True))
    session = Session(suite=suite, environment=environment)
    box = dojo_toolbox(session)
    provenance = Provenance()
    provenance.add_request(_dojo.SYSTEM_MESSAGE)
    provenance.add_request(user_task.PROMPT)
    label = TaskLabel(suite=suite.name, user_task=user_task.ID, label="user-or-trusted")
    for step in calls:
        tool = box.get(step.function)
        if tool is None:
            continue
        arguments = dict(step.args)
        if tool.effect is Effect.DESTRUCTIVE:
            label.destructive = True
        if _gated(tool):
            label.gated_calls += 1
            paths = provenance.untraced(arguments, tool.input_schema)
            if paths:
                label.label = "untrusted"
                label.untraced.append(
                    {
                        "tool": step.function,
                        "paths": paths,
                        "arguments": _shown(arguments, paths),
                        "call": _jsonable(arguments),
                    }
                )
        text, error = session.call(step.function, arguments)
        if error is None and tool.trust is Trust.TRUSTED:
            provenance.add_trusted(text)
    return label


def _jsonable(arguments: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(arguments, default=str))
    return data


def _shown(arguments: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """The top-level arguments the untraced paths start in, values cut to 120 characters."""
    heads = {path.split(".")[0].split("[")[0].split(" ")[0] for path in paths}
    return {key: str(value)[:120] for key, value in arguments.items() if key in heads}
