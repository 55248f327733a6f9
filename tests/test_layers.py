"""Arrows point inward (issue 11, item 2): no module of the core imports a door.

The layers (DESIGN.md "Layers", and the docstring of `maitre`):

- the **core**: `types`, `messages`, `fence`, `exceptions`, `context`, `policy`, `jsonutil`,
  `tokens`, `embeddings`, `tools`, `gate`, `stores` / `storage`, `audit`. It never imports a door.
  Inside it, `audit` sits below the stores: the stores import `audit` to seal entries, `audit`
  imports no store.
- the **doors**: `agent`, `models`, `mcp`, `memory`, `search`, `testing`, `demo`, `console`, `cli`. A door
  imports the core, and another door only through public names (no `_private` module or name).
  `cli` is the outermost door: no other module imports it. The model adapters sit below the loop:
  `models` does not import `agent`.
- the top-level package `maitre` is the facade; it loads door names lazily, on attribute access.

Every module under src/maitre is parsed with `ast`: every `import` and `from ... import` counts,
at module level, inside functions and under `if TYPE_CHECKING:` (a type-only arrow is still an
arrow), with relative imports resolved. The layer of a module is its first name under `maitre`.
A new top-level module must be placed in one of the sets below, so the rules always cover it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import maitre

__all__: list[str] = []

SRC = Path(maitre.__file__).resolve().parent

CORE = frozenset(
    {
        "_extras",
        "_sync",
        "_loader",
        "audit",
        "config",
        "context",
        "dataflow",
        "embeddings",
        "exceptions",
        "fence",
        "gate",
        "jsonutil",
        "messages",
        "policy",
        "progress",
        "storage",
        "stores",
        "tokens",
        "tools",
        "tracing",
        "types",
    }
)
DOORS = frozenset(
    {
        "agent",
        "cli",
        "console",
        "demo",
        "durable",
        "evals",
        "mcp",
        "memory",
        "models",
        "redteam",
        "routing",
        "search",
        "testing",
    }
)

EXCEPTIONS = {
    ("maitre.tools.toolbox", "maitre.mcp.client"): (
        "`Toolbox.from_mcp` is a public name from before the layer rule; it imports the MCP door "
        "inside the method, only when called (importing maitre.tools never loads maitre.mcp, see "
        "test_importing_the_core_loads_no_door)"
    ),
}
"""(importer, imported) pairs allowed to point outward, each with its reason. Only imports inside a
function qualify: a module-level import would load the door with the core."""


@dataclass(frozen=True, kw_only=True)
class Import:
    """One import statement's target, resolved to an absolute module name."""

    module: str
    """The importing module, e.g. `maitre.gate.pipeline`."""
    target: str
    """The imported module, e.g. `maitre.stores.base` (a `from X import sub` names `X.sub` when
    `sub` is a module)."""
    names: tuple[str, ...]
    """The names taken from it (empty for `import X`)."""
    line: int
    """Line number in the importing module."""
    in_function: bool
    """True when the import runs inside a function (lazily)."""


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(module: str, source: str, *, is_package: bool, modules: set[str]) -> list[Import]:
    """Every `maitre` import in `source`, relative ones resolved against `module`."""
    tree = ast.parse(source)
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "maitre" or alias.name.startswith("maitre."):
                        found.append(
                            Import(
                                module=module,
                                target=alias.name,
                                names=(),
                                line=child.lineno,
                                in_function=inner,
                            )
                        )
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[: len(package) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target == "maitre" or target.startswith("maitre."):
                    plain = [a.name for a in child.names if f"{target}.{a.name}" not in modules]
                    for alias in child.names:
                        if f"{target}.{alias.name}" in modules:  # `from . import submodule`
                            found.append(
                                Import(
                                    module=module,
                                    target=f"{target}.{alias.name}",
                                    names=(),
                                    line=child.lineno,
                                    in_function=inner,
                                )
                            )
                    if plain:
                        found.append(
                            Import(
                                module=module,
                                target=target,
                                names=tuple(plain),
                                line=child.lineno,
                                in_function=inner,
                            )
                        )
            visit(child, inner)

    visit(tree, False)
    return found


def layer(module: str) -> str:
    """`maitre.gate.pipeline` -> `gate`; the package itself -> `maitre`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "maitre"


def violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Each import that breaks a layer rule, as `module:line imports target (names): rule`.

    `sources` maps a module name to (its source, whether it is a package `__init__`).
    """
    modules = set(sources)
    problems: list[str] = []
    for module, (source, is_package) in sorted(sources.items()):
        here = layer(module)
        if here != "maitre" and here not in CORE | DOORS:
            problems.append(
                f"{module}: layer {here!r} is neither core nor door: add it to tests/test_layers.py"
            )
            continue
        for imp in imports_of(module, source, is_package=is_package, modules=modules):
            there = layer(imp.target)
            what = f"{module}:{imp.line} imports {imp.target}" + (
                f" ({', '.join(imp.names)})" if imp.names else ""
            )
            if here == there or here == "maitre":
                continue
            reason = EXCEPTIONS.get((module, imp.target))
            if reason is not None and imp.in_function:
                continue
            if there == "maitre":
                problems.append(
                    f"{what}: only the facade is `maitre` itself; import the module that defines it"
                )
            elif here in CORE and there in DOORS:
                problems.append(f"{what}: the core ({here}) never imports a door ({there})")
            elif here == "audit" and there in {"stores", "storage"}:
                problems.append(f"{what}: audit sits below the stores (they import it to seal entries)")
            elif there == "cli":
                problems.append(f"{what}: cli is the outermost door; nothing imports it")
            elif here == "models" and there == "agent":
                problems.append(f"{what}: the model adapters sit below the agent loop, which imports them")
            elif here in DOORS and there in DOORS:
                private = [p for p in imp.target.split(".")[1:] if p.startswith("_")]
                private += [n for n in imp.names if n.startswith("_")]
                if private:
                    problems.append(f"{what}: a door imports another door only through public names")
    return problems


def package_sources() -> dict[str, tuple[str, bool]]:
    return {
        module_name(path, SRC): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for path in sorted(SRC.rglob("*.py"))
    }


def test_no_import_points_outward() -> None:
    sources = package_sources()
    assert len(sources) > 100  # the walk found the package
    problems = violations(sources)
    assert not problems, "imports that point outward:\n" + "\n".join(problems)


def test_each_exception_is_still_needed_and_lazy() -> None:
    """An allowed outward import that disappeared or became module-level is an error too."""
    sources = package_sources()
    for (module, target), _reason in EXCEPTIONS.items():
        source, is_package = sources[module]
        matching = [
            imp
            for imp in imports_of(module, source, is_package=is_package, modules=set(sources))
            if imp.target == target
        ]
        assert matching, f"{module} no longer imports {target}: drop the exception"
        assert all(imp.in_function for imp in matching), f"{module} imports {target} at module level"


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "maitre.gate.fake",
            "def f():\n    from ..agent import Agent\n",
            "the core (gate) never imports a door (agent)",
        ),
        (
            "maitre.tools.fake",
            "from maitre.search.index import ToolIndex\n",
            "the core (tools) never imports a door",
        ),
        ("maitre.stores.fake", "import maitre.memory\n", "the core (stores) never imports a door (memory)"),
        (
            "maitre.audit.fake",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..stores import x\n",
            "audit sits below",
        ),
        ("maitre.mcp.fake", "from ..cli.mcp_cmds import serve_command\n", "cli is the outermost door"),
        ("maitre.models.fake", "from ..agent.messages import Message\n", "adapters sit below the agent loop"),
        ("maitre.agent.fake", "from ..models._http import SDKModel\n", "only through public names"),
        ("maitre.agent.fake", "from ..search import _private\n", "only through public names"),
        ("maitre.gate.fake", "from .. import Agent\n", "import the module that defines it"),
        ("maitre.newlayer", "x = 1\n", "neither core nor door"),
        ("maitre.tools.fake", "from ..mcp.client import toolbox_from_mcp\n", "never imports a door (mcp)"),
    ],
)
def test_the_checker_catches(module: str, source: str, expected: str) -> None:
    """The rules fire on each kind of outward import (relative, absolute, lazy, type-only)."""
    sources = {
        module: (source, False),
        "maitre.search": ("", True),
        "maitre.search._private": ("", False),
        "maitre.cli": ("", True),
        "maitre.cli.mcp_cmds": ("", False),
    }
    problems = violations(sources)
    assert any(expected in p and p.startswith(module) for p in problems), problems


