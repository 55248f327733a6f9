"""Every maitre.mcp module declares a sorted `__all__` whose names exist."""

import importlib
import pkgutil

import maitre.mcp


def test_every_mcp_module_declares_a_sorted_complete_all():
    names = [m.name for m in pkgutil.iter_modules(maitre.mcp.__path__) if m.name != "__main__"]
    assert {"app", "auth", "client", "context", "handles", "pinning", "scanner", "server", "tasks"} <= set(
        names
    )
    for name in ["maitre.mcp", "maitre.cli.mcp_cmds", *(f"maitre.mcp.{n}" for n in names)]:
        module = importlib.import_module(name)
        assert hasattr(module, "__all__"), name
        assert list(module.__all__) == sorted(module.__all__), name
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.{exported}"
