"""`maitre gateway --loop`: uvloop's event loop when it is installed (`auto`), asyncio's on request,
and a clear refusal when uvloop is demanded but missing."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Iterator

import pytest

from maitre.cli.errors import CommandError
from maitre.cli.gateway_cmds import use_event_loop


@pytest.fixture
def policy() -> Iterator[None]:
    """Whatever a test sets, the process's event-loop policy is put back after it."""
    before = asyncio.get_event_loop_policy()
    yield
    asyncio.set_event_loop_policy(before)


def test_asyncio_keeps_the_standard_loop(policy):
    before = asyncio.get_event_loop_policy()
    assert use_event_loop("asyncio") == "asyncio"
    assert asyncio.get_event_loop_policy() is before


def test_without_uvloop_auto_keeps_asyncio_and_uvloop_is_refused(policy, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError
    before = asyncio.get_event_loop_policy()
    assert use_event_loop("auto") == "asyncio"
    assert asyncio.get_event_loop_policy() is before
    with pytest.raises(CommandError, match="uvloop is not installed"):
        use_event_loop("uvloop")


@pytest.mark.skipif(importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed")
def test_with_uvloop_auto_runs_the_loop_on_uvloop(policy):
    import uvloop

    assert use_event_loop("auto") == "uvloop"

    async def kind() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert asyncio.run(kind()).startswith("uvloop")
    assert isinstance(asyncio.get_event_loop_policy(), uvloop.EventLoopPolicy)