def test_the_checker_accepts_inward_imports() -> None:
    sources = {
        "maitre.agent.fake": (
            "from ..gate import Gate\nfrom ..models.base import Model\nfrom . import sub\n",
            False,
        ),
        "maitre.agent.sub": ("", False),
        "maitre.models.fake": ("from ..messages import Message\nfrom ..tools import Tool\n", False),
        "maitre.stores.fake": ("from ..audit.chain import AuditEntry\n", False),
        "maitre.cli.fake": ("from ..mcp.serve import serve_command\n", False),
        "maitre.tools.toolbox": ("def from_mcp():\n    from ..mcp.client import toolbox_from_mcp\n", False),
    }
    assert violations(sources) == []


def _loaded_doors(code: str) -> list[str]:
    probe = (
        f"{code}\nimport sys\n"
        f"doors = {sorted(DOORS)!r}\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[:2][-1] in doors and m.startswith('maitre.'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_importing_the_core_loads_no_door() -> None:
    assert _loaded_doors("import maitre.gate, maitre.tools") == []
    core = sorted(
        f"maitre.{name}" for name in CORE if (SRC / name).is_dir() or (SRC / f"{name}.py").is_file()
    )
    assert _loaded_doors(f"import maitre, {', '.join(core)}") == []


def test_python_m_maitre_mcp_does_not_import_the_cli() -> None:
    probe = "import maitre.mcp.__main__, sys; print([m for m in sys.modules if m.startswith('maitre.cli')])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
