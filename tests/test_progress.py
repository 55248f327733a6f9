"""Long work reports its progress through a callback, and the bar draws on stderr only."""

from __future__ import annotations

import logging

import pytest

from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore
from maitre.progress import progress_bar, report
from maitre.search import ToolIndex


def _tools(n: int) -> list[dict[str, object]]:
    return [
        {"name": f"tool_{i}", "description": f"Does thing number {i}.", "input_schema": {"type": "object"}}
        for i in range(n)
    ]


def test_an_index_build_reports_each_batch_up_to_the_total() -> None:
    seen: list[tuple[int, int]] = []
    with ToolIndex(embedder=HashingEmbedder()) as index:
        index.add_many(_tools(150), progress=lambda done, total: seen.append((done, total)))
        assert len(index) == 150
    assert seen == [(0, 150), (64, 150), (128, 150), (150, 150)]


def test_a_callback_that_raises_never_aborts_the_work(caplog: pytest.LogCaptureFixture) -> None:
    def broken(done: int, total: int) -> None:
        raise RuntimeError("terminal went away")

    with caplog.at_level(logging.WARNING), ToolIndex(embedder=None) as index:
        index.add_many(_tools(70), progress=broken)
        assert len(index) == 70
    assert any("progress callback raised" in r.getMessage() for r in caplog.records)


def test_reindexing_memory_reports_progress() -> None:
    store = MemoryStore.sqlite(":memory:", embedder=HashingEmbedder())
    try:
        for i in range(300):
            store.write("asha", f"k{i}", f"value {i}")
        seen: list[tuple[int, int]] = []
        assert store.reindex(progress=lambda done, total: seen.append((done, total))) == 300
        assert seen == [(0, 300), (256, 300), (300, 300)]
        assert [h.fact.key for h in store.retrieve("asha", "value 7", k=1)] == ["k7"]
    finally:
        store.close()


def test_the_bar_draws_on_stderr_never_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("Embedding tools", enabled=True) as progress:
        for done in range(0, 11):
            report(progress, done, 10)
    out, _ = capsys.readouterr()
    assert out == ""  # stdout belongs to the program (JSON output, the stdio transport)


def test_the_bar_is_silent_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar("Embedding tools") as progress:  # pytest's stderr is not a TTY
        progress(1, 2)
    assert capsys.readouterr() == ("", "")
