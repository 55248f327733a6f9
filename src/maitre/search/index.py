"""`ToolIndex`: find the few right tools among thousands, locally, with any model.

Two retrievers look at every tool. BM25 (SQLite FTS5, `lexical.py`) over the name, the name's
words, the description, parameter names, descriptions and enum values, and tags; and an offline
embedder (all-MiniLM-L6-v2 int8 ONNX by default, `maitre.embeddings`) over one text per tool. They
are fused by score, not by rank:

    score = cosine(query, tool) + 0.3 * bm25(query, tool) / max_bm25(query)

Why this fusion (benchmarks/tool_search_bench.py; every setting chosen on the BFCL categories other
than live_multiple, then measured on live_multiple's 1,053 queries against 1,853 tools): hit@5 was
0.838 for BM25 alone, 0.874 for MiniLM alone, 0.889 for reciprocal rank fusion (k = 60) of those
same two rankings, and 0.909 for this score fusion (0.896 without the value-type query terms of
`text.py`). RRF throws away *how much* better the top dense hit is; the cosine is comparable
across queries, the BM25 score is not, so BM25 is divided by the query's best BM25 and added as a
bonus to the lexical top 100. The weight 0.3 was the best of 0.2-0.4 on the tuning categories.

Multi-step requests and servers (issue 17; the bench's sets: BFCL split into dev and held-out
parts by hashing the question id, and 169 requests over 101 real MCP servers' 1,686 tools, every
choice made on the dev parts). One addition won there and is on by default:

- `decompose`: the request is split into its steps by rules (`decompose.py`), each step and the
  whole are searched and the rankings interleaved (the whole request's best, then each step's
  best, ...). Held out, multi-step tasks: hit@5 0.773 -> 0.909, complete@5 0.227 -> 0.364; BFCL
  neutral (live_multiple hit@5 0.911 -> 0.909). A split request costs one query embedding per step.

Measured and left off (optional, each with its dev evidence):
- `namespace_boost` (+x for the tools of a declared namespace the request names, "... in slack"):
  with decomposition, 0.1 gave multi-step complete@5 0.35 -> 0.40 on dev but cost a single request
  on dev and 0.035 hit@1 held out: a wash. BFCL's dotted names are module paths and never count.
- `examples` (a template request per tool as a second vector): +0.04 hit@5 on MCP dev single
  requests, -0.013 on BFCL live_multiple dev, and fewer abstentions on irrelevant questions.
- `namespace_context="suffix"` / `"none"` (the server moved out of the name's place in the embedded
  text): +0.03 on MCP dev single requests, -0.003 on BFCL dev.
Goals still missed: live_multiple hit@5 0.95 (0.909), MCP held-out single hit@5 0.90 (0.821) and
multi-step complete@5 0.60 (0.364). Most misses left are vocabulary ("email" against a tool that
says "gmail") among the near-duplicate tools of many servers.

Abstention ("no tool fits" is an answer): the search returns `[]` unless some tool reaches cosine
`min_similarity` (0.25), or a query word matched a tool whose cosine is at least
`min_hit_similarity` (0.15) - lexical and dense evidence together. In a non-empty answer, hits
below 0.15 are left out, so a lexical coincidence cannot ride along. Measured on BFCL: a single
per-hit cut at 0.25 cost 0.011 hit@5 on live_multiple and 0.03 on live_simple; this rule costs
0.001 and 0.004, abstains on 0-0.8% of answerable queries, and on 1% of `irrelevance` and 8% of
`live_irrelevance` questions (against 1,853 tools most of those have a loosely related tool; on
the seeds' 20 tools every unrelated question tested gets `[]`). Without an embedder the index is
lexical only and abstains when no query word matches any tool.

Persistent: with `vector_cache=` (a SQLite file, `vectors.py`) tool vectors are stored by the hash
of the embedder and the exact text embedded, and a later process embeds only what changed.
Catalogues that are not toolboxes: `add_definitions` normalises their schemas and maps names that
break the tool-name rule (`maitre.tools.names`), keeping the original as `upstream_name`.

Incremental: `add`/`remove` update both retrievers row by row; given a `Toolbox`, the index
subscribes to its changes (including toolboxes it includes, such as an MCP server's tools when the
server's list changes). Searches and updates may come from several threads; one lock serialises
them, and embedding (the slow part) happens outside it, overlapped with the BM25 query.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..exceptions import ToolDefinitionError, UserError
from ..progress import Progress, report
from ..tools.names import NameMap
from .decompose import split_request
from .lexical import FIELD_WEIGHTS, LexicalIndex
from .text import STOP_WORDS, embedding_text, example_request, parameter_fields, query_terms, split_identifier
from .vectors import VectorCache, embedder_identity, vector_key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ..embeddings import Embedder
    from ..tools import Tool, Toolbox
    from .dense import DenseIndex
else:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a core dependency; only the hybrid mode needs it
        np = None  # only the hybrid mode (with an embedder) uses it

__all__ = ["SearchHit", "ToolEntry", "ToolIndex"]

log = logging.getLogger(__name__)

_NO_EVIDENCE = 1e-4


@dataclass(kw_only=True, frozen=True)
class ToolEntry:
    """What the index knows about one tool: plain data, so catalogues that are not toolboxes
    (BFCL's function lists, an MCP `tools/list` answer) can be indexed too."""

    name: str
    """Unique key and canonical name, e.g. `orders.get_order`."""
    description: str = ""
    """What the model reads about the tool."""
    input_schema: Mapping[str, Any] | None = None
    """JSON Schema of the arguments: parameter names, descriptions and enum values are indexed."""
    tags: tuple[str, ...] = ()
    """Free-form labels, indexed as words."""
    namespace: str | None = None
    """Namespace for filtering; by default everything before the last `.` of the name."""
    upstream_name: str | None = None
    """The name as its own catalogue spells it, when `name` is a mapping of it
    (`maitre.tools.names`); None when the two are the same."""

    @property
    def effective_namespace(self) -> str:
        if self.namespace is not None:
            return self.namespace
        return self.name.rpartition(".")[0]

    @property
    def original_name(self) -> str:
        """The name to send to the tool's own catalogue: `upstream_name`, else `name`."""
        return self.upstream_name if self.upstream_name is not None else self.name

    @classmethod
    def from_tool(cls, tool: Tool) -> ToolEntry:
        upstream = getattr(tool, "upstream_name", None)
        return cls(
            name=tool.name,
            namespace=getattr(tool, "namespace", None),
            description=tool.description,
            input_schema=tool.input_schema,
            tags=tool.tags,
            upstream_name=upstream if isinstance(upstream, str) and upstream != tool.name else None,
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ToolEntry:
        """From a definition dict in any common shape: MCP (`inputSchema`), Anthropic
        (`input_schema`), OpenAI or BFCL (`parameters`, optionally under `function`)."""
        if "function" in data and isinstance(data["function"], Mapping):
            data = data["function"]
        schema = data.get("inputSchema") or data.get("input_schema") or data.get("parameters")
        return cls(
            name=str(data["name"]),
            description=str(data.get("description") or ""),
            input_schema=schema if isinstance(schema, Mapping) else None,
            tags=tuple(str(t) for t in data.get("tags") or ()),
        )


@dataclass(kw_only=True, frozen=True)
class SearchHit:
    """One tool found for a query."""

    name: str
    """Canonical tool name."""
    score: float
    """Fused score (cosine + lexical bonus); lexical only: BM25 / the query's best BM25, in (0, 1]."""
    description: str = ""
    """The tool's description, for showing the hit to a model."""
    lexical_rank: int | None = None
    """1-based rank among BM25 matches; None when no query term matched this tool."""
    dense_rank: int | None = None
    """1-based rank by cosine among all searchable tools; None without an embedder."""
    lexical_score: float | None = None
    """Raw BM25 (higher is better); None when no query term matched."""
    dense_score: float | None = None
    """Cosine similarity of query and tool; None without an embedder."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "score": self.score,
            "lexical_rank": self.lexical_rank,
            "dense_rank": self.dense_rank,
            "lexical_score": self.lexical_score,
            "dense_score": self.dense_score,
        }


@dataclass(kw_only=True)
class _Row:
    entry: ToolEntry
    """The indexed entry."""
    slot: int
    """Row in both retrievers."""
    namespace: str = field(default="")
    """Cached effective namespace."""


def _resolve_embedder(embedder: Embedder | Literal["default"] | None) -> Embedder | None:
    if embedder is None:
        return None
    if embedder == "default":
        # The MiniLM when maitre[embeddings] is installed; else None, and one warning line per
        # process naming the modules that are missing and the extra that brings them.
        from ..embeddings import default_embedder_if_installed

        return default_embedder_if_installed()
    if isinstance(embedder, str):
        raise UserError(f"embedder must be an Embedder, 'default' or None, not {embedder!r}")
    return embedder


_EMBED_BATCH = 64
"""Tools embedded per batch in `add_many`: large enough for the model's batching, small enough for
a progress display to move."""


class ToolIndex:
    """Hybrid (BM25 + embeddings) search over tools, kept current as tools come and go.

    Args:
        toolbox: index every tool of this `Toolbox` and follow its later additions and removals.
        embedder: an `Embedder`, "default" (the offline MiniLM; lexical only, with a warning, when its
            packages are missing) or None (lexical only).
        lexical_weight: weight of the normalised BM25 bonus added to the cosine (0.3, tuned on BFCL).
        min_similarity: when no tool reaches this cosine (and no lexically matched tool reaches
            `min_hit_similarity`), search returns [] (abstention); ignored without an embedder.
        min_hit_similarity: hits below this cosine are left out of a non-empty answer.
        candidates: how many BM25 matches get the lexical bonus.
        field_weights: bm25() weights of name, name words, description, parameters, tags.
        vector_cache: a `VectorCache` or the path of its SQLite file: tool vectors are read from it
            by definition hash and only tools it lacks are embedded (then stored), so a second
            process opens a large index without re-embedding (`maitre.search.vectors`).
        query_cache_size: query vectors kept (LRU) so a repeated search skips the embedder; 0: off.
        decompose: split a multi-step request into its steps (`decompose.split_request`), search
            each step and the whole, and merge the rankings so every step places its best tools.
        examples: embed a second, request-like text per tool (`text.example_request`) and score a
            tool by the better of its two cosines.
        namespace_context: where the embedded text names the tool's namespace (the server it comes
            from): "name" - as part of the full name at the start (`slack.post_message`); "suffix" -
            the base name at the start and "(from: slack)" at the end; "none" - the base name only.
            BM25 always indexes the full name.
        namespace_boost: added to the fused score of every tool whose declared namespace (a
            toolbox's, or `add_definitions(namespace=...)`: the server a tool comes from) has a word
            the query has - "post it in slack" lifts the `slack` server's tools; 0: off. A name's
            dotted prefix alone does not count (BFCL's `weather.get` is a module path: boosting
            it cost 0.034 hit@5 on live_multiple's dev part).

    Example:
        ```python
        index = ToolIndex(box)                  # follows box
        index.search("where is my order A1042") # [SearchHit(name='get_order', score=0.82, ...)]
        ```
    """

    def __init__(
        self,
        toolbox: Toolbox | None = None,
        *,
        embedder: Embedder | Literal["default"] | None = "default",
        lexical_weight: float = 0.3,
        min_similarity: float = 0.25,
        min_hit_similarity: float = 0.15,
        candidates: int = 100,
        field_weights: Sequence[float] = FIELD_WEIGHTS,
        vector_cache: str | Path | VectorCache | None = None,
        query_cache_size: int = 512,
        decompose: bool = True,
        examples: bool = False,
        namespace_context: Literal["name", "suffix", "none"] = "name",
        namespace_boost: float = 0.0,
    ) -> None:
        self.embedder = _resolve_embedder(embedder)
        self.lexical_weight = lexical_weight
        self.min_similarity = min_similarity
        self.min_hit_similarity = min_hit_similarity
        self.candidates = candidates
        self._lock = threading.RLock()
        self._lexical = LexicalIndex(weights=field_weights)
        self._dense: DenseIndex | None = None
        if self.embedder is not None:
            from .dense import DenseIndex  # numpy: only the hybrid mode needs it

            self._dense = DenseIndex(self.embedder.dim)
        self.vector_cache: VectorCache | None = None
        self._owns_cache = False
        self._identity = ""
        if self.embedder is not None:
            self._identity = embedder_identity(self.embedder)
            if isinstance(vector_cache, VectorCache):
                self.vector_cache = vector_cache
            elif vector_cache is not None:
                self.vector_cache = VectorCache(vector_cache, dim=self.embedder.dim)
                self._owns_cache = True
        self.decompose = decompose
        self.examples = examples and self._dense is not None
        if namespace_context not in ("name", "suffix", "none"):
            raise UserError(
                f"namespace_context must be 'name', 'suffix' or 'none', not {namespace_context!r}"
            )
        self.namespace_context = namespace_context
        self.namespace_boost = namespace_boost
        self._namespace_words: dict[str, NDArray[np.int64]] | None = None
        self._examples: DenseIndex | None = None
        if self.examples and self.embedder is not None:
            from .dense import DenseIndex

            self._examples = DenseIndex(self.embedder.dim)
        self.query_cache_size = max(0, query_cache_size)
        self._query_vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._query_lock = threading.Lock()
        self._names: dict[str | None, NameMap] = {}
        self._rows: dict[str, _Row] = {}
        self._by_slot: dict[int, _Row] = {}
        self._free: list[int] = []
        self._next_slot = 1  # FTS5 rowids start at 1
        self._masks: dict[tuple[str, ...], NDArray[np.bool_]] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._version = 0
        """Bumped on every change, so a search can tell that slots moved under it."""
        self.toolbox = toolbox
        if toolbox is not None:
            self.add_many(toolbox.tools())
            self._unsubscribe = toolbox.subscribe(self._on_change)

    @property
    def mode(self) -> Literal["hybrid", "lexical"]:
        """`hybrid` with an embedder, else `lexical`."""
        return "lexical" if self._dense is None else "hybrid"

    # -- contents ----------------------------------------------------------------------------------

    def add(self, tool: Tool | ToolEntry | Mapping[str, Any]) -> None:
        """Index one tool; a tool with the same name is replaced."""
        self.add_many([tool])

    def add_many(
        self, tools: Iterable[Tool | ToolEntry | Mapping[str, Any]], *, progress: Progress | None = None
    ) -> None:
        """Index several tools, embedding them in batches (much faster than one by one).

        Args:
            tools: tools, entries or their mappings; a tool with a name already indexed replaces it.
            progress: called with (tools embedded, total) after each batch - building a
                2,000-tool index takes minutes on a laptop (`maitre.progress.progress_bar` draws it).
        """
        self._index_entries([self._entry(t) for t in tools], progress)

    def add_definitions(
        self,
        definitions: Iterable[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        progress: Progress | None = None,
    ) -> list[str]:
        """Index tool definitions from any catalogue as searchable entries (nothing becomes callable).

        Each definition may be in any common shape (MCP `inputSchema`, Anthropic `input_schema`,
        OpenAI or BFCL `parameters`, optionally under `function`) and its schema in any dialect
        `maitre.tools.drafts.normalise_schema` reads (draft-04 to 2020-12, OpenAPI and BFCL type
        names); a schema that still cannot be read is indexed as sent (it is only text here).
        A name that breaks the tool-name rule is mapped (`maitre.tools.names.NameMap`); the hit's
        `ToolEntry.upstream_name` (and `original_name(...)`) gives back the catalogue's spelling.

        Args:
            definitions: the definition dicts.
            namespace: put every entry under this namespace (`namespace.` + its mapped name).
            progress: as for `add_many`.

        Returns:
            The canonical (indexed) names, in the order given.
        """
        from ..tools.drafts import normalise_schema

        names = self._names.get(namespace)
        if names is None:
            names = self._names[namespace] = NameMap(namespace=namespace)
        entries = []
        for data in definitions:
            entry = ToolEntry.from_mapping(data)
            schema = entry.input_schema
            if schema is not None:
                try:
                    schema = normalise_schema(schema)
                except (ToolDefinitionError, RecursionError) as exc:
                    log.debug("%s: schema indexed as sent: %s", entry.name[:200], exc)
            with self._lock:
                canonical = names.add(entry.name)
            entries.append(
                ToolEntry(
                    name=canonical,
                    description=entry.description,
                    input_schema=schema,
                    tags=entry.tags,
                    namespace=namespace,
                    upstream_name=entry.name if canonical != entry.name else None,
                )
            )
        self._index_entries(entries, progress)
        return [e.name for e in entries]

    def original_name(self, name: str) -> str:
        """The catalogue's own spelling of an indexed name (`name` itself when it was not mapped)."""
        with self._lock:
            row = self._rows.get(name)
            return row.entry.original_name if row else name

    def _index_entries(self, entries: list[ToolEntry], progress: Progress | None) -> None:
        if not entries:
            return
        total = len(entries)
        report(progress, 0, total)
        for start in range(0, total, _EMBED_BATCH):
            chunk = entries[start : start + _EMBED_BATCH]
            vectors = examples = None
            if self.embedder is not None:
                vectors = self._vectors([self.embedding_text(e) for e in chunk])
                if self._examples is not None:
                    examples = self._vectors([self.example_text(e) for e in chunk])
            with self._lock:
                for i, entry in enumerate(chunk):
                    self._put(
                        entry,
                        None if vectors is None else vectors[i],
                        None if examples is None else examples[i],
                    )
            report(progress, start + len(chunk), total)

    def _vectors(self, texts: list[str]) -> NDArray[np.float32]:
        """Vectors of `texts`: read from the vector cache where present, else embedded (and stored)."""
        assert self.embedder is not None
        if self.vector_cache is None:
            return self.embedder.embed(texts)
        keys = [vector_key(self._identity, text) for text in texts]
        found = self.vector_cache.get_many(keys)
        missing = [i for i, key in enumerate(keys) if key not in found]
        out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        if missing:
            fresh = self.embedder.embed([texts[i] for i in missing])
            self.vector_cache.put_many((keys[i], fresh[j]) for j, i in enumerate(missing))
            out[missing] = fresh
        for i, key in enumerate(keys):
            if key in found:
                out[i] = found[key]
        return out

    def embedding_text(self, entry: ToolEntry) -> str:
        """The text `entry` is embedded as."""
        if self.namespace_context == "name":
            return embedding_text(entry.name, entry.description, entry.input_schema)
        namespace = entry.effective_namespace
        base = (
            entry.name[len(namespace) + 1 :]
            if namespace and entry.name.startswith(namespace + ".")
            else entry.name
        )
        context = namespace if self.namespace_context == "suffix" else None
        return embedding_text(base, entry.description, entry.input_schema, namespace=context)

    def example_text(self, entry: ToolEntry) -> str:
        """The request-like text of `entry`'s second vector (with `examples=True`)."""
        namespace = entry.effective_namespace if self.namespace_context == "suffix" else None
        return example_request(entry.name, entry.description, entry.input_schema, namespace=namespace or None)

    def _query_vector(self, query: str) -> NDArray[np.float32]:
        """The query's vector, from a small LRU cache (an agent repeats its searches)."""
        assert self.embedder is not None
        if self.query_cache_size:
            with self._query_lock:
                cached = self._query_vectors.get(query)
                if cached is not None:
                    self._query_vectors.move_to_end(query)
                    return cached
        vector = self.embedder.embed_query(query)
        if self.query_cache_size:
            with self._query_lock:
                self._query_vectors[query] = vector
                while len(self._query_vectors) > self.query_cache_size:
                    self._query_vectors.popitem(last=False)
        return vector

    def remove(self, name: str) -> bool:
        """Drop a tool from the index; False when it was not indexed."""
        with self._lock:
            row = self._rows.pop(name, None)
            if row is None:
                return False
            del self._by_slot[row.slot]
            self._lexical.delete(row.slot)
            if self._dense is not None:
                self._dense.delete(row.slot)
            if self._examples is not None:
                self._examples.delete(row.slot)
            self._free.append(row.slot)
            self._masks.clear()
            self._namespace_words = None
            self._version += 1
            return True

    def names(self) -> list[str]:
        with self._lock:
            return list(self._rows)

    def entry(self, name: str) -> ToolEntry | None:
        with self._lock:
            row = self._rows.get(name)
            return row.entry if row else None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return f"ToolIndex(tools={len(self)}, mode={self.mode!r})"

    def close(self) -> None:
        """Stop following the toolbox and free the FTS5 table."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        with self._lock:
            self._lexical.close()
        if self._owns_cache and self.vector_cache is not None:
            self.vector_cache.close()

    def __enter__(self) -> ToolIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- search ------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        namespace: str | Sequence[str] | None = None,
        exclude: Collection[str] = (),
        min_similarity: float | None = None,
        decompose: bool | None = None,
    ) -> list[SearchHit]:
        """The best `k` tools for `query`, best first; `[]` when none is similar enough.

        Args:
            query: what the caller needs, in words (a user's request or a model's search query).
            k: at most this many hits.
            namespace: only tools in this namespace (or one of these), including nested ones.
            exclude: tool names never to return (for example the search tool itself).
            min_similarity: override the index's abstention threshold for this search (the per-hit
                floor moves with it: it stays at most this value).
            decompose: override the index's `decompose` setting for this search.
        """
        if k <= 0 or not query.strip():
            return []
        namespaces = (namespace,) if isinstance(namespace, str) else (tuple(namespace) if namespace else None)
        threshold = self.min_similarity if min_similarity is None else min_similarity
        floor = min(self.min_hit_similarity, threshold)
        split = self.decompose if decompose is None else decompose
        queries = [query]
        if split:
            parts = split_request(query)
            if len(parts) > 1:
                queries += parts
        terms = [query_terms(q) for q in queries]
        if self.embedder is None or self._dense is None:
            with self._lock:
                rankings = [self._lexical_hits(self._candidates(t, namespaces, exclude), k) for t in terms]
            return _merge(rankings[1:] + rankings[:1] if _PARTS_FIRST else rankings, k)
        # BM25 runs on a worker thread while this thread embeds the query: both release the GIL,
        # so on two idle cores the lexical side costs nothing (~1 ms saved of ~5 ms).
        pending = self._worker().submit(self._versioned_candidates, terms, namespaces, exclude)
        try:
            vectors = [self._query_vector(q) for q in queries]
        finally:
            version, lexical = pending.result()
        with self._lock:
            if version != self._version:  # the index changed in between: slots may have moved
                lexical = [self._candidates(t, namespaces, exclude) for t in terms]
            rankings = [
                self._fused_hits(vector, lex, k, namespaces, exclude, threshold, floor, words)
                for vector, lex, words in zip(vectors, lexical, terms, strict=True)
            ]
        return _merge(rankings[1:] + rankings[:1] if _PARTS_FIRST else rankings, k)

    def _candidates(
        self, terms: list[str], namespaces: tuple[str, ...] | None, exclude: Collection[str]
    ) -> list[tuple[int, float]]:
        """BM25 candidates (slot, score); the caller holds the lock."""
        lexical = self._lexical.search(terms, limit=self.candidates + len(exclude), namespaces=namespaces)
        if exclude:
            skip = {self._rows[n].slot for n in exclude if n in self._rows}
            lexical = [(slot, s) for slot, s in lexical if slot not in skip]
        # FTS5 clamps the idf of a word found in most tools to ~1e-6: such a match is no evidence.
        return [(slot, s) for slot, s in lexical if s > _NO_EVIDENCE][: self.candidates]

    def _versioned_candidates(
        self, terms: list[list[str]], namespaces: tuple[str, ...] | None, exclude: Collection[str]
    ) -> tuple[int, list[list[tuple[int, float]]]]:
        with self._lock:
            return self._version, [self._candidates(t, namespaces, exclude) for t in terms]

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="maitre-tool-search")
        return self._executor

    def _lexical_hits(self, lexical: list[tuple[int, float]], k: int) -> list[SearchHit]:
        if not lexical:
            return []
        best = lexical[0][1]
        hits = []
        for rank, (slot, score) in enumerate(lexical[:k], start=1):
            entry = self._by_slot[slot].entry
            hits.append(
                SearchHit(
                    name=entry.name,
                    score=score / best,
                    description=entry.description,
                    lexical_rank=rank,
                    lexical_score=score,
                )
            )
        return hits

    def _fused_hits(
        self,
        vector: NDArray[np.float32],
        lexical: list[tuple[int, float]],
        k: int,
        namespaces: tuple[str, ...] | None,
        exclude: Collection[str],
        threshold: float,
        floor: float,
        terms: Sequence[str] = (),
    ) -> list[SearchHit]:
        assert self._dense is not None
        mask = self._namespace_mask(namespaces) if namespaces is not None else None
        if exclude:
            mask = self._exclude(mask, exclude)
        cosine = self._dense.scores(vector, mask)
        if self._examples is not None:
            cosine = np.maximum(cosine, self._examples.scores(vector, mask))
        boosted = self._boosted(terms) if self.namespace_boost else None
        if len(cosine) == 0:
            return []
        confident = float(cosine.max()) >= threshold
        if not confident and lexical:
            # A query word matched a tool that is also somewhat similar: evidence from both sides.
            matched = np.fromiter((s for s, _ in lexical), dtype=np.int64, count=len(lexical))
            confident = bool((cosine[matched] >= floor).any())
        if not confident:
            return []
        fused = cosine.copy()
        lexical_of: dict[int, tuple[int, float]] = {}
        if lexical:
            best = lexical[0][1]
            slots = np.fromiter((s for s, _ in lexical), dtype=np.int64, count=len(lexical))
            scores = np.fromiter((v for _, v in lexical), dtype=np.float32, count=len(lexical))
            fused[slots] += self.lexical_weight * scores / best
            lexical_of = {slot: (rank, score) for rank, (slot, score) in enumerate(lexical, start=1)}
        if boosted is not None:
            fused[boosted] += self.namespace_boost
        fused[cosine < floor] = -np.inf
        n = min(k, len(fused))
        if n == 0:
            return []
        top = np.argpartition(-fused, n - 1)[:n] if len(fused) > n else np.arange(len(fused))
        top = top[np.argsort(-fused[top], kind="stable")]
        finite = cosine[np.isfinite(cosine)]
        hits = []
        for slot in top.tolist():
            if not np.isfinite(fused[slot]):
                break
            entry = self._by_slot[slot].entry
            lex = lexical_of.get(slot)
            hits.append(
                SearchHit(
                    name=entry.name,
                    score=float(fused[slot]),
                    description=entry.description,
                    lexical_rank=lex[0] if lex else None,
                    lexical_score=lex[1] if lex else None,
                    dense_rank=int((finite > cosine[slot]).sum()) + 1,
                    dense_score=float(cosine[slot]),
                )
            )
        return hits

    # -- internals ---------------------------------------------------------------------------------

    def _entry(self, tool: Tool | ToolEntry | Mapping[str, Any]) -> ToolEntry:
        if isinstance(tool, ToolEntry):
            return tool
        if isinstance(tool, Mapping):
            return ToolEntry.from_mapping(tool)
        if hasattr(tool, "input_schema") and hasattr(tool, "name"):
            return ToolEntry.from_tool(tool)
        raise UserError(f"cannot index {type(tool).__name__}: pass a Tool, a ToolEntry or a definition dict")

    def _put(
        self, entry: ToolEntry, vector: NDArray[np.float32] | None, example: NDArray[np.float32] | None = None
    ) -> None:
        row = self._rows.get(entry.name)
        if row is None:
            slot = self._free.pop() if self._free else self._next_slot
            if slot == self._next_slot:
                self._next_slot += 1
            row = _Row(entry=entry, slot=slot)
            self._rows[entry.name] = row
            self._by_slot[slot] = row
        row.entry = entry
        row.namespace = entry.effective_namespace
        names, texts = parameter_fields(entry.input_schema)
        self._lexical.upsert(
            row.slot,
            name=entry.name,
            words=split_identifier(entry.name),
            description=entry.description,
            params=" ".join(names) + " " + " ".join(texts),
            tags=" ".join(entry.tags),
            namespace=row.namespace,
        )
        if self._dense is not None and vector is not None:
            self._dense.put(row.slot, vector)
        if self._examples is not None and example is not None:
            self._examples.put(row.slot, example)
        self._masks.clear()
        self._namespace_words = None
        self._version += 1

    def _boosted(self, terms: Sequence[str]) -> NDArray[np.int64] | None:
        """Slots of the tools whose namespace has one of `terms` as a word; the caller holds the lock."""
        if self._namespace_words is None:
            words: dict[str, list[int]] = {}
            for row in self._rows.values():
                if row.entry.namespace is None:
                    continue  # a dotted name's prefix: a module path, not a server the user may name
                for word in set(split_identifier(row.namespace).split()):
                    if len(word) > 2 and word not in STOP_WORDS:
                        words.setdefault(word, []).append(row.slot)
            self._namespace_words = {w: np.array(slots, dtype=np.int64) for w, slots in words.items()}
        found = [self._namespace_words[t] for t in terms if t in self._namespace_words]
        if not found:
            return None
        return np.unique(np.concatenate(found))

    def _namespace_mask(self, namespaces: tuple[str, ...]) -> NDArray[np.bool_]:
        mask = self._masks.get(namespaces)
        if mask is None:
            mask = np.zeros(self._next_slot, dtype=bool)
            for row in self._rows.values():
                ns = row.namespace
                if any(ns == n or ns.startswith(n + ".") for n in namespaces):
                    mask[row.slot] = True
            self._masks[namespaces] = mask
        return mask

    def _exclude(self, mask: NDArray[np.bool_] | None, exclude: Collection[str]) -> NDArray[np.bool_]:
        out = np.ones(self._next_slot, dtype=bool) if mask is None else mask.copy()
        for name in exclude:
            row = self._rows.get(name)
            if row is not None:
                out[row.slot] = False
        return out

    def _on_change(self, event: str, tool: Tool) -> None:
        if event == "added":
            self.add(tool)
        elif event == "removed":
            self.remove(tool.name)


_PARTS_FIRST = False


def _merge(rankings: list[list[SearchHit]], k: int) -> list[SearchHit]:
    """Rankings of the whole request and of its parts, interleaved: the whole request's first hit,
    then each part's first, then each one's second..., skipping tools already taken."""
    if len(rankings) == 1:
        return rankings[0][:k]
    out: list[SearchHit] = []
    taken: set[str] = set()
    for depth in range(max(len(r) for r in rankings)):
        for ranking in rankings:
            if depth < len(ranking) and ranking[depth].name not in taken:
                taken.add(ranking[depth].name)
                out.append(ranking[depth])
                if len(out) == k:
                    return out
    return out
