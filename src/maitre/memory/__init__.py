"""Long-term memory: facts with conflict rules, hybrid retrieval, a profile and real deletion.

`MemoryStore` (sync, for scripts and the CLI) and `AsyncMemoryStore` (for the gate and the agent)
share one implementation; see `maitre.memory.store` for why.
"""

from .aio import AsyncMemoryStore
from .extract import AsyncExtractor, Extractor, Message, ModelExtractor, RuleExtractor
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
from .toolbox import memory_toolbox

__all__ = [
    "AsyncExtractor",
    "AsyncMemoryStore",
    "Candidate",
    "DEFAULT_MULTI_VALUED",
    "DEFAULT_PROFILE_KEYS",
    "DeleteReport",
    "Extractor",
    "Fact",
    "Hit",
    "MemoryPolicy",
    "MemoryStore",
    "Message",
    "ModelExtractor",
    "Origin",
    "Profile",
    "RuleExtractor",
    "Status",
    "Summary",
    "WriteAction",
    "WriteOutcome",
    "memory_toolbox",
]
