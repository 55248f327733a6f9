"""The storage, stores and audit packages declare sorted `__all__` lists whose names all exist."""

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
    "maitre.storage",
    "maitre.storage.approvals",
    "maitre.storage.audit",
    "maitre.storage.base",
    "maitre.storage.engine",
    "maitre.storage.engine.base",
    "maitre.storage.engine.migrations",
    "maitre.storage.engine.postgres",
    "maitre.storage.engine.redis",
    "maitre.storage.engine.sqlite",
    "maitre.storage.handles",
    "maitre.storage.idempotency",
    "maitre.storage.memory",
    "maitre.storage.postgres",
    "maitre.storage.rate_limits",
    "maitre.storage.runs",
    "maitre.storage.schema",
    "maitre.storage.sqlite",
    "maitre.storage.tasks",
    "maitre.mcp.tasks",
]


@pytest.mark.parametrize("module_name", MODULES)
def test_every_module_exports_a_sorted_list_of_existing_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{module_name}.{name}"
