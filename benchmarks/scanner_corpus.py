"""The MCP import scanner on its two corpora: false positives on real servers, attacks caught.

What is measured (`tests/mcp/corpus/`, committed JSON, nothing downloaded):

- legitimate: the tool definitions of public npm and PyPI MCP servers (listed by
  `tests/mcp/corpus/harvest.py`), all scanned together with `scan_servers` as a gateway importing
  every one of them would. False-positive rate = tools with any `high` finding (what
  `scan="block"` keeps out) / tools.
- attacks: the OWASP MCP families (tool poisoning, secrets, cross-server steering and shadowing,
  invisible Unicode, confusables, full-schema poisoning, command and prompt injection, in English,
  Chinese and Japanese), each case with the finding it must raise; rug pulls checked by pinning.
  Detection rate = cases whose expected findings are all reported at `high` / cases.

Also the time to scan the whole legitimate corpus at once (the client scans every peer on import).
`tests/mcp/test_scanner_corpus.py` asserts FP < 2% and detection = 100%.

Usage: `python benchmarks/scanner_corpus.py [--verbose]` (or via `benchmarks/run_all.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from maitre.mcp.scanner import scan_servers

CORPUS = Path(__file__).resolve().parents[1] / "tests/mcp/corpus"


def _measure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scanner_corpus_measure", CORPUS / "measure.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {CORPUS / 'measure.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(
        c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )


def main(verbose: bool = False) -> None:
    measure = _measure()
    servers = measure.load_legit()
    start = time.perf_counter()
    scan_servers(servers)
    scan_s = time.perf_counter() - start
    legit = measure.measure_legit(servers)
    attacks = measure.measure_attacks()

    by_file: dict[str, list[bool]] = defaultdict(list)
    for result in attacks:
        by_file[result.file].append(result.detected)
    caught = sum(r.detected for r in attacks)

    widths = [34, 9, 9, 9]
    print(_row(["corpus", "items", "flagged", "rate"], widths))
    print(_row(["-" * 34, "-" * 9, "-" * 9, "-" * 9], widths))
    print(
        _row(
            [
                f"legitimate ({legit.servers} servers)",
                str(legit.tools),
                str(len(legit.flagged)),
                f"{legit.rate:.2%}",
            ],
            widths,
        )
    )
    for file, detected in sorted(by_file.items()):
        print(
            _row(
                [
                    f"  attack: {file}",
                    str(len(detected)),
                    str(sum(detected)),
                    f"{sum(detected) / len(detected):.0%}",
                ],
                widths,
            )
        )
    print(_row(["attacks (all)", str(len(attacks)), str(caught), f"{caught / len(attacks):.1%}"], widths))
    print()
    print(
        f"false-positive rate {legit.rate:.2%} (goal < 2%), detection rate {caught / len(attacks):.1%} (goal 100%)"
    )
    print(f"{legit.non_english_tools} legitimate tools are described in Chinese or Japanese")
    print(f"scanning all {legit.tools} legitimate tools together: {scan_s:.2f} s")
    if legit.flagged:
        print("\nblocked legitimate tools:")
        for (server, tool), findings in sorted(legit.flagged.items()):
            for f in findings:
                print(f"  {server}/{tool} [{f.kind}] {f.path}: {f.message} - {f.evidence!r}")
    missed = [r for r in attacks if not r.detected]
    if missed:
        print("\nmissed attacks:")
        for r in missed:
            print(f"  {r.file}/{r.id}: expected {r.missing}")
    if verbose:
        print("\nattack cases and their reasons:")
        for r in attacks:
            reasons = "; ".join(f"[{f.kind}] {f.path}: {f.message}" for f in r.findings) or "pinning drift"
            print(f"  {r.file}/{r.id}: {reasons}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--verbose", action="store_true", help="print every attack case with its reasons")
    main(verbose=parser.parse_args().verbose)
