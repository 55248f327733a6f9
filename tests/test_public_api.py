"""The public surface is explicit, sorted and complete, as httpx tests its exports.

Every public module of the package (no underscore anywhere in its dotted name) declares `__all__`;
the list is sorted with `sorted()` (so constants and classes interleave by code point, as in
`maitre.__all__`), has no duplicates, names only things that exist, and names every public thing
the module itself defines: classes, functions, and module-level constants or type aliases
(`UPPER_CASE` or `CapWords` assignments). Imported names are re-exports and may be listed or not.
Lowercase module state (`logger`, a CLI's rich `console`) and `TypeVar`s are not surface.

The top-level package re-exports what the README uses; names that need an optional dependency
(`MCPApp`) or belong to a door (`Agent`, `ScriptedModel`) are loaded on first attribute access,
so `import maitre` imports neither the MCP SDK nor the agent loop.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import TypeVar

import pytest

import maitre

README = Path(__file__).resolve().parents[1] / "README.md"


def _public_modules() -> list[str]:
    """Every module under src/maitre, found on disk (collection imports nothing)."""
    package = Path(maitre.__file__).parent
    names = []
    for path in package.rglob("*.py"):
        parts = ["maitre", *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return sorted(names)


MODULES = _public_modules()


def _import(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:  # an optional extra that is not installed
        if exc.name is None or exc.name.split(".")[0] == "maitre":
            raise
        pytest.skip(f"{name} needs {exc.name}, which is not installed")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def defined_names(source: str) -> dict[str, str]:
    """Public names a module's own top-level code binds: name -> "def" or "assign"."""
    found: dict[str, str] = {}

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found[node.name] = "def"
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            found[leaf.id] = "assign"
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                found[node.target.id] = "assign"
            elif isinstance(node, ast.If) and not _is_type_checking(node.test):
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)
                for handler in node.handlers:
                    walk(handler.body)
                walk(node.orelse)
                walk(node.finalbody)

    walk(ast.parse(source).body)
    return {name: kind for name, kind in found.items() if not name.startswith("_")}


def surface_names(module: types.ModuleType) -> set[str]:
    """What must be in `module.__all__`: its public definitions, minus module state and TypeVars."""
    assert module.__file__ is not None
    names = set()
    for name, kind in defined_names(Path(module.__file__).read_text(encoding="utf-8")).items():
        if kind == "assign" and (name[0].islower() or isinstance(getattr(module, name, None), TypeVar)):
            continue
        names.add(name)
    return names


def test_the_module_walk_finds_the_whole_package():
    """The walk is not vacuous: it sees the subpackages and leaves private modules out."""
    assert {"maitre.gate.pipeline", "maitre.agent.loop", "maitre.mcp.server", "maitre.testing"} <= set(
        MODULES
    )
    assert not [name for name in MODULES if "._" in name]


@pytest.mark.parametrize("name", MODULES)
def test_every_public_module_has_a_sorted_all_that_names_only_what_exists(name):
    """`__all__` exists, is sorted, has no duplicates, and every name in it resolves."""
    module = _import(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list | tuple), f"{name} has no __all__"
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what does not exist: {missing}"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_definition_is_in_its_modules_all(name):
    """A class, function or constant a module defines without an underscore is exported."""
    module = _import(name)
    left_out = sorted(surface_names(module) - set(getattr(module, "__all__", ())))
    assert not left_out, f"{name} defines public names missing from __all__: {left_out}"


def test_the_completeness_check_sees_constants_aliases_and_functions():
    """The rule itself: defs and UPPER/CapWords assignments count; imports and lowercase state do not."""
    source = textwrap.dedent(
        """
        import os
        from typing import TYPE_CHECKING, Literal
        if TYPE_CHECKING:
            from x import Hidden
        LIMIT = 3
        Kind = Literal["a", "b"]
        logger = object()
        def visible(): ...
        class Shown: ...
        def _private(): ...
        try:
            FALLBACK = 1
        except ImportError:
            FALLBACK = 2
        """
    )
    assert defined_names(source) == {
        "LIMIT": "assign",
        "Kind": "assign",
        "logger": "assign",
        "visible": "def",
        "Shown": "def",
        "FALLBACK": "assign",
    }


def test_top_level_all_is_sorted_and_importable():
    assert maitre.__all__ == sorted(maitre.__all__)
    for name in maitre.__all__:
        assert getattr(maitre, name) is not None


def test_the_top_level_package_exports_what_the_readme_imports_and_the_door_names():
    """`from maitre import X` in the README works for every X, and the doors' main names are there."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(_python_blocks(README.read_text(encoding="utf-8")))):
        if isinstance(node, ast.ImportFrom) and node.module == "maitre":
            imported.update(alias.name for alias in node.names)
    assert imported, "the README imports nothing from maitre: the check would be vacuous"
    for name in imported | {"Agent", "ScriptedModel", "MCPApp"}:
        assert name in maitre.__all__, name
        assert name in dir(maitre), name
    from maitre.agent import Agent
    from maitre.mcp.app import MCPApp
    from maitre.models import ScriptedModel

    assert (maitre.Agent, maitre.ScriptedModel, maitre.MCPApp) == (Agent, ScriptedModel, MCPApp)


def _python_blocks(markdown: str) -> str:
    blocks, inside, current = [], False, []
    for line in markdown.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(current))
                current = []
            inside = line.strip() == "```python"
            continue
        if inside:
            current.append(line)
    # README blocks use top-level await; compile each inside an async function body
    return "\n".join(f"async def _block_{i}():\n" + textwrap.indent(b, "    ") for i, b in enumerate(blocks))


def test_import_maitre_loads_neither_the_mcp_sdk_nor_the_agent_loop():
    """The lazy names cost nothing until used; using one loads it (in a fresh interpreter).
    `maitre.testing` does not load the MCP SDK either, until its MCP helper is used."""
    code = textwrap.dedent(
        """
        import sys
        def loaded(*prefixes):
            return sorted(m for m in sys.modules if m.split(".")[0] == "mcp" or m.startswith(prefixes))
        import maitre
        print(loaded("maitre.agent", "maitre.models", "maitre.mcp"))
        import maitre.testing
        print(loaded("maitre.mcp"))
        assert "MCPApp" in dir(maitre)
        maitre.MCPApp
        print("mcp" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:3] == ["[]", "[]", "True"], out


def test_an_unknown_top_level_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        maitre.NoSuchThing  # noqa: B018


def test_the_package_is_marked_as_typed():
    """PEP 561: type checkers read maitre's annotations only when `py.typed` ships in the package."""
    assert (Path(maitre.__file__).parent / "py.typed").is_file()


def test_error_codes_compare_equal_to_plain_strings():
    error = maitre.ToolError("INVALID_ARGUMENTS", "bad")
    assert error.code == "INVALID_ARGUMENTS"
    assert maitre.ErrorCode.TIMEOUT == "TIMEOUT"
