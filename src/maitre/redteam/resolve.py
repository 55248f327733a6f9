"""Turn what `TARGET` names into a `Target`: a Toolbox, a Gate, an Agent, an MCPApp, or a factory.

A Toolbox is attacked through a fresh `Gate` with the default policy and in-memory stores (what
`Agent(model, box)` would build); a Gate, an Agent or an MCPApp through its own gate (its policy,
stores and budgets). A factory is called with in-memory stores when it takes an argument (the
`FILE:FACTORY` of `maitre runs resume` and `maitre eval`), without one otherwise.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..exceptions import UserError
from ..gate import Gate
from ..stores import MemoryStores
from ..tools import Toolbox
from ..types import Principal
from .targets import GateTarget

__all__ = ["target_from_object"]


def _gate_of(value: Any) -> tuple[Gate, str] | None:
    if isinstance(value, Toolbox):
        return Gate(value, stores=MemoryStores()), "toolbox"
    if isinstance(value, Gate):
        return value, "gate"
    gate = getattr(value, "gate", None)
    if isinstance(gate, Gate):
        return gate, "agent" if type(value).__name__ == "Agent" else "mcp-app"
    return None


async def target_from_object(value: Any, *, label: str, principal: Principal) -> GateTarget:
    """The in-process target for `value` (see the module docstring); a UserError for anything else.

    A factory may be async (a gate over tools imported with `Toolbox.from_mcp` is built with an
    `await`): it is awaited here, in the event loop the attacks run in, where its upstream sessions
    must live.
    """
    found = _gate_of(value)
    if found is None and callable(value) and not isinstance(value, type):
        try:
            takes = bool(inspect.signature(value).parameters)
        except (TypeError, ValueError):
            takes = False
        produced = value(MemoryStores()) if takes else value()
        if inspect.isawaitable(produced):
            produced = await produced
        found = _gate_of(produced)
    if found is None:
        raise UserError(
            f"{label} is a {type(value).__name__}: name a Toolbox, a Gate, an Agent, an MCPApp, or a factory "
            "returning one (or give an MCP server's URL, or --stdio COMMAND)"
        )
    gate, kind = found
    return GateTarget(gate, label=label, kind=kind, principal=principal)
