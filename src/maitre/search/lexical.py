"""BM25 over tool fields, by SQLite FTS5 (in memory): a well-kept engine instead of our own.

FTS5 ships in every CPython build we target, scores with `bm25()` (k1 = 1.2, b = 0.75) per column
with weights, stems with the porter tokenizer over unicode61 (diacritics folded), and updates
row by row, which is what incremental indexing needs. Scores come back lower-is-better; this module
returns them negated (higher is better) so the index can fuse them with cosine similarities.

Columns and weights (`name, words, description, params, tags` = 1, 2, 1, 1, 1) were chosen on the
BFCL categories other than live_multiple. A query is an OR of quoted terms (from `query_terms`), so
a tool matching any term is a candidate and BM25's idf decides which terms matter.

The connection is used from whichever thread searches (the gate runs sync tools in worker threads),
so it is opened with `check_same_thread=False` and the caller (`ToolIndex`) serialises access.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

__all__ = ["FIELD_WEIGHTS", "LexicalIndex"]

log = logging.getLogger(__name__)

FIELD_WEIGHTS: tuple[float, float, float, float, float] = (1.0, 2.0, 1.0, 1.0, 1.0)
"""bm25() weights of the columns name, words (the name split into words), description, params, tags."""


class LexicalIndex:
    """An FTS5 table keyed by integer slot; not thread-safe on its own (ToolIndex locks around it)."""

    def __init__(self, *, weights: Sequence[float] = FIELD_WEIGHTS) -> None:
        if len(weights) != 5:
            raise ValueError("weights: five numbers for name, words, description, params, tags")
        self._weights = ", ".join(repr(float(w)) for w in weights)
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5("
            "name, words, description, params, tags, namespace UNINDEXED, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )

    def upsert(
        self, slot: int, *, name: str, words: str, description: str, params: str, tags: str, namespace: str
    ) -> None:
        self._db.execute("DELETE FROM tools WHERE rowid = ?", (slot,))
        self._db.execute(
            "INSERT INTO tools(rowid, name, words, description, params, tags, namespace) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (slot, name, words, description, params, tags, namespace),
        )

    def delete(self, slot: int) -> None:
        self._db.execute("DELETE FROM tools WHERE rowid = ?", (slot,))

    def search(
        self, terms: Sequence[str], *, limit: int, namespaces: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """(slot, score) best first, score = -bm25 > 0. Terms are plain words (no FTS syntax).

        `namespaces` keeps tools whose namespace is one of them or nested under one of them.
        """
        if not terms:
            return []
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        sql = f"SELECT rowid, bm25(tools, {self._weights}) AS s FROM tools WHERE tools MATCH ?"
        params: list[object] = [match]
        if namespaces is not None:
            clauses = []
            for namespace in namespaces:
                clauses.append("namespace = ? OR substr(namespace, 1, ?) = ?")
                params += [namespace, len(namespace) + 1, namespace + "."]
            sql += " AND (" + " OR ".join(clauses or ["0"]) + ")"
        sql += " ORDER BY s LIMIT ?"
        params.append(limit)
        try:
            rows = self._db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            # Quoted plain words should always parse; if FTS5 still refuses, the dense side answers.
            log.warning("FTS5 refused the query %r: %s", match[:200], exc)
            return []
        return [(slot, -score) for slot, score in rows]

    def close(self) -> None:
        self._db.close()
