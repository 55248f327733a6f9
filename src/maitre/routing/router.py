"""`Router`: CONTEXT, RETRIEVE or ACT for a request, at the least expected cost.

Seed 002's hard part. The router measures three things about a request (`features.py`): how similar
it is to labelled examples of each route (by meaning with the offline embedder, by words without
it), which cue words it contains (`cues.py`), and how close it comes to a stored-fact tool and to a
live or effectful tool in a `ToolIndex` over the tools it can call. A softmax regression tuned on
the development set turns those into calibrated probabilities (`model.py`), and the decision is the
route of least expected cost under an asymmetric matrix (`cost.py`), not the most probable one.

Without `maitre[embeddings]` everything still works by words: the example similarity becomes a
TF-IDF cosine and the tool index BM25, the model is tuned on those features instead, and the one
shared notice of `maitre.embeddings` says so once on stderr.

    router = Router()                          # dev set, default catalogue, MiniLM if installed
    router.route("What is ACME trading at?")   # Decision(label=Route.ACT, probabilities=..., reason=...)
    route("Summarise the paragraph I just pasted.").label   # "CONTEXT", with a process-wide Router
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from ..exceptions import UserError
from ..search import ToolEntry
from .cost import SEED002_COSTS, CostMatrix
from .data import RETRIEVAL_TAG, CatalogueTool, LabelledRequest, default_catalogue, dev_requests
from .features import (
    FEATURE_NAMES,
    EmbeddingVectoriser,
    ExampleSpace,
    RecentEmbeddings,
    ToolEvidence,
    WordVectoriser,
    cue_counts,
    route_similarities,
)
from .labels import ROUTES, Decision, Route
from .model import Calibration, SoftmaxModel, fit_calibrated

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..embeddings import Embedder
    from ..tools import Tool, Toolbox

__all__ = ["RequestRouter", "Router", "default_router", "route"]


class RequestRouter(Protocol):
    """Anything that routes a request (the learned `Router`, the `KeywordRouter`, one of your own)."""

    def route(self, request: str) -> Decision: ...


def _resolve_embedder(embedder: Embedder | Literal["default"] | None) -> Embedder | None:
    if embedder is None:
        return None
    if isinstance(embedder, str):
        if embedder != "default":
            raise UserError(f"embedder must be an Embedder, 'default' or None, not {embedder!r}")
        from ..embeddings import default_embedder_if_installed

        return default_embedder_if_installed()
    return embedder


def _catalogue_from(
    tools: Toolbox | Iterable[Tool | CatalogueTool] | Literal["default"] | None,
) -> list[CatalogueTool]:
    if tools is None:
        return []
    if isinstance(tools, str):
        if tools != "default":
            raise UserError(f"tools must be a Toolbox, tools, 'default' or None, not {tools!r}")
        return default_catalogue()
    out: list[CatalogueTool] = []
    for tool in tools:
        if isinstance(tool, CatalogueTool):
            out.append(tool)
            continue
        stored = RETRIEVAL_TAG in tool.tags and tool.effect.value == "read"
        out.append(
            CatalogueTool(
                entry=ToolEntry.from_tool(tool), kind="stored" if stored else "live", effect=tool.effect.value
            )
        )
    return out


class Router:
    """Routes requests to CONTEXT / RETRIEVE / ACT by expected cost; tuned when constructed (~1 s).

    Args:
        examples: the labelled requests it is tuned on and compares with (default: the shipped
            development set of 90). Seed 002's questions are deliberately not among them.
        tools: the tools the agent could call, as evidence: "default" (the shipped 23-tool
            catalogue), a `Toolbox` or tools (a read tool tagged "retrieval" counts as a stored-fact
            lookup, every other tool as live or effectful), `CatalogueTool`s, or None (no tool evidence).
        embedder: an `Embedder`, "default" (the offline MiniLM when `maitre[embeddings]` is installed,
            else words only, with one notice) or None (words only, no notice).
        costs: `cost[true][chosen]`; the decision minimises its expectation (default: seed 002's
            asymmetric matrix, under-calls 10, over-calls 1 per step).
        cues: use the cue words of `cues.py` (False: examples and tools only, to measure what the
            cues add).
    """

    name = "learned"

    def __init__(
        self,
        *,
        examples: Sequence[LabelledRequest] | None = None,
        tools: Toolbox | Iterable[Tool | CatalogueTool] | Literal["default"] | None = "default",
        embedder: Embedder | Literal["default"] | None = "default",
        costs: CostMatrix = SEED002_COSTS,
        cues: bool = True,
    ) -> None:
        self.examples = list(examples) if examples is not None else dev_requests()
        if len({e.label for e in self.examples}) < len(ROUTES) or len(self.examples) < 5 * len(ROUTES):
            raise UserError("a Router needs at least 5 labelled examples of each route")
        self.costs = costs
        self.use_cues = cues
        self.embedder = _resolve_embedder(embedder)
        shared = RecentEmbeddings(self.embedder) if self.embedder is not None else None
        texts = [e.request for e in self.examples]
        labels = [e.label for e in self.examples]
        vectoriser = EmbeddingVectoriser(shared) if shared is not None else WordVectoriser(texts)
        self.space = ExampleSpace(texts, labels, vectoriser)
        catalogue = _catalogue_from(tools)
        self.tools = ToolEvidence(catalogue, shared) if catalogue else None
        self.model, self.calibration = self._tune(texts, labels)

    @property
    def mode(self) -> Literal["meaning", "words"]:
        """`meaning` with an embedder, `words` without."""
        return "meaning" if self.embedder is not None else "words"

    def _fixed_features(self, request: str) -> tuple[list[float], dict[str, object]]:
        """Cue and tool features, which do not depend on which examples are visible."""
        cues, hits = cue_counts(request) if self.use_cues else ([0.0, 0.0, 0.0], {})
        evidence: dict[str, object] = {"cues": {r.value: names for r, names in hits.items() if names}}
        tool_scores = [0.0, 0.0]
        if self.tools is not None:
            nearest = self.tools.nearest(request)
            tool_scores = [nearest["stored"][1], nearest["live"][1]]
            evidence["tools"] = {
                kind: {"name": n, "score": round(s, 3)} for kind, (n, s) in nearest.items() if n
            }
        return cues + tool_scores, evidence

    def _tune(self, texts: list[str], labels: list[Route]) -> tuple[SoftmaxModel, Calibration]:
        fixed = np.array([self._fixed_features(t)[0] for t in texts], dtype=np.float64)
        pairwise = self.space.pairwise()
        route_of = [ROUTES.index(label) for label in labels]

        def build(
            train_idx: Sequence[int], test_idx: Sequence[int]
        ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
            seen = [labels[i] for i in train_idx]

            def rows(indices: Sequence[int]) -> NDArray[np.float64]:
                out = np.zeros((len(indices), len(FEATURE_NAMES)))
                for row, i in enumerate(indices):
                    out[row, :3] = route_similarities(pairwise[i, list(train_idx)], seen)
                    out[row, 3:] = fixed[i]
                return out

            return rows(train_idx), rows(test_idx)

        return fit_calibrated(build, route_of)

    def features(self, request: str) -> tuple[NDArray[np.float64], dict[str, object]]:
        """The feature vector (`FEATURE_NAMES` order) and the evidence behind it."""
        sims = self.space.similarities(request)
        fixed, evidence = self._fixed_features(request)
        nearest = int(np.argmax(sims))
        evidence["nearest_example"] = {
            "request": self.space.texts[nearest],
            "label": self.space.labels[nearest].value,
            "similarity": round(float(sims[nearest]), 3),
        }
        vector = np.array(route_similarities(sims, self.space.labels) + fixed, dtype=np.float64)
        return vector, evidence

    def probabilities(self, request: str) -> dict[Route, float]:
        """Calibrated probability of each route (they sum to 1)."""
        vector, _ = self.features(request)
        p = self.model.probabilities(vector)[0]
        return {route: float(p[i]) for i, route in enumerate(ROUTES)}

    def route(self, request: str, *, costs: CostMatrix | None = None) -> Decision:
        """The route of least expected cost (under `costs`, default the router's), with
        probabilities, expected costs and a reason."""
        matrix = costs or self.costs
        vector, evidence = self.features(request)
        p = [float(x) for x in self.model.probabilities(vector)[0]]
        label = matrix.choose(p)
        expected = matrix.expected_costs(p)
        probabilities = {route: p[i] for i, route in enumerate(ROUTES)}
        by_route = {route: expected[i] for i, route in enumerate(ROUTES)}
        evidence["features"] = {
            name: round(float(v), 3) for name, v in zip(FEATURE_NAMES, vector, strict=True)
        }
        return Decision(
            request=request,
            label=label,
            probabilities=probabilities,
            expected_costs=by_route,
            reason=self._reason(label, probabilities, by_route, evidence),
            evidence=evidence,
        )

    def _reason(
        self,
        label: Route,
        probabilities: dict[Route, float],
        costs: dict[Route, float],
        evidence: dict[str, object],
    ) -> str:
        top = max(probabilities, key=lambda r: probabilities[r])
        parts = [f"{label.value}: least expected cost {costs[label]:.2f}"]
        others = ", ".join(f"{r.value} {costs[r]:.2f}" for r in ROUTES if r is not label)
        parts[0] += f" (vs {others})"
        if top is not label:
            parts.append(
                f"{top.value} was more probable ({probabilities[top]:.2f}) but p({label.value})="
                f"{probabilities[label]:.2f} is enough when a miss costs more"
            )
        else:
            parts.append(f"p={probabilities[label]:.2f}")
        example = evidence.get("nearest_example")
        if isinstance(example, dict):
            parts.append(
                f"nearest example is {example['label']} ({example['similarity']:.2f}): {example['request']!r}"
            )
        tools = evidence.get("tools")
        if isinstance(tools, dict) and self.tools is not None:
            for kind in ("live", "stored"):
                if kind in tools:
                    name = tools[kind]["name"]
                    effect = self.tools.catalogue[name].effect
                    parts.append(f"nearest {kind} tool {name} ({effect}, {tools[kind]['score']:.2f})")
        cues = evidence.get("cues")
        if isinstance(cues, dict) and cues:
            parts.append("cues " + ", ".join(f"{r}: {'/'.join(n)}" for r, n in cues.items()))
        return "; ".join(parts)

    def out_of_fold_decisions(self) -> list[Decision]:
        """A decision for every tuning example from a model that did not see it (the k-fold used for
        calibration): the honest score on the development set, since `route` on an example it was
        tuned on is optimistic."""
        out = []
        for example, row in zip(self.examples, self.calibration.out_of_fold_probabilities, strict=True):
            p = [float(x) for x in row]
            expected = self.costs.expected_costs(p)
            label = self.costs.choose(p)
            out.append(
                Decision(
                    request=example.request,
                    label=label,
                    probabilities={r: p[i] for i, r in enumerate(ROUTES)},
                    expected_costs={r: expected[i] for i, r in enumerate(ROUTES)},
                    reason=f"{label.value}: out-of-fold, least expected cost {expected[ROUTES.index(label)]:.2f}",
                )
            )
        return out

    def close(self) -> None:
        """Free the tool index."""
        if self.tools is not None:
            self.tools.close()

    def __repr__(self) -> str:
        return (
            f"Router({len(self.examples)} examples, {len(self.tools.catalogue) if self.tools else 0} tools, "
            f"by {self.mode}, l2={self.calibration.l2}, T={self.calibration.temperature})"
        )


_default_lock = threading.Lock()
_default: Router | None = None


def default_router() -> Router:
    """The process-wide `Router()` (dev set, default catalogue, default embedder), built on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Router()
    return _default


def route(request: str) -> Decision:
    """Route one request with the process-wide default `Router` (what `maitre eval` calls)."""
    return default_router().route(request)
