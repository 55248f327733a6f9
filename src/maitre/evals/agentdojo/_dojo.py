"""The only module that imports AgentDojo: its untyped names, typed as `Any` for the rest of the package."""

from __future__ import annotations

import functools
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]
from agentdojo.agent_pipeline.agent_pipeline import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    load_system_message as _load_system_message,
)
from agentdojo.agent_pipeline.tool_execution import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    tool_result_to_str as _tool_result_to_str,
)
from agentdojo.attacks.base_attacks import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    FixedJailbreakAttack as _FixedJailbreakAttack,
)
from agentdojo.attacks.important_instructions_attacks import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    ImportantInstructionsAttack as _ImportantInstructionsAttack,
)
from agentdojo.base_tasks import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    BaseInjectionTask as _BaseInjectionTask,
)
from agentdojo.functions_runtime import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    FunctionCall as _FunctionCall,
)
from agentdojo.functions_runtime import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    FunctionsRuntime as _FunctionsRuntime,
)
from agentdojo.task_suite.load_suites import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    get_suites as _get_suites,
)
from agentdojo.task_suite.task_suite import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    read_suite_file as _read_suite_file,
)
from agentdojo.task_suite.task_suite import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    validate_injections as _validate_injections,
)

__all__ = [
    "BENCHMARK_VERSION",
    "BaseInjectionTask",
    "FunctionCall",
    "FunctionsRuntime",
    "SUITES",
    "SYSTEM_MESSAGE",
    "injection_texts",
    "load_environment",
    "load_suite",
    "tool_result_to_str",
]

BENCHMARK_VERSION = "v1.2.2"
"""AgentDojo's newest task set in 0.1.35 (banking 144 pairs, slack 105, travel 140, workspace 560)."""
SUITES = ("banking", "slack", "travel", "workspace")

BaseInjectionTask: Any = _BaseInjectionTask
FunctionCall: Any = _FunctionCall
FunctionsRuntime: Any = _FunctionsRuntime
tool_result_to_str: Any = _tool_result_to_str
SYSTEM_MESSAGE: str = str(_load_system_message(None))
"""AgentDojo's default system prompt (the user is Emma Johnson of Blue Sparrow Tech)."""

_ATTACKS: dict[str, Any] = {}


def load_suite(name: str) -> Any:
    """AgentDojo's `TaskSuite` called `name`, at `BENCHMARK_VERSION`."""
    suites: dict[str, Any] = _get_suites(BENCHMARK_VERSION)
    if name not in suites:
        raise KeyError(name)
    return suites[name]


def injection_texts(suite: Any, user_task: Any, injection_task: Any) -> dict[str, str]:
    """AgentDojo's `important_instructions` attack for this pair: vector id -> the text placed there.

    The text asks, in the user's name (Emma Johnson), for the injection task's goal; it is placed in
    every injection vector the user task's ground truth reads (AgentDojo finds them with canaries).
    """
    attack = _ATTACKS.get(suite.name)
    if attack is None:
        attack = _FixedJailbreakAttack(_ImportantInstructionsAttack._JB_STRING, suite, None)
        attack.user_name = "Emma Johnson"
        _ATTACKS[suite.name] = attack
    texts: dict[str, str] = attack.attack(user_task, injection_task)
    return texts


@functools.lru_cache(maxsize=8)
def _environment_text(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return _read_suite_file(name, "environment.yaml", None), tuple(_vector_defaults(name).items())


def _vector_defaults(name: str) -> dict[str, str]:
    defaults: dict[str, str] = load_suite(name).get_injection_vector_defaults()
    return defaults


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_environment(suite: Any, injections: dict[str, str]) -> Any:
    """`suite.load_and_inject_default_environment(injections)`, the same environment, faster.

    AgentDojo re-reads and re-dumps the suite's YAML on every call and parses it with the
    pure-Python loader (about 0.4 s for workspace); here the template is read once per suite and
    the injected text is parsed with libyaml's safe loader when it is there (the same YAML).
    """
    template, defaults = _environment_text(suite.name)
    vector_defaults = dict(defaults)
    _validate_injections(injections, vector_defaults)
    text = template.format(**dict(vector_defaults, **injections))
    return suite.environment_type.model_validate(yaml.load(text, Loader=_LOADER))
