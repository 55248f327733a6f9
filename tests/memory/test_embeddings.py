"""The shared embedder contract: shapes, unit norms, determinism, meaning, pinning, threads."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from maitre.embeddings import (
    Embedder,
    EmbeddingModelError,
    HashingEmbedder,
    MiniLMEmbedder,
    default_embedder,
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return default_embedder()


def test_minilm_shapes_norms_and_protocol(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    vecs = minilm.embed(["I live in Pune", "vegetarian food only", "x" * 5000])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    q = minilm.embed_query("which city do I live in")
    assert q.shape == (384,) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


def test_minilm_ranks_by_meaning(minilm: MiniLMEmbedder) -> None:
    docs = minilm.embed(
        [
            "The user lives in Bengaluru",
            "The user is allergic to peanuts",
            "Get Saturday's weather forecast for a city",
        ]
    )
    q = minilm.embed_query("which town is my home in")
    scores = docs @ q
    assert int(np.argmax(scores)) == 0
    allergy = minilm.embed_query("what nuts can't I eat")
    assert int(np.argmax(docs @ allergy)) == 1


def test_minilm_batch_order_does_not_change_vectors(minilm: MiniLMEmbedder) -> None:
    texts = [f"fact number {i} " + "word " * (i % 7) for i in range(70)]
    together = minilm.embed(texts)
    alone = np.stack([minilm.embed_query(t) for t in texts[:5]])
    assert np.allclose(together[:5], alone, atol=1e-4)


def test_minilm_is_thread_safe_and_deterministic() -> None:
    fresh = MiniLMEmbedder(threads=1)
    texts = ["my dentist is Dr Rao", "I speak Kannada and Hindi", "I moved to Bengaluru in March"]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: fresh.embed(texts), range(16)))
    for r in results[1:]:
        assert np.allclose(r, results[0], atol=1e-6)


def test_minilm_hash_mismatch_raises_clearly(tmp_path: Path) -> None:
    wrong = MiniLMEmbedder(model_sha256="0" * 64)
    with pytest.raises(EmbeddingModelError, match="sha256"):
        wrong.embed(["hello"])
    # A modified tokenizer file is refused even though it still parses.
    from maitre.embeddings import _TOKENIZER_FILE

    copy = tmp_path / "tokenizer.json"
    shutil.copyfile(_TOKENIZER_FILE, copy)
    copy.write_bytes(copy.read_bytes() + b"\n")
    tampered = MiniLMEmbedder(tokenizer_path=copy)
    with pytest.raises(EmbeddingModelError, match="pinned"):
        tampered.embed(["hello"])


def test_default_embedder_is_one_instance() -> None:
    assert default_embedder() is default_embedder()


def test_hashing_embedder_is_deterministic_and_unit() -> None:
    e = HashingEmbedder(dim=64)
    assert isinstance(e, Embedder) and e.dim == 64
    a = e.embed(["Pune city", "Pune city", ""])
    assert a.shape == (3, 64) and a.dtype == np.float32
    assert np.array_equal(a[0], a[1])
    assert abs(float(np.linalg.norm(a[0])) - 1.0) < 1e-6
    assert not a[2].any()
    assert float(e.embed_query("city") @ a[0]) > 0
    assert np.array_equal(HashingEmbedder(64).embed_query("x y"), e.embed_query("x y"))
    with pytest.raises(ValueError):
        HashingEmbedder(dim=2)


def test_a_memory_store_without_the_embeddings_extra_matches_words_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`pip install maitre` alone: the default store falls back to words, with one notice."""
    import logging

    from maitre import embeddings
    from maitre.memory import MemoryStore

    monkeypatch.setattr(embeddings, "missing_embedding_packages", lambda: ["onnxruntime"])
    monkeypatch.setattr(embeddings, "_noticed", False)
    with caplog.at_level(logging.WARNING):
        store = MemoryStore.sqlite(":memory:")
        try:
            assert isinstance(store.embedder, embeddings.LexicalOnlyEmbedder)
            store.write("asha", "city", "Bengaluru")
            assert [h.fact.key for h in store.retrieve("asha", "which city: Bengaluru?")] == ["city"]
            assert store.retrieve("asha", "what vehicle do I drive?") == []
        finally:
            store.close()
    notices = [r.getMessage() for r in caplog.records if "maitre[embeddings]" in r.getMessage()]
    assert len(notices) == 1 and "words only" in notices[0]
