"""The stores and audit packages declare sorted `__all__` lists whose names all exist."""

import importlib

import pytest

MODULES = [
    "maitre.audit",
    "maitre.audit.canonical",
    "maitre.audit.chain",
    "maitre.stores",
    "maitre.stores.base",
    "maitre.stores.memory",
    "maitre.stores.sqlite",
    "maitre.stores.postgres",
    "maitre.stores.redis",
]


@pytest.mark.parametrize("module_name", MODULES)
def test_every_module_exports_a_sorted_list_of_existing_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module_name}.{name}"
