"""Load `MODULE_OR_FILE:ATTR` - the way every CLI command names a toolbox (or any object)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from ..exceptions import UserError

if TYPE_CHECKING:
    from ..tools import Toolbox
    from ..tools.export import ExportFormat

__all__ = ["export_format", "load_object", "load_toolbox"]


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


def load_toolbox(spec: str) -> Toolbox:
    """Load a Toolbox (or call a zero-argument factory that returns one)."""
    from ..tools import Toolbox

    value = load_object(spec)
    if callable(value) and not isinstance(value, Toolbox):
        try:
            value = value()
        except TypeError as exc:
            raise UserError(
                f"{spec} is a function that needs arguments ({exc}); name a Toolbox or a "
                "zero-argument factory"
            ) from exc
    if not isinstance(value, Toolbox):
        raise UserError(f"{spec} is a {type(value).__name__}, not a Toolbox")
    return value


def export_format(value: str) -> ExportFormat:
    """`value` as a tool-definition format; any other text is the ValueError the export raises."""
    from ..tools.export import ExportFormat

    known: tuple[ExportFormat, ...] = get_args(ExportFormat)
    for format in known:
        if value == format:
            return format
    raise ValueError(f"unknown format {value!r}; use 'anthropic', 'openai', 'openai-responses' or 'mcp'")
