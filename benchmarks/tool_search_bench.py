"""Tool search on catalogues it was not tuned on: BFCL's pooled functions and 101 real MCP servers.

Sets (issue 17; `benchmarks/data/toolsearch/README.md`):

- BFCL v4 (bfcl-eval 2026.3.23's data, kept unmodified in benchmarks/data/bfcl): the catalogue is
  the pooled unique definitions of the 13 single-turn files (1,853 functions, loaded with
  `ToolIndex.add_definitions`, so its `dict`/`float` types and `__names` load as they are); a
  query is a question's user turns, its gold the function names of its ground truth. BFCL is shared,
  not held out: a fixed split by sha256 of the question id (even = held out) gives a dev part to
  tune on and a held-out part to report. The three irrelevance categories have no gold: for them
  the table shows how often the search abstains.
- Real MCP servers: the tool lists of 101 public npm/PyPI servers (1,686 tools, started and listed
  by tests/mcp/corpus/harvest.py; package@version and listing hashes in mcp_servers.tsv), each
  server its own namespace; 127 everyday requests and 42 multi-step tasks written by hand, every
  acceptable tool per step; split by hashing the id, the held-out part committed before tuning.

Scores: hit@1 (first hit is gold), hit@5 (a gold tool in the top 5), complete@5 (every needed tool
- every gold function of a BFCL question, every step of an MCP task - in the top 5), abstention
(share answered with no tool; every scored query is answerable).

Rows (one table per part, the same rows on each):
- BM25 only (`embedder=None`), dense only (`lexical_weight=0`), fusion (the index as it was
  before issue 17: cosine + 0.3 x normalised BM25);
- each method alone on top of the fusion: where the embedded text names the server (the full
  name at the start, as before; "(from: server)" at the end; not at all), a template example
  request per tool as a second vector, a +0.1 boost for the tools of a server the request names,
  rule-based query decomposition;
- final: `ToolIndex()`'s defaults as shipped (chosen on the dev parts), and final + examples.
Latency: p50/p99 of each row at 2,500 tools (BFCL padded with synthetic tools) on queries of at
most 30 words, each query embedded afresh (no query cache), with the load average.

Also (each in a fresh process): the time to open a 2,000-tool index from its vector cache (and how
many tools the embedder was asked for: 0), and the RSS of a process that embeds 2,000 tools and
then searches.

Tool vectors are cached in .bench/toolsearch-vectors.sqlite (git-ignored): the first run embeds
everything (a few minutes on 2 cores), later runs reuse it. `--quick`: <= 100 queries per BFCL
category, no RSS run; not the numbers to quote.

Run: `.venv/bin/python benchmarks/tool_search_bench.py [--quick]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maitre.embeddings import Embedder, MiniLMEmbedder, missing_embedding_packages
from maitre.search import ToolIndex

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
BFCL_DIR = ROOT / "data" / "bfcl"
SETS = ROOT / "data" / "toolsearch"
LEGIT = REPO / "tests" / "mcp" / "corpus" / "legit"
CACHE = REPO / ".bench" / "toolsearch-vectors.sqlite"

ALL_CATEGORIES = [
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
]
SCORED = ALL_CATEGORIES[:10]
IRRELEVANT = ["irrelevance", "live_irrelevance"]
K = 5
TARGET_TOOLS = 2_500
OPEN_TOOLS = 2_000
MAX_QUERY_WORDS = 30

BEFORE: dict[str, Any] = {"decompose": False, "namespace_boost": 0.0}
"""The index as it was before issue 17: plain score fusion."""
FINAL: dict[str, Any] = {}
"""The shipped defaults, chosen on the dev parts: decomposition on; example requests, the
server-name boost and the namespace moved out of the name off (mixed on the dev parts: their rows
show why)."""

METHODS: list[tuple[str, dict[str, Any]]] = [
    ("BM25 only", {**BEFORE, "embedder": None}),
    ("dense only", {**BEFORE, "lexical_weight": 0.0}),
    ("fusion (before)", BEFORE),
    ("namespace as suffix", {**BEFORE, "namespace_context": "suffix"}),
    ("no namespace in text", {**BEFORE, "namespace_context": "none"}),
    ("+ example requests", {**BEFORE, "examples": True}),
    ("+ server-name boost", {**BEFORE, "namespace_boost": 0.1}),
    ("+ decomposition", {**BEFORE, "decompose": True}),
    ("final (defaults)", FINAL),
    ("final + examples", {"examples": True}),
]


# -- data ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Query:
    id: str
    text: str
    steps: list[frozenset[str]]
    """Per needed step, the acceptable tools (canonical names); [] when no tool should answer."""
    group: str
    """BFCL category, or `mcp single` / `mcp multi`."""
    held_out: bool


def _held_out(identifier: str) -> bool:
    return int(hashlib.sha256(identifier.encode()).hexdigest(), 16) % 2 == 0


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_bfcl() -> tuple[list[dict[str, Any]], list[Query]]:
    """(pooled unique definitions, queries with gold as original BFCL names)."""
    catalogue: dict[str, dict[str, Any]] = {}
    queries: list[Query] = []
    for category in ALL_CATEGORIES:
        file = f"BFCL_v4_{category}.json"
        gold = {
            a["id"]: [frozenset([n]) for g in a["ground_truth"] for n in g]
            for a in _lines(BFCL_DIR / "possible_answer" / file)
        }
        for record in _lines(BFCL_DIR / file):
            for function in record["function"]:
                catalogue.setdefault(function["name"], function)
            text = "\n".join(
                m["content"] for turn in record["question"] for m in turn if m.get("role") == "user"
            )
            steps = list(dict.fromkeys(gold.get(record["id"], [])))
            queries.append(
                Query(
                    id=record["id"], text=text, steps=steps, group=category, held_out=_held_out(record["id"])
                )
            )
    return list(catalogue.values()), queries


def load_mcp() -> tuple[dict[str, list[dict[str, Any]]], list[Query]]:
    """(tools by server, the held-out and dev requests), after checking each listing's hash."""
    servers: dict[str, list[dict[str, Any]]] = {}
    for line in (SETS / "mcp_servers.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        name, _registry, _package, _count, _listed, digest = line.split("\t")
        raw = (LEGIT / f"{name}.json").read_bytes()
        if hashlib.sha256(raw).hexdigest() != digest:
            raise SystemExit(f"{name}: the listing changed since the set was written (mcp_servers.tsv)")
        servers[name] = json.loads(raw)["tools"]
    queries = []
    for part, held in (("held_out", True), ("dev", False)):
        for row in _lines(SETS / f"mcp_{part}.jsonl"):
            steps = [frozenset(step) for step in row["steps"]]
            queries.append(
                Query(
                    id=row["id"], text=row["request"], steps=steps, group=f"mcp {row['kind']}", held_out=held
                )
            )
    return servers, queries


# -- scoring ------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Score:
    n: int = 0
    hit1: int = 0
    hit5: int = 0
    complete5: int = 0
    abstained: int = 0
    latency_us: list[float] = field(default_factory=list)

    def add(self, names: Sequence[str], steps: Sequence[frozenset[str]]) -> None:
        top = list(names[:K])
        self.n += 1
        self.abstained += not top
        if steps:
            every = frozenset().union(*steps)
            self.hit1 += bool(top) and top[0] in every
            self.hit5 += any(n in every for n in top)
            self.complete5 += all(any(n in step for n in top) for step in steps)

    def rate(self, value: int) -> float:
        return value / self.n if self.n else math.nan


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class SharedQueries:
    """The MiniLM with query vectors shared by every index of the run (scores only, not latency)."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> Any:
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Any:
        with self._lock:
            hit = self._cache.get(text)
        if hit is None:
            hit = self.inner.embed_query(text)
            with self._lock:
                self._cache[text] = hit
        return hit


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} on {os.cpu_count()} CPUs"


# -- the run ------------------------------------------------------------------------------------------


def build(
    kwargs: Mapping[str, Any],
    embedder: Embedder,
    bfcl: list[dict[str, Any]],
    servers: Mapping[str, list[dict[str, Any]]],
) -> tuple[ToolIndex, ToolIndex]:
    """(BFCL index, MCP index) for one method."""
    options = dict(kwargs)
    options.setdefault("embedder", embedder)
    if options["embedder"] is not None:
        options["vector_cache"] = CACHE
    bfcl_index = ToolIndex(**options)
    bfcl_index.add_definitions(bfcl)
    mcp_index = ToolIndex(**options)
    for server, tools in servers.items():
        mcp_index.add_definitions(tools, namespace=server)
    return bfcl_index, mcp_index


def gold_names(index: ToolIndex, queries: list[Query], mcp: bool) -> None:
    """Rewrite gold from catalogue spellings (`server/tool`, BFCL names) to the index's names."""
    by_original: dict[str, str] = {}
    for name in index.names():
        entry = index.entry(name)
        assert entry is not None
        original = entry.original_name
        key = f"{entry.effective_namespace}/{original}" if mcp else original
        by_original[key] = name
    for query in queries:
        query.steps = [frozenset(by_original.get(g, g) for g in step) for step in query.steps]


def score(index: ToolIndex, queries: list[Query]) -> dict[str, Score]:
    scores: dict[str, Score] = {}
    for query in queries:
        names = [h.name for h in index.search(query.text, K)]
        scores.setdefault(query.group, Score()).add(names, query.steps)
    return scores


def _sum(scores: Mapping[str, Score], groups: Sequence[str]) -> Score:
    out = Score()
    for g in groups:
        s = scores.get(g)
        if s:
            out.n += s.n
            out.hit1 += s.hit1
            out.hit5 += s.hit5
            out.complete5 += s.complete5
            out.abstained += s.abstained
    return out


def _table(title: str, rows: list[tuple[str, dict[str, Score], str]]) -> None:
    print(f"\n{title}")
    head = (
        f"  {'method':22} | {'BFCL live_multiple':^20} | {'BFCL all scored':^20} | {'irrel.':>6} |"
        f" {'MCP single':^13} | {'MCP multi-step':^13} | {'p50/p99 ms':>11}"
    )
    sub = (
        f"  {'':22} | {'h@1':>6}{'h@5':>7}{'c@5':>7} | {'h@5':>6}{'c@5':>7}{'abst':>7} | {'abst':>6} |"
        f" {'h@1':>6}{'h@5':>7} | {'h@5':>6}{'c@5':>7} | {'@2,500':>11}"
    )
    print(head)
    print(sub)
    print("  " + "-" * (len(sub) - 2))
    for label, s, latency in rows:
        lm = s.get("live_multiple", Score())
        scored = _sum(s, SCORED)
        irr = _sum(s, IRRELEVANT)
        single, multi = s.get("mcp single", Score()), s.get("mcp multi", Score())
        print(
            f"  {label:22} | {lm.rate(lm.hit1):6.3f}{lm.rate(lm.hit5):7.3f}{lm.rate(lm.complete5):7.3f} |"
            f" {scored.rate(scored.hit5):6.3f}{scored.rate(scored.complete5):7.3f}{scored.rate(scored.abstained):7.3f} |"
            f" {irr.rate(irr.abstained):6.3f} | {single.rate(single.hit1):6.3f}{single.rate(single.hit5):7.3f} |"
            f" {multi.rate(multi.hit5):6.3f}{multi.rate(multi.complete5):7.3f} | {latency:>11}"
        )
    n = rows[0][1]
    print(
        f"  n: live_multiple {n.get('live_multiple', Score()).n}, BFCL scored {_sum(n, SCORED).n}, "
        f"irrelevance {_sum(n, IRRELEVANT).n}, MCP single {n.get('mcp single', Score()).n}, "
        f"MCP multi {n.get('mcp multi', Score()).n}"
    )


def synthetic_tools(n: int) -> list[dict[str, Any]]:
    """`n` distinct, plausible tools to pad a catalogue."""
    verbs = ["list", "create", "update", "archive", "export", "sync", "audit", "rotate", "approve", "tag"]
    nouns = [
        "invoice", "shipment", "warehouse slot", "payroll entry", "lab sample", "firmware image", "tenant quota",
        "loyalty voucher", "parking permit", "clinical note", "drone mission", "greenhouse sensor",
    ]  # fmt: skip
    domains = ["retail", "logistics", "hospital", "factory", "airline", "school", "bank", "farm", "studio"]
    tools = []
    for i in range(n):
        verb, noun = verbs[i % len(verbs)], nouns[(i // len(verbs)) % len(nouns)]
        domain = domains[(i // (len(verbs) * len(nouns))) % len(domains)]
        tools.append(
            {
                "name": f"{domain}_ops.{verb}_{noun.replace(' ', '_')}_{i}",
                "description": f"{verb.capitalize()} a {noun} in the {domain} system (variant {i}).",
                "parameters": {
                    "type": "object",
                    "properties": {
                        f"{noun.split()[0]}_id": {"type": "string", "description": f"Id of the {noun}"},
                        "site": {"type": "string", "description": f"The {domain} site code"},
                    },
                },
            }
        )
    return tools


def latency(index: ToolIndex, raw: Embedder | None, texts: list[str]) -> str:
    """p50/p99 of searches, each query embedded afresh (the shared query cache bypassed)."""
    saved, saved_size = index.embedder, index.query_cache_size
    if raw is not None and saved is not None:
        index.embedder = raw
    index.query_cache_size = 0
    times = []
    try:
        for text in texts:
            start = time.perf_counter_ns()
            index.search(text, K)
            times.append((time.perf_counter_ns() - start) / 1e6)
    finally:
        index.embedder, index.query_cache_size = saved, saved_size
    return f"{statistics.median(times):.2f}/{_pct(times, 0.99):.1f}"


_CHILD = textwrap.dedent(
    """
    import json, os, resource, sys, time
    sys.path.insert(0, {bench!r})
    started = time.perf_counter()
    from maitre.search import ToolIndex
    from maitre.embeddings import MiniLMEmbedder
    import tool_search_bench as bench
    catalogue, _ = bench.load_bfcl()
    catalogue = (catalogue + bench.synthetic_tools({n}))[: {n}]
    imported = time.perf_counter()
    embedder = MiniLMEmbedder()
    calls = []
    real = embedder.embed
    embedder.embed = lambda texts: (calls.append(len(texts)), real(texts))[1]
    index = ToolIndex(embedder=embedder, vector_cache={cache!r}, **{options!r})
    index.add_definitions(catalogue)
    opened = time.perf_counter()
    embedded = sum(calls)  # before the searches below, whose queries go through embed too
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    after_index = rss()
    for q in bench.load_bfcl()[1][:200]:
        index.search(" ".join(q.text.split()[:30]))
    print(json.dumps({{"tools": len(index), "open_s": opened - imported, "import_s": imported - started,
        "embedded": embedded, "rss_indexed": after_index, "rss_searched": rss(),
        "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}}))
    """
)


def child(n: int, cache: Path, options: Mapping[str, Any]) -> dict[str, Any]:
    script = _CHILD.format(bench=str(ROOT), n=n, cache=str(cache), options=dict(options))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=REPO
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(quick: bool = False) -> None:
    if missing_embedding_packages():
        print("tool_search_bench: maitre[embeddings] is not installed; skipped")
        return
    bfcl, bfcl_queries = load_bfcl()
    servers, mcp_queries = load_mcp()
    if quick:
        by_group: dict[str, list[Query]] = {}
        for q in bfcl_queries:
            by_group.setdefault(q.group, []).append(q)
        bfcl_queries = [q for rows in by_group.values() for q in rows[:: max(1, len(rows) // 100)][:100]]
    print(
        f"BFCL v4 pooled catalogue: {len(bfcl)} functions; real MCP: {len(servers)} servers, "
        f"{sum(len(t) for t in servers.values())} tools"
    )
    print(_load())
    if quick:
        print("QUICK: <= 100 queries per BFCL category; not the numbers to quote")
    raw = MiniLMEmbedder()
    shared = SharedQueries(raw)
    started = time.perf_counter()
    results: list[tuple[str, dict[str, Score], dict[str, Score], str]] = []
    pad = synthetic_tools(TARGET_TOOLS - len(bfcl))
    short = [" ".join(q.text.split()[:MAX_QUERY_WORDS]) for q in bfcl_queries if q.group == "live_multiple"][
        :300
    ]
    short += [q.text for q in mcp_queries]
    for label, kwargs in METHODS:
        t0 = time.perf_counter()
        bfcl_index, mcp_index = build(kwargs, shared, bfcl, servers)
        bq = [Query(**{**q.__dict__}) for q in bfcl_queries]
        mq = [Query(**{**q.__dict__}) for q in mcp_queries]
        gold_names(bfcl_index, bq, mcp=False)
        gold_names(mcp_index, mq, mcp=True)
        held = {
            **score(bfcl_index, [q for q in bq if q.held_out]),
            **score(mcp_index, [q for q in mq if q.held_out]),
        }
        dev = {
            **score(bfcl_index, [q for q in bq if not q.held_out]),
            **score(mcp_index, [q for q in mq if not q.held_out]),
        }
        bfcl_index.add_many(pad)
        lat = latency(bfcl_index, raw if bfcl_index.embedder is not None else None, short)
        results.append((label, held, dev, lat))
        print(f"  {label}: built and scored in {time.perf_counter() - t0:.0f} s ({_load()})", file=sys.stderr)
        bfcl_index.close()
        mcp_index.close()
    print(
        f"(all rows in {time.perf_counter() - started:.0f} s; latency: {len(short)} queries of <= {MAX_QUERY_WORDS} words at {TARGET_TOOLS:,} tools, embedded afresh)"
    )
    _table("DEV parts (methods chosen here)", [(label, dev, lat) for label, _, dev, lat in results])
    _table("HELD-OUT parts (reported)", [(label, held, lat) for label, held, _, lat in results])

    # Abstention calibration on the dev parts: the final pipeline under a few thresholds.
    print("\nabstention thresholds, final pipeline, dev parts: (min_similarity, min_hit_similarity)")
    bfcl_index, mcp_index = build(FINAL, shared, bfcl, servers)
    bq = [Query(**{**q.__dict__}) for q in bfcl_queries if not q.held_out]
    mq = [Query(**{**q.__dict__}) for q in mcp_queries if not q.held_out]
    gold_names(bfcl_index, bq, mcp=False)
    gold_names(mcp_index, mq, mcp=True)
    for threshold, floor in ((0.25, 0.15), (0.25, 0.10), (0.20, 0.10), (0.30, 0.15), (0.35, 0.15)):
        for index in (bfcl_index, mcp_index):
            index.min_similarity, index.min_hit_similarity = threshold, floor
        s = {**score(bfcl_index, bq), **score(mcp_index, mq)}
        scored, irr, mcp = _sum(s, SCORED), _sum(s, IRRELEVANT), _sum(s, ["mcp single", "mcp multi"])
        print(
            f"  ({threshold:.2f}, {floor:.2f}): BFCL h@5 {scored.rate(scored.hit5):.3f} abstains on "
            f"{scored.rate(scored.abstained):.3f} of answerable, {irr.rate(irr.abstained):.3f} of irrelevance; "
            f"MCP h@5 {mcp.rate(mcp.hit5):.3f} abstains {mcp.rate(mcp.abstained):.3f}"
        )
    bfcl_index.close()
    mcp_index.close()

    # Persistence and memory, each in a fresh process.
    opened = child(OPEN_TOOLS, CACHE, FINAL)
    print(
        f"\nopen a {opened['tools']:,}-tool index from the vector cache in a new process: {opened['open_s']:.2f} s "
        f"(imports {opened['import_s']:.2f} s before it), {opened['embedded']} tools embedded; goal < 1 s: "
        f"{'meets' if opened['open_s'] < 1 and opened['embedded'] == 0 else 'MISSES'} ({_load()})"
    )
    if not quick:
        scratch = REPO / ".bench" / f"toolsearch-rss-{os.getpid()}.sqlite"
        try:
            cold = child(OPEN_TOOLS, scratch, FINAL)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{scratch}{suffix}").unlink(missing_ok=True)
        print(
            f"embed {cold['tools']:,} tools in a new process (empty cache): {cold['open_s']:.0f} s; RSS after indexing "
            f"{cold['rss_indexed']} MB, after 200 searches {cold['rss_searched']} MB, peak {cold['rss_peak']} MB; "
            f"goal < 400 MB: {'meets' if max(cold['rss_searched'], cold['rss_indexed'], cold['rss_peak']) < 400 else 'MISSES'} ({_load()})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)
