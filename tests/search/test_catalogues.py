"""Loading any catalogue into the tool index, and keeping its vectors across processes (issue 17).

- `NameMap` maps names that break the tool-name rule to valid ones and back;
- `ToolIndex.add_definitions` indexes BFCL / MCP / OpenAI definitions that are not callable tools;
- `vector_cache=` stores tool vectors by definition hash: a second process opens the same index
  without calling the embedder for any tool.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from maitre import ToolDefinitionError
from maitre.embeddings import HashingEmbedder
from maitre.search import ToolIndex
from maitre.search.vectors import VectorCache
from maitre.tools.names import NameMap, canonical_name, is_valid_name
from maitre.tools.tool import base_name_for

BFCL = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "bfcl"
REPO = Path(__file__).resolve().parents[2]


class CountingEmbedder(HashingEmbedder):
    name = "counting-hash-test-only"

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.documents = 0

    def embed(self, texts: list[str]) -> Any:
        self.documents += len(texts)
        return super().embed(texts)

    def embed_query(self, text: str) -> Any:
        return HashingEmbedder.embed(self, [text])[0]  # queries are not counted


WILD = [
    "repo::search",
    "files/read",
    "get weather",
    "天气",
    "2fa",
    "__get_all_user_list",
    "admin.tools.list",
    "a" * 200,
]


def test_names_that_break_the_rule_map_to_valid_names_and_back():
    names = NameMap()
    mapped = [names.add(n) for n in WILD]
    assert all(is_valid_name(m) for m in mapped)
    assert len(set(mapped)) == len(WILD)
    assert [names.original(m) for m in mapped] == WILD
    assert names.add("repo::search") == mapped[0]  # stable
    assert names.add("get_order") == "get_order"  # a valid name keeps its spelling
    assert names.map("admin.tools.list") == "admin.tools.list"  # a valid dotted name too
    assert NameMap(keep_dots=False).map("admin.tools.list") == base_name_for(
        "admin.tools.list", max_length=128
    )


def test_the_mapping_is_the_one_imported_tools_get():
    for name in WILD:
        assert canonical_name(name) == base_name_for(name)
    ns = NameMap(namespace="github")
    assert ns.add("repo::search") == "github." + base_name_for("repo::search", max_length=128 - 7)


def test_two_originals_never_share_a_canonical_name():
    names = NameMap()
    taken = canonical_name("a::b")
    names.add(taken)  # a valid name that looks like a mapped one keeps its spelling
    with pytest.raises(ToolDefinitionError, match="both map to"):
        names.add("a::b")


def test_a_stored_map_round_trips_and_a_tampered_one_is_refused():
    names = NameMap(namespace="x")
    for n in WILD:
        names.add(n)
    data = json.loads(json.dumps(names.to_dict()))
    again = NameMap.from_dict(data)
    assert again.items() == names.items()
    data["names"]["files/read"] = "x.orders-get"
    with pytest.raises(ToolDefinitionError):
        NameMap.from_dict(data)


def test_add_definitions_indexes_any_shape_and_gives_back_the_catalogue_spelling():
    index = ToolIndex(embedder=None)
    canonical = index.add_definitions(
        [
            {
                "name": "repo::search",
                "description": "Search code in a repository",
                "inputSchema": {"type": "object"},
            },
            {
                "type": "function",
                "function": {
                    "name": "get weather",
                    "description": "Weather forecast for a city",
                    "parameters": {"type": "dict", "properties": {"city": {"type": "String"}}},
                },
            },
            {
                "name": "calc",
                "description": "Add numbers",
                "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}},
            },
            {
                "name": "broken",
                "description": "Schema nobody can read",
                "parameters": {"type": "object", "$schema": "x:y"},
            },
        ],
        namespace="peer",
    )
    assert all(is_valid_name(n) and n.startswith("peer.") for n in canonical)
    hit = index.search("weather forecast")[0]
    assert hit.name == canonical[1]
    assert index.original_name(hit.name) == "get weather"
    entry = index.entry(canonical[2])
    assert entry is not None and entry.input_schema == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
    }
    assert canonical[2] == "peer.calc" and index.original_name(canonical[2]) == "calc"
    assert index.search("schema nobody can read")[0].name == "peer.broken"  # indexed as sent
    assert index.search("code repository", namespace="peer")[0].name == canonical[0]


@pytest.mark.skipif(not BFCL.is_dir(), reason="benchmarks/data/bfcl is not in this checkout")
def test_all_bfcl_definitions_load_into_the_index():
    functions: dict[str, dict[str, Any]] = {}
    for path in sorted(BFCL.glob("BFCL_v4_*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            for function in json.loads(line)["function"] if line.strip() else ():
                functions.setdefault(function["name"], function)
    index = ToolIndex(embedder=None)
    names = index.add_definitions(functions.values())
    assert len(index) == len(functions) == 1853
    assert {index.original_name(n) for n in names} == set(functions)
    assert sum(n != index.original_name(n) for n in names) == 4  # BFCL's four `__` names


def _catalogue(n: int) -> list[dict[str, Any]]:
    return [
        {"name": f"tool_{i}", "description": f"Tool number {i} handles widget {i % 17} and gadget {i % 5}"}
        for i in range(n)
    ]


def test_vectors_are_reused_by_definition_hash_and_a_changed_definition_is_embedded_again(tmp_path):
    path = tmp_path / "vectors.sqlite"
    first = CountingEmbedder()
    with ToolIndex(embedder=first, vector_cache=path) as index:
        index.add_many(_catalogue(50))
        before = index.search("widget 3 gadget 1", k=3)
    assert first.documents == 50
    second = CountingEmbedder()
    changed = _catalogue(50)
    changed[7]["description"] = "Something else entirely"
    with ToolIndex(embedder=second, vector_cache=path) as index:
        index.add_many(changed)
        assert second.documents == 1  # only the changed tool
        assert index.vector_cache is not None and index.vector_cache.hits == 49
        assert [h.name for h in index.search("widget 3 gadget 1", k=3)] == [h.name for h in before]
    other = HashingEmbedder(dim=64)  # another embedder's identity: nothing to reuse
    cache = VectorCache(path, dim=64)
    with ToolIndex(embedder=other, vector_cache=cache) as index:
        index.add_many(_catalogue(5))
    assert cache.hits == 0
    cache.close()


def test_a_second_process_opens_the_index_without_calling_the_embedder(tmp_path):
    path = tmp_path / "vectors.sqlite"
    catalogue = _catalogue(300)
    (tmp_path / "catalogue.json").write_text(json.dumps(catalogue))
    with ToolIndex(embedder=CountingEmbedder(), vector_cache=path) as index:
        index.add_many(catalogue)
        expected = [h.name for h in index.search("gadget 4 widget 9", k=5)]
        vector = index._dense._matrix[index._rows["tool_9"].slot].copy()  # type: ignore[union-attr]
    np.save(tmp_path / "vector.npy", vector)
    script = textwrap.dedent(
        f"""
        import json, sys
        import numpy as np
        from maitre.embeddings import HashingEmbedder
        from maitre.search import ToolIndex

        class NoDocuments(HashingEmbedder):
            name = "counting-hash-test-only"
            def embed(self, texts):
                raise SystemExit("the embedder was called for %d tools" % len(texts))
            def embed_query(self, text):
                return HashingEmbedder.embed(self, [text])[0]

        catalogue = json.load(open({str(tmp_path / "catalogue.json")!r}))
        index = ToolIndex(embedder=NoDocuments(dim=64), vector_cache={str(path)!r})
        index.add_many(catalogue)
        vector = index._dense._matrix[index._rows["tool_9"].slot]
        assert np.array_equal(vector, np.load({str(tmp_path / "vector.npy")!r}))
        print(json.dumps([h.name for h in index.search("gadget 4 widget 9", k=5)]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == expected


def test_a_repeated_query_is_embedded_once():
    class Queries(HashingEmbedder):
        calls = 0

        def embed_query(self, text: str) -> Any:
            Queries.calls += 1
            return super().embed_query(text)

    index = ToolIndex(embedder=Queries(), query_cache_size=2)
    index.add_many(_catalogue(10))
    for _ in range(3):
        index.search("widget 3")
    assert Queries.calls == 1
    index.search("gadget 1")
    index.search("widget 4")
    index.search("widget 3")  # evicted by the two newer ones
    assert Queries.calls == 4
