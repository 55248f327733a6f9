"""Crash-resumable runs on DBOS Transact, and sagas whose compensations the runtime runs (`maitre[durable]`).

```python
from maitre.durable import DurableAgent, launch, system_database_for

durable = DurableAgent(make_agent(stores))                  # before launch
launch(system_database_for("maitre.db"), executor_id="worker-1")
run = await durable.run("refund order A1042", alice, run_id="r-1")
```

- `maitre.durable.agent`: a run (and each resumption) is a DBOS workflow; each model call and each
  gate call is a recorded step. A process killed anywhere continues from the last recorded step.
- `maitre.durable.worker`: workers with explicit executor ids hold a lease each; a dead executor
  (the gate's dead-owner rule, `maitre.storage.owners`) has its workflows recovered by DBOS's own
  recovery, on whichever worker noticed. Workers build the agent from a `FILE:FACTORY`.
- `maitre.durable.saga`: compensations declared per tool, run by the runtime in reverse order,
  exactly once, through the gate.
- `maitre.durable.runtime`: DBOS's system database (its own file or database, beside maitre's).
"""

from __future__ import annotations

from .._extras import missing_modules, require

if missing_modules("durable"):  # the one-line MissingExtraError naming `pip install 'maitre[durable]'`
    require("durable", "maitre.durable (crash-resumable runs and sagas on DBOS)")

from .agent import (
    DurableAgent,
    DurableGate,
    DurableModel,
    NeedsHuman,
    durable_run,
    get_agent,
    in_doubt,
)
from .runtime import (
    APPLICATION_VERSION,
    default_executor_id,
    executor_id,
    is_launched,
    launch,
    shutdown,
    system_database_for,
)
from .saga import (
    FLAG_FOR_HUMAN,
    RETRY_THEN_COMPENSATE,
    Saga,
    SagaFailed,
    SagaOutcome,
    SagaStep,
    StepPolicy,
    compensates,
    compensation_of,
)
from .worker import DurableWorker, ExecutorLease, executor, executor_leases, run_worker

__all__ = [
    "APPLICATION_VERSION",
    "DurableAgent",
    "DurableGate",
    "DurableModel",
    "DurableWorker",
    "ExecutorLease",
    "FLAG_FOR_HUMAN",
    "NeedsHuman",
    "RETRY_THEN_COMPENSATE",
    "Saga",
    "SagaFailed",
    "SagaOutcome",
    "SagaStep",
    "StepPolicy",
    "compensates",
    "compensation_of",
    "default_executor_id",
    "durable_run",
    "executor",
    "executor_id",
    "executor_leases",
    "get_agent",
    "in_doubt",
    "is_launched",
    "launch",
    "run_worker",
    "shutdown",
    "system_database_for",
]
