"""Tool search: a local hybrid index, the `search_tools` meta-tool, and what tool definitions cost.

Seed 000: 200 tools at ~150 tokens each cost 30,000 tokens on every model call and make the model
pick the wrong tool. Keep a small core set plus `search_tools` loaded; what the search reveals
becomes callable from the next step. This package does that with any model, offline:

- `ToolIndex` - BM25 (SQLite FTS5) + offline embeddings, fused; incremental; abstains; splits
  multi-step requests into their steps; loads any catalogue (`add_definitions`).
- `VectorCache` - tool vectors on disk by definition hash, so a new process opens a large index
  without re-embedding it (`ToolIndex(vector_cache=path)`).
- `search_tools_toolbox` - the meta-tool; each reveal goes to a `RevealLog`.
- `ToolVisibility` - one run's core + revealed tools; `definitions(format)` is what the model sees.
- `estimate_tool_costs` - seed 000's cost table with measured token counts.

Layer: a door. Search imports the core (`maitre.tools`, `maitre.embeddings`, ...) and no other
door; the agent loop imports it. See `maitre` for the layer rules.
"""

from .cost import CostReport, CostScenario, estimate_tool_costs, search_tool_tokens
from .index import SearchHit, ToolEntry, ToolIndex
from .meta import MAX_SEARCH_K, SEARCH_TOOLS_DESCRIPTION, search_tools_toolbox
from .reveal import SEARCH_TOOL_NAME, RevealedTool, RevealLog, RevealRecord, ToolVisibility, reveal_in_run
from .vectors import VectorCache

__all__ = [
    "CostReport",
    "CostScenario",
    "MAX_SEARCH_K",
    "RevealLog",
    "RevealRecord",
    "RevealedTool",
    "SEARCH_TOOLS_DESCRIPTION",
    "SEARCH_TOOL_NAME",
    "SearchHit",
    "ToolEntry",
    "ToolIndex",
    "ToolVisibility",
    "VectorCache",
    "estimate_tool_costs",
    "reveal_in_run",
    "search_tool_tokens",
    "search_tools_toolbox",
]
