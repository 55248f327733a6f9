"""What every `maitre` command shares: the guarded typer app, the consoles, the configuration.

`App` is a `typer.Typer` whose commands run inside `errors.guard`, so no command can forget it.
The configuration is read when a command first needs a setting (`settings()`): the root
command's `--config PATH`, else `MAITRE_CONFIG`, else the `maitre.toml` (or pyproject
`[tool.maitre]`) found from the working directory upward. A command that needs no setting never
reads the file, so `--help` works even beside a broken one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from .errors import guard

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["App", "console", "err", "settings", "use_config", "wide_console"]

console = Console()
err = Console(stderr=True)


class App(typer.Typer):
    """A typer app whose every command reports a user's mistake in one line (see `errors.guard`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", True)
        kwargs.setdefault("add_completion", False)
        kwargs.setdefault("pretty_exceptions_enable", False)
        # Help text is plain text: `[stores]` and `[tool.maitre]` are names to show, not rich markup.
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        register = super().command(*args, **kwargs)

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            register(guard(fn))
            return fn

        return decorator


def use_config(path: Path | None) -> None:
    """Read `path` (the root `--config`) instead of searching for the file; None searches again."""
    from ..config import choose_config

    choose_config(path)


def settings() -> Settings:
    """The configuration, read and validated now (a TOML file is cheap to read; reading it each
    time keeps one process that runs several commands, such as a test, from seeing a stale one)."""
    from ..config import load_settings

    return load_settings()


def wide_console(wide: bool) -> Console:
    """The stdout console; with `wide`, as wide as needed so no cell is ever wrapped."""
    return Console(width=10_000) if wide else console
