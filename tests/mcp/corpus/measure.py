"""Measure the import scanner on the committed corpora: false positives on real servers, attacks caught.

Used by `tests/mcp/test_scanner_corpus.py` (which asserts the rates) and `benchmarks/scanner_corpus.py`
(which prints the table). Nothing here touches the network: both corpora are JSON in this folder.

- Legitimate (`legit/*.json`): every server's tools, scanned *together* with `scan_servers` in the
  manifest's order, as a gateway importing all of them at once would (the hardest case for
  cross-server references and shadowing). A tool is a false positive when it has any `high`
  finding, since `high` is what `scan="block"` keeps out.
- Attacks (`attacks/*.json`): each case lists the servers to scan together, the target tool and the
  findings expected on it (kind and path); it is detected when every expected finding is there, at
  `high`. Rug pulls are pinning's job: they are checked with `check_drift`, not the scanner.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maitre.mcp.pinning import Lockfile, check_drift
from maitre.mcp.scanner import Finding, scan_servers

__all__ = ["AttackResult", "LegitResult", "load_attacks", "load_legit", "measure_attacks", "measure_legit"]

HERE = Path(__file__).parent
LEGIT = HERE / "legit"
ATTACKS = HERE / "attacks"


def load_legit(directory: Path = LEGIT) -> dict[str, list[dict[str, Any]]]:
    """`{server: [tool definitions]}` in the manifest's (sorted) order."""
    manifest = json.loads((directory / "MANIFEST.json").read_text(encoding="utf-8"))
    servers: dict[str, list[dict[str, Any]]] = {}
    for name in manifest["servers"]:
        body = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
        servers[name] = body["tools"]
    return servers


def load_attacks(directory: Path = ATTACKS) -> list[dict[str, Any]]:
    """Every attack file's body, with its file name as `file`."""
    return [
        {"file": path.stem, **json.loads(path.read_text(encoding="utf-8"))}
        for path in sorted(directory.glob("*.json"))
    ]


@dataclass(kw_only=True)
class LegitResult:
    servers: int
    tools: int
    flagged: dict[tuple[str, str], list[Finding]]
    """(server, tool) -> its high findings, for the tools that would be blocked."""
    by_kind: dict[str, int] = field(default_factory=dict)
    """How many blocked tools each finding kind accounts for (a tool can count under several)."""
    non_english_tools: int = 0
    """Tools whose description has CJK or kana text."""

    @property
    def rate(self) -> float:
        return len(self.flagged) / self.tools if self.tools else 0.0


@dataclass(kw_only=True)
class AttackResult:
    file: str
    id: str
    detected: bool
    missing: list[dict[str, str]]
    """Expected findings that were not reported at high."""
    findings: list[Finding]
    """The high findings on the target tool (the reasons it would be blocked)."""


def _has_cjk(text: str) -> bool:
    return any(0x3040 <= ord(ch) <= 0x30FF or 0x4E00 <= ord(ch) <= 0x9FFF for ch in text)


def measure_legit(servers: dict[str, list[dict[str, Any]]] | None = None) -> LegitResult:
    servers = load_legit() if servers is None else servers
    flagged: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in scan_servers(servers):
        if finding.severity == "high":
            flagged[(finding.server, finding.tool)].append(finding)
    by_kind: dict[str, int] = defaultdict(int)
    for findings in flagged.values():
        for kind in {f.kind for f in findings}:
            by_kind[kind] += 1
    tools = [t for ts in servers.values() for t in ts]
    return LegitResult(
        servers=len(servers),
        tools=len(tools),
        flagged=dict(flagged),
        by_kind=dict(by_kind),
        non_english_tools=sum(1 for t in tools if _has_cjk(str(t.get("description", "")))),
    )


def measure_attacks(files: list[dict[str, Any]] | None = None) -> list[AttackResult]:
    files = load_attacks() if files is None else files
    results: list[AttackResult] = []
    for body in files:
        for case in body.get("cases", []):
            target = case["target"]
            high = [
                f
                for f in scan_servers(case["servers"])
                if f.severity == "high" and f.server == target["server"] and f.tool == target["tool"]
            ]
            missing = [
                want
                for want in case["expect"]
                if not any(f.kind == want["kind"] and f.path == want.get("path", f.path) for f in high)
            ]
            results.append(
                AttackResult(
                    file=body["file"],
                    id=case["id"],
                    detected=bool(high) and not missing,
                    missing=missing,
                    findings=high,
                )
            )
        for pull in body.get("rug_pulls", []):
            lockfile = Lockfile(HERE / "unused.lock")
            lockfile.pin(pull["server"], [pull["pinned"]])
            report = check_drift(pull["server"], [pull["offered"]], lockfile)
            kinds = {d.kind for d in report.drift if d.name == pull["offered"]["name"]}
            detected = pull["expect"]["drift"] in kinds and pull["offered"]["name"] in report.blocked
            # The scanner has nothing to say about the new text: that is why pinning exists.
            results.append(
                AttackResult(
                    file=body["file"],
                    id=pull["id"],
                    detected=detected,
                    missing=[] if detected else [{"kind": "pinning", "path": "drift"}],
                    findings=[],
                )
            )
    return results
