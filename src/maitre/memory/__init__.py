"""Long-term memory: facts with conflict rules, hybrid retrieval, a profile and real deletion.

`MemoryStore` (sync, for scripts and the CLI) and `AsyncMemoryStore` (for the gate and the agent)
share one implementation; see `maitre.memory.store` for why.
"""

from .model import (
    DEFAULT_MULTI_VALUED,
    DEFAULT_PROFILE_KEYS,
    Candidate,
    DeleteReport,
    Fact,
    Hit,
    MemoryPolicy,
    Origin,
    Profile,
    Status,
    Summary,
    WriteAction,
    WriteOutcome,
)
from .store import MemoryStore

__all__ = [
    "DEFAULT_MULTI_VALUED",
    "DEFAULT_PROFILE_KEYS",
    "Candidate",
    "DeleteReport",
    "Fact",
    "Hit",
    "MemoryPolicy",
    "MemoryStore",
    "Origin",
    "Profile",
    "Status",
    "Summary",
    "WriteAction",
    "WriteOutcome",
]
