"""Fixtures for the adapter tests: a fake provider on 127.0.0.1 and the seed-001 tools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from maitre.tools import Tool, Toolbox

from .fakeserver import FakeProvider


@pytest.fixture(scope="session")
def _fake_provider_server() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture
def provider(_fake_provider_server: FakeProvider) -> Iterator[FakeProvider]:
    """The fake provider, with nothing queued and nothing received."""
    _fake_provider_server.reset()
    yield _fake_provider_server
    _fake_provider_server.reset()


def _planner_tools() -> list[Tool]:
    planner = Toolbox()

    @planner.tool
    def get_weather(city: str) -> dict:
        """Get Saturday's weather forecast for a city. Use before suggesting outdoor plans.

        Args:
            city: City name, e.g. 'Pune'.
        """
        return {"temp_c": 31}

    @planner.tool
    def find_events(city: str, max_price_inr: int = 100_000) -> dict:
        """List events happening on Saturday in a city, optionally under a maximum price."""
        return {"events": []}

    orders = Toolbox("orders")

    @orders.tool
    def get_order(order_id: str) -> dict:
        """Look up an order by its id."""
        return {"order_id": order_id}

    return [*planner.tools(), *orders.tools()]


@pytest.fixture
def tools() -> list[Tool]:
    """get_weather, find_events and the namespaced orders.get_order (sent as orders__get_order)."""
    return _planner_tools()
