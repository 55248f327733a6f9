"""What a model call cost, in US dollars, from a per-model price table.

Prices are USD per million tokens: fresh input, output, and cached input (prompt-cache reads).
`Usage.input_tokens` counts every prompt token, cached ones included (that is how every adapter
reports it), so a call costs

    (input - cached) * input + cached * cached_input + output * output   (per million)

Anthropic bills prompt-cache *writes* at 1.25x-2x the input price; `Usage` does not carry them
apart, so they are counted at the input price (a slight underestimate where caching is used).
Some models charge more for long prompts (Claude Haiku 5.5 above 100K prompt tokens, GPT-5.5 above
272K): a `Price` can carry that second tier, applied to the whole call, as the providers do.

Model ids are matched exactly first, then by the longest known id that the given id extends with
a snapshot suffix (`claude-opus-4-5-20251101`, `gpt-4o-2024-08-06`, `gpt-5.5-latest`,
`claude-sonnet-5-5@20260901`, `...[1m]`); provider prefixes (`anthropic/`, `openai/`,
`us.anthropic.`, Bedrock's `-v1:0`) are ignored. An unknown model costs `None`, not zero, so a
budget in dollars can tell "free" from "unknown". Local models are free: names starting with
`openai-compatible:`, `local:` or `ollama:`, and the scripted model (`scripted`).

The table is a snapshot: prices change. `register_price` adds or overrides an entry in the
default table; a `PriceTable` of your own can be passed where a table is accepted.

Sources (read November 2026):
- Anthropic: https://platform.claude.com/docs/en/about-claude/pricing (model pricing table: base
  input, cache hits and refreshes, output) and https://platform.claude.com/docs/en/models
  (models overview); Haiku 5.5's prompt-length tiers and Sonnet 5.5's 2026-10-07 cache-read cut
  as listed on the pricing page.
- OpenAI: https://developers.openai.com/api/docs/pricing (standard tier: input, cached input,
  output; GPT-5.5's long-context rates above 272K input tokens); GPT-5.6 Sol/Terra/Luna from
  OpenAI's GPT-5.6 announcement pricing, cached input at a tenth of input as for the GPT-5 family.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Usage

__all__ = [
    "DEFAULT_PRICES",
    "FREE",
    "LOCAL_PREFIXES",
    "Price",
    "PriceTable",
    "cost_usd",
    "price_for",
    "register_price",
]

LOCAL_PREFIXES = ("openai-compatible:", "local:", "ollama:")


@dataclass(kw_only=True, frozen=True)
class Price:
    """What one model charges, in USD per million tokens."""

    input: float
    """Fresh (uncached) input tokens."""
    output: float
    """Output tokens (reasoning tokens included, as providers bill them)."""
    cached_input: float | None = None
    """Input tokens read from the prompt cache; None means the input price."""
    long_context_threshold: int | None = None
    """Above this many input tokens in one call, `long_context` prices the whole call."""
    long_context: Price | None = None
    """The price of a call whose prompt is longer than `long_context_threshold`."""

    def cost(self, usage: Usage) -> float:
        """USD for one call's usage."""
        if (
            self.long_context is not None
            and self.long_context_threshold is not None
            and usage.input_tokens > self.long_context_threshold
        ):
            return self.long_context.cost(usage)
        cached = min(max(usage.cached_input_tokens, 0), max(usage.input_tokens, 0))
        fresh = max(usage.input_tokens, 0) - cached
        cached_price = self.input if self.cached_input is None else self.cached_input
        total = fresh * self.input + cached * cached_price + max(usage.output_tokens, 0) * self.output
        return total / 1_000_000


FREE = Price(input=0.0, output=0.0, cached_input=0.0)
"""The price of a model that runs on your own hardware."""

_SNAPSHOT_SUFFIX = re.compile(
    r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}|\d{4}|latest|preview|v\d+(?::\d+)?)|\[1m\]|:\d+)*"
)
_PROVIDER_PREFIX = re.compile(r"^(?:[\w.\-]+/)+|^(?:[a-z]{2,6}\.)?anthropic\.")


class PriceTable:
    """Model id -> `Price`, with snapshot-suffix matching and free local models.

    Example:
        ```python
        table = PriceTable()
        table.register("my-finetune", Price(input=1.0, output=4.0))
        table.cost_usd("my-finetune-20260101", usage)
        ```
    """

    def __init__(
        self, prices: dict[str, Price] | None = None, *, free_prefixes: tuple[str, ...] = LOCAL_PREFIXES
    ):
        self._prices: dict[str, Price] = dict(prices or {})
        self._free_prefixes = tuple(free_prefixes)

    def register(self, model: str, price: Price) -> None:
        """Add or replace the price of a model id (dated snapshots of it match too)."""
        if not model:
            raise ValueError("a price needs a model id")
        self._prices[model] = price

    def lookup(self, model: str) -> Price | None:
        """The price of `model`, or None when it is unknown."""
        if not model:
            return None
        if model in self._prices:
            return self._prices[model]
        if model == "scripted" or model.startswith(self._free_prefixes):
            return FREE
        bare = _PROVIDER_PREFIX.sub("", model)
        if bare in self._prices:
            return self._prices[bare]
        best: str | None = None
        for known in self._prices:
            extends = bare.startswith(known) and _SNAPSHOT_SUFFIX.fullmatch(bare[len(known) :])
            if extends and (best is None or len(known) > len(best)):
                best = known
        return self._prices[best] if best is not None else None

    def cost_usd(self, model: str, usage: Usage) -> float | None:
        """USD for one call, or None when the model's price is unknown."""
        price = self.lookup(model)
        return None if price is None else price.cost(usage)

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.lookup(model) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._prices))


