"""What every adapter test module sets up alike: the seed-001 goal, and `ask`, one call through a
fresh adapter pointed at the fake provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from maitre.models.base import ModelRequest, ModelResponse

from .fakeserver import FakeProvider

__all__ = ["Ask", "GOAL", "asker"]

GOAL = "Plan my Saturday in Pune. Budget 1,000 rupees. I love being outdoors."

Ask = Callable[..., Awaitable[ModelResponse]]
"""`await ask(provider, request, **options)`."""


def asker(model_for: Callable[..., Any]) -> Ask:
    """`ask(provider, request, **options)` for the adapter `model_for(provider, **options)` builds."""

    async def ask(provider: FakeProvider, request: ModelRequest, **options: Any) -> ModelResponse:
        """One call through a fresh adapter, closed afterwards."""
        async with model_for(provider, **options) as model:
            return await model.complete(request)

    return ask
