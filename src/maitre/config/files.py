"""Finding and reading the configuration file; where each effective value came from.

The file is, in order: the path given with `--config` (or `MAITRE_CONFIG`), else the first
`maitre.toml` or pyproject.toml with a `[tool.maitre]` table found from the working directory
upward. No file at all is fine: every setting has a default. A file that is given but missing,
is not valid TOML, or holds an unknown key is a `ConfigError` naming the file and the key.

Relative paths in the file (a SQLite store, a key file, the lockfile, a `.py` target) are read
relative to the file's folder, so a command works the same from any subfolder of the project.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from ..exceptions import UserError
from .schema import MaitreConfig

__all__ = ["CONFIG_ENV", "ConfigError", "Settings", "choose_config", "find_config", "load_settings"]

CONFIG_ENV = "MAITRE_CONFIG"
"""Environment variable naming the configuration file (the `--config` flag wins over it)."""


_chosen: list[Path | None] = [None]
"""The file the command line named (`maitre --config PATH`), for every command of this invocation."""


def choose_config(path: Path | str | None) -> None:
    """Read `path` from now on when `load_settings()` is not given one (None: search again).

    The root command calls it with its `--config` value on every invocation, so the commands that
    live in other doors (`maitre serve` is the MCP door's) read the same file.
    """
    _chosen[0] = Path(path) if path is not None else None


class ConfigError(UserError):
    """The configuration file is missing, unreadable, not TOML, or says something maitre refuses."""


def find_config(start: Path | None = None) -> Path | None:
    """The first `maitre.toml`, or pyproject.toml with `[tool.maitre]`, from `start` upward."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "maitre.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "maitre" in _read_toml(pyproject).get("tool", {}):
            return pyproject
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _table(path: Path) -> dict[str, Any]:
    """The maitre settings in `path`: the whole of a maitre.toml, `[tool.maitre]` of a pyproject."""
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("maitre", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.maitre] must be a table")
        return table
    return data


def _describe(error: Mapping[str, Any]) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"


@dataclass(kw_only=True)
class Settings:
    """The configuration a command runs with: the validated file (or defaults) and its origin."""

    config: MaitreConfig = field(default_factory=MaitreConfig)
    """Every section, with defaults for what the file does not say."""
    path: Path | None = None
    """The file read, or None when there is none."""
    given: frozenset[str] = frozenset()
    """The dotted keys of the values the file sets (`stores.url`, `auth.issuer`, ...)."""

    @property
    def base(self) -> Path:
        """The folder relative paths in the file are read from."""
        return self.path.parent if self.path is not None else Path.cwd()

    def source(self, key: str) -> str:
        """Where the value of dotted `key` comes from: the file's name, or `default`."""
        if self.path is not None and key in self.given:
            return str(self.path)
        return "default"

    def path_of(self, value: Path | str) -> Path:
        """`value` relative to the file's folder (unchanged when absolute)."""
        path = Path(os.path.expanduser(str(value)))
        return path if path.is_absolute() else self.base / path

    def store_url(self, value: str) -> str:
        """A store URL from the file, with a relative SQLite path made relative to the file."""
        if value in ("memory://", "memory:", ":memory:") or value.startswith(("postgresql:", "postgres:")):
            return value
        if value.startswith("sqlite://"):
            parts = urlsplit(value)
            local = parts.netloc + parts.path
            if local.startswith("/") or not local:
                return value
            query = f"?{parts.query}" if parts.query else ""
            return f"sqlite:///{str(self.path_of(local)).lstrip('/')}{query}"
        return str(self.path_of(value))

    def target(self, value: str) -> str:
        """A `FILE.py:ATTR` target relative to the file's folder (a dotted module is unchanged)."""
        module, sep, attr = value.rpartition(":")
        if sep and (module.endswith(".py") or "/" in module):
            return f"{self.path_of(module)}:{attr}"
        return value


def _keys(table: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _keys(value, dotted + ".")
        else:
            yield dotted


def load_settings(path: Path | str | None = None, *, start: Path | None = None) -> Settings:
    """Read the configuration: `path`, else the root command's `--config`, else `$MAITRE_CONFIG`,
    else the file found from `start` (the working directory) upward."""
    chosen: Path | None
    if path is None:
        path = _chosen[0]
    if path is not None:
        chosen = Path(path)
        how = "--config"
    elif os.environ.get(CONFIG_ENV):
        chosen = Path(os.environ[CONFIG_ENV])
        how = CONFIG_ENV
    else:
        chosen = find_config(start)
        how = ""
    if chosen is None:
        return Settings()
    if not chosen.is_file():
        what = "a folder" if chosen.is_dir() else "no such file"
        raise ConfigError(f"{how} {chosen}: {what}; name a maitre.toml or a pyproject.toml")
    chosen = chosen.resolve()
    table = _table(chosen)
    if "stores" in table and isinstance(table["stores"], str):
        table = {**table, "stores": {"url": table["stores"]}}
    try:
        config = MaitreConfig.model_validate(table)
    except ValidationError as exc:
        problems = "; ".join(_describe(e) for e in exc.errors())
        raise ConfigError(f"{chosen}: {problems}") from None
    return Settings(config=config, path=chosen, given=frozenset(_keys(table)))
