"""`maitre redteam` against real targets: the weak server's faults are found (executed, leaked), the
same tools on maitre's default policy are blocked, the permissive gate executes what the policy
would have held, and across the three every plugin shows a blocked and an executed case."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest

from maitre import Gate, Principal
from maitre.redteam import PLUGINS, EffectLog, GateTarget, McpTarget, RedteamResult, Target, run_redteam
from maitre.redteam.resolve import target_from_object
from maitre.stores import MemoryStores

from .servers import GOVERNED, HINTS, WEAK, governed_http, weak_http

ACME = Principal(user="mallory", tenant="acme")


def _attack(target: Target, effects: Path) -> RedteamResult:
    async def go() -> RedteamResult:
        try:
            return await run_redteam(
                target,
                effects=EffectLog(effects),
                canaries=HINTS["canaries"],
                foreign_ids=HINTS["foreign_ids"],
                principal=ACME,
            )
        finally:
            await target.aclose()

    return anyio.run(go)


def _attack_import(effects: Path) -> RedteamResult:
    """The weak server imported into maitre (examples/redteam/guarded_import.py), attacked in process."""
    sys.path.insert(0, str(GOVERNED.parent))
    try:
        import guarded_import
    finally:
        sys.path.remove(str(GOVERNED.parent))

    async def go() -> RedteamResult:
        target = await target_from_object(guarded_import.make_gate, label="import", principal=ACME)
        try:
            return await run_redteam(
                target,
                effects=EffectLog(effects),
                canaries=HINTS["canaries"],
                foreign_ids=HINTS["foreign_ids"],
                principal=ACME,
            )
        finally:
            await target.aclose()

    return anyio.run(go)


def _governed_module():
    sys.path.insert(0, str(GOVERNED.parent))
    try:
        import governed
    finally:
        sys.path.remove(str(GOVERNED.parent))
    return governed


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[RedteamResult, Path]]:
    """One run of every plugin against each target (each with a side channel of its own)."""
    out: dict[str, tuple[RedteamResult, Path]] = {}
    base = tmp_path_factory.mktemp("redteam")
    weak = base / "weak.jsonl"
    with weak_http(weak) as url:
        out["weak"] = (_attack(McpTarget(url=url), weak), weak)
    stdio = base / "weak-stdio.jsonl"
    out["weak-stdio"] = (
        _attack(McpTarget(command=f"{sys.executable} {WEAK} --stdio --effects {stdio}"), stdio),
        stdio,
    )
    served, stores = base / "served.jsonl", base / "served.db"
    with governed_http(served, stores) as url:  # the red team approves in the server's stores
        out["served"] = (
            _attack(McpTarget(url=url, approver_stores=str(stores), tenant="acme"), served),
            served,
        )
    governed = _governed_module()
    imported = base / "import.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAITRE_REDTEAM_EFFECTS", str(imported))
        out["import"] = (_attack_import(imported), imported)
    local = base / "default.jsonl"
    permissive = base / "permissive.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MAITRE_REDTEAM_EFFECTS", str(local))
        gate = Gate(governed.box, stores=MemoryStores())  # as maitre redteam FILE:box builds it: audited
        out["default"] = (
            _attack(GateTarget(gate, label="default", kind="gate", principal=ACME), local),
            local,
        )
        patch.setenv("MAITRE_REDTEAM_EFFECTS", str(permissive))
        allow_all = Gate(governed.box, policy=governed.AllowAll())
        out["permissive"] = (
            _attack(GateTarget(allow_all, label="permissive", kind="gate", principal=ACME), permissive),
            permissive,
        )
    return out


def _outcomes(result: RedteamResult) -> dict[str, str]:
    return {case.id: case.outcome for case in result.cases}


def test_the_weak_server_is_caught_by_every_plugin(results) -> None:
    weak, effects = results["weak"]
    outcomes = _outcomes(weak)
    through = {case.plugin for case in weak.cases if case.outcome != "blocked"}
    assert through == set(PLUGINS)  # every plugin found the fault the weak server has on purpose
    assert outcomes["unknown_tool/hidden:admin_reset"] == "executed"
    assert outcomes["cross_tenant/get_ticket:ticket_id=T-2001"] == "leaked"
    assert outcomes["token_passthrough/echo:whoami"] == "leaked"  # the bearer token came back
    assert outcomes["rug_pull/refund"] == "executed"
    traversal = [c for c in weak.cases if c.id.startswith("malicious_parameters/traversal:read_file")]
    assert traversal and all(c.outcome == "leaked" for c in traversal)
    assert "root:x:0:0" in traversal[0].attempts[0].response
    sql = next(c for c in weak.cases if c.id.startswith("malicious_parameters/sql:search_tickets"))
    assert sql.outcome == "leaked" and "CANARY-GLOBEX-4417" in sql.attempts[0].response
    replay = next(c for c in weak.cases if c.id == "idempotency_replay/refund")
    assert replay.outcome == "executed" and sum(len(a.effects) for a in replay.attempts) == 2
    loop = next(c for c in weak.cases if c.id == "duplicate_writes/refund")
    assert sum(len(a.effects) for a in loop.attempts) == 5
    # The side channel agrees with the report: the refunds it counted are the refunds sent.
    lines = [json.loads(line) for line in effects.read_text().splitlines()]
    assert sum(1 for line in lines if line["tool"] == "refund") >= 7


def test_the_weak_server_over_stdio_finds_the_same_faults(results) -> None:
    http, _ = results["weak"]
    stdio, _ = results["weak-stdio"]
    no_token = {c.plugin for c in stdio.cases if c.outcome != "blocked"}
    assert no_token == set(PLUGINS)  # stdio carries no bearer token; the credential parameter remains
    assert "token_passthrough/echo:whoami" not in _outcomes(stdio)
    assert {c.id for c in http.cases} - {c.id for c in stdio.cases} == {"token_passthrough/echo:whoami"}


def test_the_weak_server_imported_into_maitre_is_held(results) -> None:
    """maitre's MCP client in front of the same hostile server: scanned, pinned, every call held."""
    result, _ = results["import"]
    assert [(c.id, c.outcome) for c in result.cases if c.outcome != "blocked"] == []
    assert "weak.lookup_weather" not in result.tools and "weak.send_email" not in result.tools  # kept out
    rug = next(c for c in result.cases if c.plugin == "rug_pull")
    assert "removed ['weak.refund']" in rug.why  # the rug pull withdrew the tool it changed
    replayed = next(c for c in result.cases if c.id == "approval_bypass/weak.read_file:replayed")
    assert [len(a.effects) for a in replayed.attempts] == [1, 0]  # approved once, ran once, never again
    crossed = [c for c in result.cases if c.id.endswith(":other-tool")]
    assert crossed and {c.attempts[-1].error_code for c in crossed} == {"INVALID_STATE"}  # not another tool's


