"""Load `MODULE_OR_FILE:ATTR`: how every command line names a toolbox, an app or a factory.

It lives in the core, not in `maitre.cli`, so that `python -m maitre.mcp serve` loads its target
without importing the root command line (a door may not import `maitre.cli`). `maitre.cli.loader`
re-exports `load_object`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from .exceptions import UserError

__all__ = ["load_object"]


def load_object(spec: str) -> Any:
    """Import `package.module:attr` or `path/to/file.py:attr` and return the attribute."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise UserError(f"expected MODULE_OR_FILE:ATTR, got {spec!r} (for example examples/shop.py:box)")
    if target.endswith(".py") or "/" in target or Path(target).is_file():
        path = Path(target).resolve()
        if not path.is_file():
            raise UserError(f"no such file: {target}")
        name = f"_maitre_target_{abs(hash(str(path)))}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise UserError(f"cannot import {target}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        try:
            module_spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise UserError(f"cannot import module {target!r}: {exc}") from exc
    try:
        value = module
        for part in attr.split("."):
            value = getattr(value, part)
    except AttributeError as exc:
        raise UserError(f"{target} has no attribute {attr!r}") from exc
    return value
