"""AgentDojo with maitre's gate in front of its tools, scored on executed effects (`maitre[agentdojo]`).

AgentDojo (`agentdojo==0.1.35`, offline) ships four suites - banking, slack, travel, workspace -
of user tasks and injection tasks. `evaluate` runs each user task alone and under each injection
task, in four arms (`arms`): `none` (no gate), `allow-all` (the gate, a policy that allows
everything), `default` (`DefaultPolicy`, nobody approves: a call needing approval ends the run
paused) and `oracle` (`DefaultPolicy`, an approver who approves exactly the user task's
ground-truth calls). The agent is `ObeyingScript` - the user task's ground-truth calls, and the
injection task's as soon as a result shows the injection: an upper bound for a model that obeys
every injection - or any maitre model adapter, both driven through maitre's own `Agent` loop.

Scoring is AgentDojo's checks on the post-environment with only the calls that executed in the
trace (`runner`): a refused or paused call is no success for the attacker, even where AgentDojo
itself would count the attempt.

The tools' labels come from one rule (`labels`), printed with every report:

- third-party-authored content (emails, files, web pages, messages, channel and user names,
  reviews, calendar entries, transactions' subjects) is `untrusted`;
- a tool that changes state in a service is an open-world `write`; one that removes or cancels is
  `destructive`;
- a read whose arguments reach a third party (`get_webpage`) is `egress=True`.

Each user task is labelled by a script from its ground truth (`tasklabels`): `user-or-trusted`
when every gated call's arguments trace to the user's request or trusted results
(`maitre.dataflow`), else `untrusted`.
"""

from __future__ import annotations

from ._dojo import BENCHMARK_VERSION, SUITES
from .arms import ARMS, AllowAllPolicy, OracleApprover, arm_policy, taint_modes
from .harness import AgentDojoReport, SummaryRow, evaluate, summarise
from .labels import FACTS, LABEL_RULE, ToolFacts, ToolLabels, label_table, labels_for
from .own_attacks import OWN_ATTACKS, own_attacks
from .runner import ModelFactory, PairResult, run_pair, sorted_tasks
from .script import ObeyingScript, contains_injection
from .tasklabels import TaskLabel, label_user_task
from .tools import Session, dojo_toolbox, tool_labels

__all__ = [
    "ARMS",
    "AgentDojoReport",
    "AllowAllPolicy",
    "BENCHMARK_VERSION",
    "FACTS",
    "LABEL_RULE",
    "ModelFactory",
    "OWN_ATTACKS",
    "ObeyingScript",
    "OracleApprover",
    "PairResult",
    "SUITES",
    "Session",
    "SummaryRow",
    "TaskLabel",
    "ToolFacts",
    "ToolLabels",
    "arm_policy",
    "contains_injection",
    "dojo_toolbox",
    "evaluate",
    "label_table",
    "label_user_task",
    "labels_for",
    "own_attacks",
    "run_pair",
    "sorted_tasks",
    "summarise",
    "taint_modes",
    "tool_labels",
]
