"""The attack plugins shipped with maitre, in the order `maitre redteam` runs them.

Seed 003, exercise C: `unknown_tool`, `cross_tenant`, `idempotency_replay`,
`malicious_parameters`, `description_injection`, `duplicate_writes`, `approval_bypass`.
The OWASP MCP Top 10 families: `tool_poisoning`, `shadowing`, `token_passthrough`,
`excessive_scope`, `result_injection`, `rug_pull`. Each module's docstring says how it decides.

`result_injection` runs late because it taints the caller (on purpose: that is what it tests),
which would hold the writes of the plugins after it; `rug_pull` runs last so that the server has
seen a whole session of traffic before it is listed again.
"""

from __future__ import annotations

from . import (
    approval_bypass,
    cross_tenant,
    description_injection,
    duplicate_writes,
    excessive_scope,
    idempotency_replay,
    malicious_parameters,
    result_injection,
    rug_pull,
    shadowing,
    token_passthrough,
    tool_poisoning,
    unknown_tool,
)
from .base import Family, Plugin

__all__ = ["Family", "PLUGINS", "Plugin"]

PLUGINS: dict[str, Plugin] = {
    module.PLUGIN.name: module.PLUGIN
    for module in (
        unknown_tool,
        description_injection,
        tool_poisoning,
        shadowing,
        cross_tenant,
        malicious_parameters,
        idempotency_replay,
        duplicate_writes,
        approval_bypass,
        excessive_scope,
        token_passthrough,
        result_injection,
        rug_pull,
    )
}
