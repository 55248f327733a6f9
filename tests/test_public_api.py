"""The public surface is explicit, sorted and complete (as httpx tests its exports)."""

import importlib

import maitre

MODULES = ["maitre", "maitre.types", "maitre.tools", "maitre.gate", "maitre.exceptions", "maitre.context", "maitre.policy", "maitre.stores", "maitre.audit", "maitre.memory", "maitre.embeddings", "maitre.agent", "maitre.models", "maitre.search"]


def test_top_level_all_is_sorted_and_importable():
    assert maitre.__all__ == sorted(maitre.__all__)
    for name in maitre.__all__:
        assert getattr(maitre, name) is not None


def test_every_public_module_declares_all_and_exports_exist():
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        assert hasattr(module, "__all__"), module_name
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.{name}"


def test_error_codes_compare_equal_to_plain_strings():
    error = maitre.ToolError("INVALID_ARGUMENTS", "bad")
    assert error.code == "INVALID_ARGUMENTS"
    assert maitre.ErrorCode.TIMEOUT == "TIMEOUT"
