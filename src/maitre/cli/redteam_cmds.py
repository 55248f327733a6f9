"""`maitre redteam TARGET`: run the attack plugins against a Toolbox, an Agent or an MCP server.

The attacks and their verdicts are `maitre.redteam`; this module parses, resolves the target,
prints the summary and writes the reports in `maitre eval`'s formats (JSON, HTML).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio
import typer

from .app import console, err
from .errors import CommandError
from .reports import exit_if_missed, write_report

__all__ = ["EXIT_CODES", "redteam_command"]

EXIT_CODES = """Exit status: 0 every threshold met (by default: no case a gate should block was executed or
leaked), 1 a threshold missed, 2 a usage error (a target that cannot be loaded or listed, an unknown
plugin or metric, a bad --foreign-id)."""


def _plugin_help() -> str:
    from ..redteam import PLUGINS

    return "; ".join(PLUGINS)


def _foreign(values: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for value in values:
        param, sep, ident = value.partition("=")
        if not sep or not param.strip() or not ident.strip():
            raise CommandError(f"--foreign-id {value!r}: write PARAM=ID (ticket_id=T-2001)", code=2)
        out.setdefault(param.strip(), []).append(ident.strip())
    return out


def redteam_command(
    target: str | None = typer.Argument(
        None,
        help="FILE.py:NAME or module:NAME of a Toolbox, Gate, Agent, MCPApp or a factory of one (an Agent "
        "factory takes the stores); or an MCP server's URL (http://127.0.0.1:8000/mcp)",
    ),
    stdio: str | None = typer.Option(
        None, "--stdio", help="Start this command and attack the MCP server on its stdin/stdout"
    ),
    plugin: list[str] = typer.Option([], "--plugin", "-p", help="Run only this plugin (repeatable)"),
    json_out: Path | None = typer.Option(None, "--json", help="Write the JSON report here"),
    html_out: Path | None = typer.Option(None, "--html", help="Write the HTML report here"),
    threshold: list[str] = typer.Option(
        [],
        "--threshold",
        help="METRIC=VALUE, METRIC<=VALUE or METRIC>=VALUE (executed, leaked, attack_success_rate, "
        "blocked_rate, PLUGIN.executed, ...); repeatable (default: executed=0 and leaked=0)",
    ),
    principal: str = typer.Option(
        "redteam", "--principal", help="The attacker's user (a target in this process)"
    ),
    tenant: str = typer.Option("local", "--tenant", help="The attacker's tenant (a target in this process)"),
    effects: Path | None = typer.Option(
        None,
        "--effects",
        help="The side channel: the JSON Lines file the target's tools append to as they act "
        "($MAITRE_REDTEAM_EFFECTS; a temporary one is made for a target in this process or on --stdio)",
    ),
    secret: list[str] = typer.Option(
        [], "--secret", help="A canary that must never come back (another tenant's data); repeatable"
    ),
    foreign_id: list[str] = typer.Option(
        [], "--foreign-id", help="PARAM=ID of another tenant's resource (ticket_id=T-2001); repeatable"
    ),
    timeout: float = typer.Option(
        20.0, "--timeout", min=0.1, max=600.0, help="Seconds one request to an MCP server may take"
    ),
    stores: str | None = typer.Option(
        None,
        "--stores",
        help="An MCP server's stores (maitre serve --stores): a second person of --tenant approves there, "
        "so replays and edits after approval are tried too",
    ),
) -> None:
    """Attack TARGET with maitre's red-team plugins; every case is blocked, executed or leaked.

    Plugins (seed 003 exercise C, then the OWASP MCP Top 10 families): unknown_tool,
    description_injection, tool_poisoning, shadowing, cross_tenant, malicious_parameters,
    idempotency_replay, duplicate_writes, approval_bypass, excessive_scope, token_passthrough,
    result_injection, rug_pull. A target in this process is attacked as a hostile model through its
    gate; an MCP server as a hostile client and an inspector of its listings. A tool executed when the
    side channel (--effects) saw it act or the reply was a result; leaked when a canary came back.

    Exit status: 0 every threshold met (by default: no case a gate should block was executed or
    leaked), 1 a threshold missed, 2 a usage error (a target that cannot be loaded or listed, an
    unknown plugin or metric, a bad --foreign-id).
    """
    from ..progress import progress_bar
    from ..redteam import EFFECTS_ENV, PLUGINS, EffectLog, McpTarget, Target, run_redteam
    from ..redteam.report import (
        build_document,
        check_thresholds,
        dumps,
        parse_threshold,
        render_html,
        summary,
    )
    from ..types import Principal

    if (target is None) == (stdio is None):
        raise CommandError("name one TARGET (FILE:NAME or an http:// URL) or --stdio COMMAND", code=2)
    unknown = [p for p in plugin if p not in PLUGINS]
    if unknown:
        raise CommandError(f"--plugin {unknown[0]!r}: no such plugin; plugins: {_plugin_help()}", code=2)
    bars = [parse_threshold(t) for t in threshold]
    if stores is not None and not (stdio is not None or (target or "").startswith(("http://", "https://"))):
        raise CommandError(
            "--stores is for an MCP server's stores; a target in this process approves itself", code=2
        )
    foreign = _foreign(foreign_id)
    attacker = Principal(user=principal, tenant=tenant)
    remote = target is not None and target.startswith(("http://", "https://"))
    scratch: Path | None = None
    if effects is None and not remote:
        handle, name = tempfile.mkstemp(prefix="maitre-redteam-", suffix=".jsonl")
        os.close(handle)
        scratch = effects = Path(name)
    previous = os.environ.get(EFFECTS_ENV)
    try:
        if effects is not None and not remote:
            os.environ[EFFECTS_ENV] = str(effects.resolve())
        chosen: Target
        loaded: object = None
        if stdio is not None:
            chosen = McpTarget(
                command=stdio,
                env={EFFECTS_ENV: str(effects.resolve())} if effects else None,
                approver_stores=stores,
                tenant=tenant,
                timeout_s=timeout,
            )
        elif remote:
            assert target is not None
            chosen = McpTarget(url=target, approver_stores=stores, tenant=tenant, timeout_s=timeout)
        else:
            from .loader import load_object

            assert target is not None
            loaded = load_object(target)
        log = EffectLog(effects) if effects is not None else None

        async def attack() -> object:
            nonlocal chosen
            if stdio is None and not remote:
                from ..redteam.resolve import target_from_object

                assert target is not None
                chosen = await target_from_object(loaded, label=target, principal=attacker)
            try:
                return await run_redteam(
                    chosen,
                    plugin or None,
                    effects=log,
                    canaries=secret,
                    foreign_ids=foreign,
                    principal=attacker,
                    progress=progress,
                )
            finally:
                await chosen.aclose()

        with progress_bar(f"redteam {target or stdio}") as progress:
            result = anyio.run(attack)
    finally:
        if previous is None:
            os.environ.pop(EFFECTS_ENV, None)
        else:
            os.environ[EFFECTS_ENV] = previous
        if scratch is not None:
            scratch.unlink(missing_ok=True)
    from ..redteam import RedteamResult

    assert isinstance(result, RedteamResult)
    document = build_document(result)
    outcomes = check_thresholds(document, bars)
    console.print(summary(document))
    for name, note in result.notes.items():
        if note.startswith("failed"):
            err.print(f"plugin {name} {note}", highlight=False, markup=False)
    if json_out is not None:
        write_report(json_out, dumps(document))
    if html_out is not None:
        write_report(html_out, render_html(document))
    exit_if_missed(outcomes)
