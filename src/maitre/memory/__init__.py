"""Long-term memory: facts with conflict rules, hybrid retrieval, a profile and real deletion.

```python
mem = MemoryStore("memory.db")                      # SQLite; or "postgresql://..." / MemoryStore.postgres()
mem.write("u1", "city", "Pune", "2026-01-05", "user message")
mem.write("u1", "city", "Bengaluru", "2026-03-20", "user message")    # -> Bengaluru is current
mem.write("u1", "city", "Pune", "2026-01-05", "replayed import")      # -> still Bengaluru
mem.retrieve("u1", "which city should the dentist be in")             # -> [Hit(city = Bengaluru)]
mem.profile("u1").text                                                # -> "city: Bengaluru"
mem.delete("u1", "city")                                              # every copy, plus a tombstone
```

`MemoryStore` (sync, for scripts and the CLI) and `AsyncMemoryStore` (for the gate and the agent)
share one implementation; see `maitre.memory.store` for why. The model-facing door is
`memory_toolbox(store)`; the application-driven door is `store.remember(user, messages)` with a
`RuleExtractor` (default) or a `ModelExtractor`. Conflict rules: `maitre.memory.rules`; deletion:
`maitre.memory.forget`; the shared embedder: `maitre.embeddings`.
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
