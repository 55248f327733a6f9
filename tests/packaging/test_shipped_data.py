"""Data files that maitre ships instead of depending on a package for them: unmodified, licensed,
hash-checked; and no install step left that skips a package's declared dependencies."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from maitre.embeddings import MINILM_TOKENIZER_SHA256

ROOT = Path(__file__).resolve().parents[2]
MINILM = ROOT / "src" / "maitre" / "data" / "minilm"
BFCL = ROOT / "benchmarks" / "data" / "bfcl"
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
"""The Apache License 2.0 text as published at apache.org/licenses/LICENSE-2.0.txt."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tokenizer_is_the_pinned_file_with_its_licence() -> None:
    assert _sha256(MINILM / "tokenizer.json") == MINILM_TOKENIZER_SHA256
    assert _sha256(MINILM / "LICENSE") == APACHE_2_SHA256
    readme = (MINILM / "README.md").read_text()
    assert MINILM_TOKENIZER_SHA256 in readme and "Apache License 2.0" in readme


def test_bfcl_data_matches_its_sha256sums_and_licence() -> None:
    listed = {}
    for line in (BFCL / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {str(p.relative_to(BFCL)) for p in BFCL.rglob("*.json")}
    assert present == set(listed)
    assert len([n for n in listed if "/" not in n]) == 13  # the single-turn question files
    for name, digest in listed.items():
        assert _sha256(BFCL / name) == digest, name
    assert _sha256(BFCL / "LICENSE") == APACHE_2_SHA256


@pytest.mark.parametrize("path", ["Makefile", ".ci/run", "scripts/wheel_smoke.sh"])
def test_no_install_step_skips_declared_dependencies(path: str) -> None:
    assert "--no-deps" not in (ROOT / path).read_text()
