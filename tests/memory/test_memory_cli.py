"""`maitre memory export|show|correct|forget`, run through typer's CliRunner against the app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maitre.cli.memory import app
from maitre.embeddings import HashingEmbedder
from maitre.memory import MemoryStore

from .conftest import _PG_REASON, PG_DSN, PG_SECRET

runner = CliRunner()


def make_db(target: str, **kwargs: object) -> MemoryStore:
    store = (
        MemoryStore.postgres(target, **kwargs)  # type: ignore[arg-type]
        if target.startswith("postgresql")
        else MemoryStore.sqlite(target, **kwargs)  # type: ignore[arg-type]
    )
    store.write("u1", "city", "Pune", "2026-01-05", "user message")
    store.write("u1", "city", "Bengaluru", "2026-03-20", "user message")
    store.write("u1", "diet", "vegetarian food only", "2026-01-09", "user message")
    store.write("u2", "city", "Chennai", "2026-02-01", "user message")
    return store


def test_export_prints_json_with_history(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    make_db(db, embedder=HashingEmbedder()).close()
    result = runner.invoke(app, ["export", "--user", "u1", "--db", db])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["user"] == "u1" and data["tenant"] == "default"
    assert [(f["key"], f["value"], f["status"]) for f in data["facts"]] == [
        ("city", "Pune", "superseded"),
        ("city", "Bengaluru", "current"),
        ("diet", "vegetarian food only", "current"),
    ]
    assert "city: Bengaluru" in data["profile"]
    assert "Chennai" not in result.output
    out = tmp_path / "u1.json"
    assert (
        runner.invoke(app, ["export", "--user", "u1", "--db", f"sqlite:///{db}", "-o", str(out)]).exit_code
        == 0
    )
    assert json.loads(out.read_text())["facts"] == data["facts"]
    shown = runner.invoke(app, ["show", "--user", "u1", "--db", db, "--history"])
    assert shown.exit_code == 0 and "Pune" in shown.output and "superseded" in shown.output


def test_forget_key_confirms_and_reports(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    make_db(db, embedder=HashingEmbedder()).close()
    declined = runner.invoke(app, ["forget", "--user", "u1", "--db", db, "--key", "city"], input="n\n")
    assert declined.exit_code == 1
    result = runner.invoke(app, ["forget", "--user", "u1", "--db", db, "--key", "city"], input="y\n")
    assert result.exit_code == 0, result.output
    assert "facts" in result.output and "2" in result.output
    store = MemoryStore.sqlite(db, embedder=HashingEmbedder())
    assert store.history("u1", "city") == [] and store.current("u2", "city").value == "Chennai"  # type: ignore[union-attr]
    assert store.write("u1", "city", "Pune", "2026-01-05", "replay") is None, "the tombstone blocks it"
    store.close()
    again = runner.invoke(app, ["forget", "--user", "u1", "--db", db, "--key", "city", "--yes"])
    assert again.exit_code == 1


def test_forget_all_and_argument_errors(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    make_db(db, embedder=HashingEmbedder()).close()
    assert runner.invoke(app, ["forget", "--user", "u1", "--db", db, "--yes"]).exit_code == 2
    assert (
        runner.invoke(app, ["forget", "--user", "u1", "--db", db, "--value", "Pune", "--all", "-y"]).exit_code
        == 2
    )
    assert runner.invoke(app, ["export", "--user", "u1", "--db", str(tmp_path / "nope.db")]).exit_code == 2
    result = runner.invoke(app, ["forget", "--user", "u1", "--db", db, "--all", "--yes"])
    assert result.exit_code == 0, result.output
    assert json.loads(runner.invoke(app, ["export", "--user", "u1", "--db", db]).output)["facts"] == []
    assert len(json.loads(runner.invoke(app, ["export", "--user", "u2", "--db", db]).output)["facts"]) == 1


def test_correct_and_secret_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "m.db")
    make_db(db, secret="app-secret").close()  # the default (MiniLM) embedder, as the CLI uses
    monkeypatch.setenv("MEMORY_SECRET", "app-secret")
    refused = runner.invoke(app, ["export", "--user", "u1", "--db", db])
    assert refused.exit_code == 2 and "secret" in refused.output
    fixed = runner.invoke(
        app,
        [
            "correct",
            "--user",
            "u1",
            "--db",
            db,
            "--key",
            "city",
            "--value",
            "Mysuru",
            "--secret-env",
            "MEMORY_SECRET",
        ],
    )
    assert fixed.exit_code == 0 and "city = Mysuru" in fixed.output
    gone = runner.invoke(
        app, ["forget", "--user", "u1", "--db", db, "--key", "diet", "-y", "--secret-env", "MEMORY_SECRET"]
    )
    assert gone.exit_code == 0
    store = MemoryStore.sqlite(db, secret="app-secret")
    assert store.current("u1", "city").value == "Mysuru"  # type: ignore[union-attr]
    assert store.write("u1", "diet", "vegetarian food only", "2026-01-09", "replay") is None
    store.close()


@pytest.mark.postgres
@pytest.mark.skipif(_PG_REASON is not None, reason=_PG_REASON or "")
def test_postgres_db_url_with_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server store takes its tombstone secret from configuration; the CLI reads the same variable.
    monkeypatch.setenv("MAITRE_MEMORY_SECRET", PG_SECRET)
    schema = "mt_cli_" + __import__("uuid").uuid4().hex[:8]
    store = make_db(PG_DSN, schema=schema, pgvector=False, embedder=HashingEmbedder())
    try:
        url = f"{PG_DSN}?schema={schema}"
        data = json.loads(runner.invoke(app, ["export", "--user", "u1", "--db", url]).output)
        assert len(data["facts"]) == 3
        assert (
            runner.invoke(app, ["forget", "--user", "u1", "--db", url, "--key", "city", "-y"]).exit_code == 0
        )
        assert [f.key for f in store.facts("u1", include_history=True)] == ["diet"]
    finally:
        store.backend.drop_schema()  # type: ignore[attr-defined]
        store.close()


@pytest.mark.anyio
async def test_serve_exposes_the_memory_tools_over_mcp_stdio(tmp_path: Path) -> None:
    import sys

    from mcp import Client, StdioServerParameters

    db = str(tmp_path / "served.db")
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "from maitre.cli.memory import app; app()",
            "serve",
            "--user",
            "asha",
            "--tenant",
            "acme",
            "--db",
            db,
        ],
    )
    async with Client(params, mode="2026-07-28") as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        saved = await client.call_tool("memory.save_memory", {"key": "city", "value": "Bengaluru"})
        found = await client.call_tool("memory.search_memory", {"query": "which city do I live in"})
    assert names == ["memory.forget_memory", "memory.save_memory", "memory.search_memory"]
    assert not saved.is_error and saved.structured_content["current"]["value"] == "Bengaluru"
    assert [f["value"] for f in found.structured_content["facts"]] == ["Bengaluru"]
    store = MemoryStore.sqlite(db)
    assert store.current("asha", "city", tenant="acme").value == "Bengaluru"  # type: ignore[union-attr]
    store.close()
