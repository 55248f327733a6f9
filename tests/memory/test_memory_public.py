"""maitre.memory and maitre.embeddings: every module declares a sorted, importable `__all__`."""

import importlib
import pkgutil

import maitre.memory

MODULES = ["maitre.embeddings", "maitre.cli.memory"] + [
    f"maitre.memory.{m.name}" for m in pkgutil.iter_modules(maitre.memory.__path__)
]


def test_public_surface_is_explicit_and_complete() -> None:
    assert maitre.memory.__all__ == sorted(maitre.memory.__all__)
    for module_name in ["maitre.memory", *MODULES]:
        module = importlib.import_module(module_name)
        assert hasattr(module, "__all__"), module_name
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.{name}"
    assert {"MemoryStore", "AsyncMemoryStore", "memory_toolbox", "Fact", "Hit"} <= set(maitre.memory.__all__)
