"""`maitre redteam`: attack a Toolbox, an Agent's gate or an MCP server, and measure what got through.

Seed 003's exercise C asks for automated tests of unknown tools, cross-tenant ids, idempotency
replay, malicious parameters, description injection, duplicate write loops and approval bypass;
the OWASP MCP Top 10 adds tool poisoning, shadowing, token passthrough, excessive scope,
injection through results and rug pulls. Each is a plugin (`maitre.redteam.plugins`), and each
case it produces is `blocked`, `executed` or `leaked`, decided from effects - a side channel the
target's tools write to (`maitre.redteam.effects`), or, against a server you do not control, its
replies - with the requests and replies as evidence.

Layer: a door beside `maitre.evals`. It imports the core (the gate, tools, the scanner and pins of
`maitre.mcp`) and never `maitre.cli`; the command lives in `maitre.cli.redteam_cmds`.
"""

from .attack import DEFAULT_CANARIES, Attack
from .cases import OUTCOMES, Attempt, Case, Outcome
from .effects import EFFECTS_ENV, EffectLog
from .plugins import PLUGINS, Plugin
from .runner import RedteamResult, run_redteam
from .targets import GateTarget, McpTarget, Reply, Target

__all__ = [
    "Attack",
    "Attempt",
    "Case",
    "DEFAULT_CANARIES",
    "EFFECTS_ENV",
    "EffectLog",
    "GateTarget",
    "McpTarget",
    "OUTCOMES",
    "Outcome",
    "PLUGINS",
    "Plugin",
    "RedteamResult",
    "Reply",
    "Target",
    "run_redteam",
]
