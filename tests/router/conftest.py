"""Routers are tuned when built (~1 s by meaning, ~0.5 s by words): build each once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from maitre.embeddings import missing_embedding_packages
from maitre.routing import LabelledRequest, Router, load_requests

HAS_MINILM = not missing_embedding_packages()
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="maitre[embeddings] is not installed")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "router"


@pytest.fixture(scope="session")
def seed002() -> list[LabelledRequest]:
    return load_requests(EXAMPLES / "seed002_heldout.jsonl")


@pytest.fixture(scope="session")
def stress() -> list[LabelledRequest]:
    return load_requests(EXAMPLES / "stress_heldout.jsonl")


@pytest.fixture(scope="session")
def by_meaning() -> Iterator[Router]:
    if not HAS_MINILM:
        pytest.skip("maitre[embeddings] is not installed")
    router = Router()
    yield router
    router.close()


@pytest.fixture(scope="session")
def by_words() -> Iterator[Router]:
    router = Router(embedder=None)
    yield router
    router.close()
