"""What the router measures about a request: nearest labelled examples, nearest tools, cue words.

Two ways to compare a request with the labelled examples, one interface (`ExampleSpace`):

- by meaning, with the offline embedder (`maitre.embeddings`): cosine of sentence embeddings;
- by words, without it: cosine of TF-IDF vectors over lightly stemmed words. Pronouns and
  prepositions are kept on purpose - "I pasted above" is the strongest CONTEXT evidence there is.

The per-route feature is the mean similarity of the `k` most similar examples of that route (k = 3),
which is steadier than the single nearest one. The tool evidence is the best similarity between the
request and a tool of each kind (stored lookups vs live or effectful tools) from a `ToolIndex`.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..search import ToolIndex
from .cues import cue_hits
from .data import CatalogueTool
from .labels import ROUTES, Route

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..embeddings import Embedder

__all__ = [
    "EmbeddingVectoriser",
    "ExampleSpace",
    "FEATURE_NAMES",
    "NEIGHBOURS",
    "RecentEmbeddings",
    "ToolEvidence",
    "Vectoriser",
    "WordVectoriser",
    "cue_counts",
    "route_similarities",
    "words",
]

NEIGHBOURS = 3
"""Examples averaged per route."""

FEATURE_NAMES: tuple[str, ...] = (
    "example_CONTEXT",
    "example_RETRIEVE",
    "example_ACT",
    "cues_CONTEXT",
    "cues_RETRIEVE",
    "cues_ACT",
    "tool_stored",
    "tool_live",
)
"""The feature vector, in order (tool features are 0 for a router without tools)."""

_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words ("pasted" -> "past", "tickets" -> "ticket")."""
    return [_stem(w) for w in _WORD.findall(text.lower().replace("'s", ""))]


class Vectoriser(Protocol):
    def vectors(self, texts: list[str]) -> NDArray[np.float32]: ...


class WordVectoriser:
    """TF-IDF over the examples' words, L2-normalised: similarity by words, no model needed."""

    def __init__(self, corpus: Sequence[str]) -> None:
        documents = [set(words(t)) for t in corpus]
        frequency = Counter(w for d in documents for w in d)
        self._vocabulary = {w: i for i, w in enumerate(sorted(frequency))}
        n = len(documents)
        self._idf = np.array(
            [math.log((1 + n) / (1 + frequency[w])) + 1.0 for w in sorted(frequency)], dtype=np.float32
        )

    def vectors(self, texts: list[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), len(self._vocabulary)), dtype=np.float32)
        for row, text in enumerate(texts):
            for word, count in Counter(words(text)).items():
                column = self._vocabulary.get(word)
                if column is not None:
                    out[row, column] = (1.0 + math.log(count)) * self._idf[column]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: NDArray[np.float32] = out / norms
        return result


class RecentEmbeddings:
    """An `Embedder` that remembers the last few single texts it embedded.

    A request is embedded twice per decision - once against the examples, once by the tool index -
    and the model call is most of the router's latency (~8 ms each on a busy host), so the second
    asks this instead. Thread-safe; batches of several texts pass straight through.
    """

    def __init__(self, embedder: Embedder, size: int = 64) -> None:
        self._embedder = embedder
        self._size = size
        self._recent: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self.name = f"recent({getattr(embedder, 'name', type(embedder).__name__)})"

    @property
    def dim(self) -> int:
        return self._embedder.dim

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        if len(texts) != 1:
            return self._embedder.embed(texts)
        return self.embed_query(texts[0])[None, :]

    def embed_query(self, text: str) -> NDArray[np.float32]:
        with self._lock:
            known = self._recent.get(text)
            if known is not None:
                self._recent.move_to_end(text)
                return known
        vector: NDArray[np.float32] = self._embedder.embed([text])[0]
        with self._lock:
            self._recent[text] = vector
            while len(self._recent) > self._size:
                self._recent.popitem(last=False)
        return vector


class EmbeddingVectoriser:
    """Sentence embeddings from a maitre `Embedder` (rows already L2-normalised)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def vectors(self, texts: list[str]) -> NDArray[np.float32]:
        return self.embedder.embed(texts)


def route_similarities(
    similarities: NDArray[np.float32], labels: Sequence[Route], *, k: int = NEIGHBOURS
) -> list[float]:
    """Per route (`ROUTES` order): mean of the `k` largest similarities to examples of that route."""
    out: list[float] = []
    sims = np.asarray(similarities, dtype=np.float32)
    for route in ROUTES:
        mine = np.sort(sims[[i for i, label in enumerate(labels) if label is route]])[::-1][:k]
        out.append(float(mine.mean()) if mine.size else 0.0)
    return out


class ExampleSpace:
    """The labelled examples as vectors, for "which route do the most similar examples take"."""

    def __init__(self, texts: Sequence[str], labels: Sequence[Route], vectoriser: Vectoriser) -> None:
        self.texts = list(texts)
        self.labels = list(labels)
        self.vectoriser = vectoriser
        self.matrix = vectoriser.vectors(self.texts)

    def similarities(self, request: str) -> NDArray[np.float32]:
        """Cosine of `request` with every example."""
        query = self.vectoriser.vectors([request])[0]
        sims: NDArray[np.float32] = self.matrix @ query
        return sims

    def pairwise(self) -> NDArray[np.float32]:
        """Cosine of every example with every other (the diagonal is set to -inf: never its own neighbour)."""
        sims: NDArray[np.float32] = (self.matrix @ self.matrix.T).astype(np.float32)
        np.fill_diagonal(sims, -np.inf)
        return sims


class ToolEvidence:
    """The nearest tool of each kind for a request, from a `ToolIndex` over the catalogue."""

    def __init__(self, catalogue: Sequence[CatalogueTool], embedder: Embedder | None) -> None:
        self.catalogue = {tool.entry.name: tool for tool in catalogue}
        self.index = ToolIndex(embedder=embedder)
        self.index.add_many([tool.entry for tool in catalogue])

    @property
    def mode(self) -> str:
        return self.index.mode

    def nearest(self, request: str) -> dict[str, tuple[str, float]]:
        """`{"stored": (tool, score), "live": (tool, score)}`: the best tool of each kind (score 0 when
        none matched). Scores are cosines with an embedder; by words, BM25 squashed into [0, 1)."""
        best: dict[str, tuple[str, float]] = {"stored": ("", 0.0), "live": ("", 0.0)}
        for hit in self.index.search(request, k=len(self.catalogue), min_similarity=0.0):
            tool = self.catalogue.get(hit.name)
            if tool is None:
                continue
            if hit.dense_score is not None:
                score = max(0.0, hit.dense_score)
            else:
                raw = hit.lexical_score or 0.0
                score = raw / (raw + 5.0)
            if score > best[tool.kind][1]:
                best[tool.kind] = (tool.entry.name, score)
        return best

    def close(self) -> None:
        self.index.close()


def cue_counts(request: str) -> tuple[list[float], dict[Route, list[str]]]:
    """Cue counts per route (`ROUTES` order, capped at 2) and the cue names that fired."""
    hits = cue_hits(request)
    return [float(min(2, len(hits[route]))) for route in ROUTES], hits