@pytest.mark.parametrize("name", ["default", "served"])
def test_maitre_default_policy_blocks_every_attack(results, name: str) -> None:
    result, _ = results[name]
    through = [(c.id, c.outcome, c.why) for c in result.cases if c.outcome != "blocked"]
    # Including result_injection's new-run case: the red team found that a caller could shed the
    # door's per-principal taint by naming a run id it had not used (fixed in gate/pipeline.py).
    assert through == []
    plugins = {c.plugin for c in result.cases}
    assert plugins == set(PLUGINS)  # every plugin had something to try, and it was blocked
    codes = {a.error_code for c in result.cases for a in c.attempts}
    assert {"PERMISSION_DENIED", "INVALID_ARGUMENTS", "APPROVAL_REQUIRED"} <= codes


@pytest.mark.parametrize("name", ["default", "served"])
def test_an_approval_cannot_be_replayed_or_edited_once_given(results, name: str) -> None:
    result, _ = results[name]
    outcomes = _outcomes(result)
    for what in ("forged", "undecided", "edited-pending", "edited-approved", "replayed"):
        assert outcomes[f"approval_bypass/support.refund:{what}"] == "blocked"
    replayed = next(c for c in result.cases if c.id == "approval_bypass/support.refund:replayed")
    used, again = replayed.attempts
    assert len(used.effects) == 1 and not used.is_error  # the approved refund ran once ...
    assert again.effects == []  # ... and its replay ran nothing
    if name == "default":  # in process, each attempt carries the gate's own audit entry
        forged = next(c for c in result.cases if c.id == "approval_bypass/support.refund:forged")
        audit = forged.attempts[-1].audit
        assert audit is not None and audit["decision"] == "approval_invalid"
        assert audit["error_code"] == "INVALID_STATE"


def test_the_permissive_gate_executes_what_the_policy_would_hold(results) -> None:
    result, _ = results["permissive"]
    outcomes = _outcomes(result)
    assert outcomes["excessive_scope/support.delete_ticket"] == "executed"
    assert outcomes["approval_bypass/support.delete_ticket:no-approval-step"] == "executed"
    assert outcomes["result_injection/support.search_tickets->support.send_email"] == "executed"
    # What the schema, owner checks and idempotency stop does not depend on the policy.
    for plugin in ("malicious_parameters", "cross_tenant", "idempotency_replay", "duplicate_writes"):
        assert {c.outcome for c in result.cases if c.plugin == plugin} == {"blocked"}


def test_every_plugin_shows_a_blocked_and_an_executed_case_across_the_targets(results) -> None:
    seen: dict[str, set[str]] = {name: set() for name in PLUGINS}
    for result, _ in results.values():
        for case in result.cases:
            seen[case.plugin].add("blocked" if case.outcome == "blocked" else "got through")
    assert all(kinds == {"blocked", "got through"} for kinds in seen.values()), seen


@pytest.mark.parametrize("name", ["default", "served", "permissive", "import"])
def test_no_attack_executes_twice_against_maitre(results, name: str) -> None:
    result, effects = results[name]
    for case in result.cases:
        ran = Counter(json.dumps(e, sort_keys=True) for a in case.attempts for e in a.effects)
        assert all(count == 1 for count in ran.values()), (case.id, ran)
    lines = effects.read_text().splitlines() if effects.exists() else []
    recorded = sum(len(a.effects) for c in result.cases for a in c.attempts)
    # The plain calls approval_bypass makes to learn whether a write is held are not cases.
    assert recorded <= len(lines)
