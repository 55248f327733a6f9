"""examples/router/score.py runs and prints both routers' scores on the three sets."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from maitre.embeddings import missing_embedding_packages

# loaded by path under a unique name: "score" alone could clash with another example's module
_spec = importlib.util.spec_from_file_location("router_score_example", Path(__file__).with_name("score.py"))
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _module
_spec.loader.exec_module(_module)
main = _module.main


def test_score_prints_both_routers_on_dev_and_held_out_sets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main() == 0
    out = capsys.readouterr().out
    assert re.search(r"keyword \(seed 002\)\s+seed002\s+12/18\s+66\.7%\s+42\.0\s+2\s+4", out)
    for name in ("learned, by words", "learned, by words, argmax") + (
        ("learned, by meaning",) if not missing_embedding_packages() else ()
    ):
        for set_name in ("dev*", "seed002", "stress"):
            assert re.search(rf"^{re.escape(name)}\s+{re.escape(set_name)}\s+\d+/\d+", out, re.M), (
                name,
                set_name,
            )
    assert re.search(
        r"^Where is the deployment runbook documented\?\s+RETRIEVE\s+ACT\s+RETRIEVE\s", out, re.M
    )
