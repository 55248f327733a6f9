"""Run the chosen plugins against one target, one attack at a time, and collect the cases."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..exceptions import UserError
from ..types import Principal
from .attack import Attack
from .cases import Case
from .effects import EffectLog
from .plugins import PLUGINS, Plugin
from .targets import Target

__all__ = ["RedteamResult", "run_redteam"]

log = logging.getLogger("maitre.redteam")


@dataclass(kw_only=True)
class RedteamResult:
    target: str
    kind: str
    plugins: list[str]
    cases: list[Case]
    notes: dict[str, str] = field(default_factory=dict)
    """Per plugin, why it produced no case (no write tool, no --foreign-id), or how it failed."""
    tools: list[str] = field(default_factory=list)
    """The names the target listed first."""
    measured_by: str = ""
    started_at: float = 0.0
    elapsed_s: float = 0.0


def _cause(exc: BaseException) -> str:
    """The innermost failure of a (nested) exception group, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


_NO_CASE = {
    "cross_tenant": "no --foreign-id PARAM=ID names another tenant's resource for a listed parameter",
    "idempotency_replay": "no write tool a valid call could be made for",
    "duplicate_writes": "no write tool a valid call could be made for",
    "approval_bypass": "no write tool a valid call could be made for",
    "excessive_scope": "no destructive or admin tool is listed",
    "result_injection": "no read result carried an instruction",
}


async def run_redteam(
    target: Target,
    plugins: Sequence[str] | None = None,
    *,
    effects: EffectLog | None = None,
    canaries: Sequence[str] = (),
    foreign_ids: Mapping[str, Sequence[str]] | None = None,
    principal: Principal | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RedteamResult:
    """Every chosen plugin (all, in `PLUGINS` order, by default) against `target`."""
    chosen: list[Plugin] = [PLUGINS[name] for name in PLUGINS if plugins is None or name in plugins]
    started = time.time()
    clock = time.monotonic()
    try:
        tools = await target.list_tools()
    except Exception as exc:  # nothing to attack: a wrong URL, a command that exits, a server down
        raise UserError(f"cannot list the tools of {target.label}: {_cause(exc)}") from exc
    attack = Attack(
        target=target,
        tools=tools,
        effects=effects,
        canaries=tuple(canaries),
        foreign_ids=dict(foreign_ids or {}),
        principal=principal or Principal(user="redteam", tenant="local"),
    )
    cases: list[Case] = []
    notes: dict[str, str] = {}
    for index, plugin in enumerate(chosen):
        try:
            found = await plugin.run(attack)
        except Exception as exc:  # one broken plugin (or a target that hangs up) must not hide the rest
            log.warning("plugin %s failed against %s: %s", plugin.name, target.label, exc)
            notes[plugin.name] = f"failed: {type(exc).__name__}: {exc}"
            found = []
        if not found and plugin.name not in notes:
            notes[plugin.name] = _NO_CASE.get(plugin.name, "no case")
        cases += found
        if progress is not None:
            progress(index + 1, len(chosen))
    return RedteamResult(
        target=target.label,
        kind=target.kind,
        plugins=[p.name for p in chosen],
        cases=cases,
        notes=notes,
        tools=[str(t.get("name")) for t in tools],
        measured_by=attack.measured_by,
        started_at=started,
        elapsed_s=time.monotonic() - clock,
    )
