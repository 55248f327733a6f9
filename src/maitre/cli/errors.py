"""A person's mistake ends in one line on stderr, never a traceback: the one place that says how.

Every command body runs inside `guard` (the CLI's `App` applies it when a command is registered),
which turns what a command can meet into a line that names the problem and what to do, and an
exit code: 2 for a usage error (a bad value, a path that is not there, a file that is not a maitre
database), 1 for a failure (a damaged database, a server that is down, a missing extra, a
permission). Anything else is a bug: one line too, plus how to see the traceback
(`MAITRE_DEBUG=1`). A closed stdout (`maitre demo --json | head`) ends the command quietly (exit 1).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console

from ..exceptions import StoreError, UserError

__all__ = [
    "CommandError",
    "DEBUG_ENV",
    "describe",
    "fail",
    "guard",
    "leaf_exception",
    "missing_extra",
    "quiet_broken_pipe",
]

DEBUG_ENV = "MAITRE_DEBUG"
"""Set to 1 to let an unexpected exception through with its traceback."""

F = TypeVar("F", bound=Callable[..., Any])
_err = Console(stderr=True)


class CommandError(Exception):
    """A command refuses or fails with a message for the person at the terminal."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
        """The exit code: 2 for a usage error, 1 for a failure."""


def missing_extra(module: str | None) -> str | None:
    """The `pip install` line for the extra that provides `module`, or None when none does."""
    from .._extras import extra_for, install_command

    if not module:
        return None
    extra = extra_for(module)
    return install_command(extra) if extra is not None else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def leaf_exception(exc: BaseException) -> BaseException:
    """The first real exception inside task-group wrappers (anyio and the SDK raise groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = next((e for e in exc.exceptions if not isinstance(e, KeyboardInterrupt)), exc.exceptions[0])
    return exc


_OS_HINTS = {
    "ENOENT": "check the path",
    "EACCES": "check the permissions",
    "EPERM": "check the permissions",
    "EISDIR": "give a file, not a folder",
    "ENOTDIR": "a part of the path is a file, not a folder",
    "ENOSPC": "free some disk space",
    "EROFS": "the file system is read-only",
    "ECONNREFUSED": "is the server running?",
    "EADDRINUSE": "another process uses that port; pick another with --port",
    "EADDRNOTAVAIL": "this machine has no such address; check --host",
}


def _os_message(exc: OSError) -> str:
    import errno

    name = errno.errorcode.get(exc.errno or -1, "")
    what = exc.strerror or str(exc) or type(exc).__name__
    where = f"{exc.filename}: " if exc.filename else ""
    hint = _OS_HINTS.get(name)
    return f"{where}{what}" + (f" ({hint})" if hint else "")


def _driver_error(exc: BaseException) -> str | None:
    """A database or network driver's connection error, recognised without importing the driver."""
    module = type(exc).__module__.split(".")[0]
    name = type(exc).__name__
    text = _one_line(str(exc)) or name
    hint = "" if "server running" in text else " (is the server running, and the URL right?)"
    if module == "psycopg" and name in ("OperationalError", "InterfaceError"):
        return f"cannot use PostgreSQL: {text}{hint}"
    if module == "psycopg_pool":
        return f"cannot get a PostgreSQL connection: {text}{hint}"
    if module == "psycopg":
        return f"PostgreSQL refused: {text}"
    if module == "redis" and "Connection" in name:
        return f"cannot reach Redis: {text}{hint}"
    if module.startswith(("httpx", "httpcore")) and any(w in name for w in ("Connect", "Timeout", "Network")):
        return f"cannot connect: {text}{hint}"
    return None


def describe(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and one-line message for an exception a person can act on; None for a bug."""
    from .._extras import MissingExtraError

    exc = leaf_exception(exc)
    if isinstance(exc, CommandError):
        return exc.code, _one_line(str(exc))
    if isinstance(exc, MissingExtraError):  # installing is a fix, not a usage mistake: exit 1
        return 1, _one_line(str(exc))
    if isinstance(exc, UserError):
        return 2, _one_line(str(exc))
    if isinstance(exc, ModuleNotFoundError):
        install = missing_extra(exc.name)
        if install is not None:
            return 1, f"this needs the package {exc.name!r}, which is not installed: {install}"
        return None
    if isinstance(exc, StoreError):
        return 1, _one_line(str(exc))
    if isinstance(exc, sqlite3.DatabaseError):
        return 1, f"the SQLite database cannot be used: {_one_line(str(exc))}"
    driver = _driver_error(exc)
    if driver is not None:
        return 1, driver
    if isinstance(exc, OSError):
        return 1, _one_line(_os_message(exc))
    from ..models.base import ModelError

    if isinstance(exc, ModelError):
        return 1, _one_line(str(exc))
    return None


def fail(message: str, *, code: int = 1) -> NoReturn:
    """Print `message` as the command's one error line and exit with `code`."""
    _err.print(f"[red]error:[/red] {_escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def quiet_broken_pipe() -> NoReturn:
    """The reader closed stdout (`| head`): stop without a word, and without Python's complaint at
    exit when it flushes the dead pipe. Exit 1, as Python, click and rich do on EPIPE: the output
    is incomplete."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test runner's captured stdout)
        pass
    raise typer.Exit(1)


def guard(fn: F) -> F:
    """`fn` with every exception a person can act on turned into one line and an exit code."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):  # usage errors: typer prints them
            raise
        except KeyboardInterrupt:
            _err.print("interrupted", highlight=False)
            raise typer.Exit(130) from None
        except BaseException as exc:
            leaf = leaf_exception(exc)
            if isinstance(leaf, BrokenPipeError):
                quiet_broken_pipe()
            if isinstance(leaf, KeyboardInterrupt):
                raise typer.Exit(130) from None
            if isinstance(leaf, SystemExit | typer.Exit | typer.Abort | typer.TyperException):
                raise leaf from None
            known = describe(leaf)
            if known is not None:
                code, message = known
                if os.environ.get(DEBUG_ENV):
                    raise
                fail(message, code=code)
            if os.environ.get(DEBUG_ENV) or not isinstance(exc, Exception):
                raise
            fail(
                f"unexpected {type(leaf).__name__}: {_one_line(str(leaf))[:300]} "
                f"(run with {DEBUG_ENV}=1 for the traceback)"
            )

    return cast(F, run)