def _p(
    input: float,
    output: float,
    cached: float | None = None,
    *,
    long_context_threshold: int | None = None,
    long_context: Price | None = None,
) -> Price:
    return Price(
        input=input,
        output=output,
        cached_input=cached,
        long_context_threshold=long_context_threshold,
        long_context=long_context,
    )


_ANTHROPIC: dict[str, Price] = {
    # platform.claude.com/docs/en/about-claude/pricing: base input / cache hits / output, USD per MTok.
    "claude-fable-5-1": _p(10.0, 50.0, 0.25),
    "claude-mythos-5-1": _p(10.0, 50.0, 0.25),
    "claude-fable-5": _p(10.0, 50.0, 1.0),
    "claude-mythos-5": _p(10.0, 50.0, 1.0),
    "claude-opus-5-5": _p(4.0, 20.0, 0.20),
    "claude-opus-5": _p(5.0, 25.0, 0.50),
    "claude-opus-4-8": _p(5.0, 25.0, 0.50),
    "claude-opus-4-7": _p(5.0, 25.0, 0.50),
    "claude-opus-4-6": _p(5.0, 25.0, 0.50),
    "claude-opus-4-5": _p(5.0, 25.0, 0.50),
    "claude-opus-4-1": _p(15.0, 75.0, 1.50),
    "claude-opus-4-0": _p(15.0, 75.0, 1.50),
    "claude-opus-4": _p(15.0, 75.0, 1.50),
    "claude-sonnet-5-5": _p(2.0, 10.0, 0.10),
    "claude-sonnet-5": _p(2.0, 10.0, 0.20),
    "claude-sonnet-4-6": _p(3.0, 15.0, 0.30),
    "claude-sonnet-4-5": _p(3.0, 15.0, 0.30),
    "claude-sonnet-4-0": _p(3.0, 15.0, 0.30),
    "claude-sonnet-4": _p(3.0, 15.0, 0.30),
    "claude-3-7-sonnet": _p(3.0, 15.0, 0.30),
    "claude-haiku-5-5": _p(
        0.10, 0.50, 0.01, long_context_threshold=100_000, long_context=_p(0.50, 2.50, 0.05)
    ),
    "claude-haiku-4-5": _p(1.0, 5.0, 0.10),
    "claude-3-5-haiku": _p(0.80, 4.0, 0.08),
    "claude-3-haiku": _p(0.25, 1.25, 0.03),
}

_OPENAI: dict[str, Price] = {
    # developers.openai.com/api/docs/pricing, standard tier: input / cached input / output per 1M.
    "gpt-5.6-sol": _p(5.0, 30.0, 0.50),
    "gpt-5.6-terra": _p(2.50, 15.0, 0.25),
    "gpt-5.6-luna": _p(1.0, 6.0, 0.10),
    "gpt-5.5": _p(5.0, 30.0, 0.50, long_context_threshold=272_000, long_context=_p(10.0, 45.0, 1.0)),
    "gpt-5.5-pro": _p(30.0, 180.0),
    "gpt-5.4": _p(2.50, 15.0, 0.25),
    "gpt-5.4-pro": _p(30.0, 180.0),
    "gpt-5.4-mini": _p(0.75, 4.50, 0.075),
    "gpt-5.4-nano": _p(0.20, 1.25, 0.02),
    "gpt-5": _p(1.25, 10.0, 0.125),
    "gpt-5-mini": _p(0.25, 2.0, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-4.1": _p(2.0, 8.0, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10.0, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o3": _p(2.0, 8.0, 0.50),
    "o4-mini": _p(1.10, 4.40, 0.275),
}

DEFAULT_PRICES = PriceTable({**_ANTHROPIC, **_OPENAI})
"""The built-in table; `register_price` changes it for the whole process."""


def register_price(
    model: str,
    price: Price | None = None,
    *,
    input: float | None = None,
    output: float | None = None,
    cached_input: float | None = None,
) -> Price:
    """Add or override a model's price in the default table (USD per million tokens).

    Example:
        ```python
        register_price("my-gateway/claude-opus-5-5", input=4.4, output=22.0)
        register_price("openai-compatible:mixtral", FREE)
        ```
    """
    if price is None:
        if input is None or output is None:
            raise ValueError("give a Price, or both input= and output= in USD per million tokens")
        price = Price(input=input, output=output, cached_input=cached_input)
    DEFAULT_PRICES.register(model, price)
    return price


def price_for(model: str, *, table: PriceTable | None = None) -> Price | None:
    """The price of `model` in `table` (default: the built-in table), or None."""
    return (table or DEFAULT_PRICES).lookup(model)


def cost_usd(model: str, usage: Usage, *, table: PriceTable | None = None) -> float | None:
    """USD for one call of `model` with `usage`; None when the model's price is unknown."""
    return (table or DEFAULT_PRICES).cost_usd(model, usage)
