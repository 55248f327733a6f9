"""Load `MODULE_OR_FILE:ATTR` - the way every CLI command names a toolbox (or any object)."""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from .._loader import load_object
from ..exceptions import UserError

if TYPE_CHECKING:
    from ..tools import Toolbox
    from ..tools.export import ExportFormat

__all__ = ["FORMATS", "export_format", "load_object", "load_toolbox"]

FORMATS = ("anthropic", "openai", "openai-responses", "mcp")
"""The tool-definition formats `--format` accepts (`maitre.tools.export.ExportFormat`)."""


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
    """`value` as a tool-definition format; any other text is a `UserError` naming the known ones."""
    from ..tools.export import ExportFormat

    known: tuple[ExportFormat, ...] = get_args(ExportFormat)
    for format in known:
        if value == format:
            return format
    raise UserError(f"unknown format {value!r}; use {', '.join(FORMATS)}")
