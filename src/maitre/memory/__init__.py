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
`maitre.memory.forget`; what makes two spellings one fact for a tombstone (and one key, through
`KeyVocabulary`): `maitre.memory.identity`; the shared embedder: `maitre.embeddings`.

Layer: a door. Memory imports the core (`maitre.tools`, `maitre.types`, `maitre.embeddings`,
`maitre.tokens`) and no other door; see `maitre` for the layer rules.
"""

import warnings
from typing import Any

from .aio import AsyncMemoryStore
from .extract import AsyncExtractor, ConversationTurn, Extractor, ModelExtractor, RuleExtractor
from .identity import DEFAULT_VOCABULARY, KeyVocabulary
from .model import (
    DEFAULT_MULTI_VALUED,
    DEFAULT_PROFILE_KEYS,
    Candidate,
    DeleteReport,
    Episode,
    Fact,
    Hit,
    MemoryHit,
    MemoryPolicy,
    Origin,
    Profile,
    Status,
    Summary,
    WriteAction,
    WriteOutcome,
)
from .model_extractor import ExtractionError, ExtractionStats
from .search import Fusion
from .store import MemoryStore
from .toolbox import memory_toolbox

__all__ = [
    "AsyncExtractor",
    "AsyncMemoryStore",
    "Candidate",
    "ConversationTurn",
    "DEFAULT_MULTI_VALUED",
    "DEFAULT_PROFILE_KEYS",
    "DEFAULT_VOCABULARY",
    "DeleteReport",
    "Episode",
    "ExtractionError",
    "ExtractionStats",
    "Extractor",
    "Fact",
    "Fusion",
    "Hit",
    "KeyVocabulary",
    "MemoryHit",
    "MemoryPolicy",
    "MemoryStore",
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


def __getattr__(name: str) -> Any:
    if name == "Message":
        warnings.warn(
            "maitre.memory.Message is deprecated; it is ConversationTurn (the agent's messages are "
            "maitre.messages)",
            DeprecationWarning,
            stacklevel=2,
        )
        return ConversationTurn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
