"""The price table: documented prices, snapshot ids, cached tokens, long prompts, custom prices."""

from __future__ import annotations

import pytest

from maitre.models.base import Usage
from maitre.models.pricing import FREE, Price, PriceTable, cost_usd, price_for, register_price

MILLION = 1_000_000


@pytest.mark.parametrize(
    ("model", "input", "output"),
    [
        ("claude-opus-5-5", 4.0, 20.0),
        ("claude-sonnet-5-5", 2.0, 10.0),
        ("claude-haiku-4-5", 1.0, 5.0),
        ("claude-opus-4-1", 15.0, 75.0),
        ("gpt-5.5", 5.0, 30.0),
        ("gpt-5.4-mini", 0.75, 4.50),
        ("gpt-4o-mini", 0.15, 0.60),
    ],
)
def test_listed_prices_are_per_million_tokens(model: str, input: float, output: float) -> None:
    """100K fresh input tokens and 100K output tokens cost a tenth of the per-million prices."""
    usage = Usage(input_tokens=100_000, output_tokens=100_000)
    assert cost_usd(model, usage) == pytest.approx((input + output) / 10)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-5-5@20260901", "claude-sonnet-5-5"),
        ("anthropic.claude-opus-4-5-20251101-v1:0", "claude-opus-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-5-5", "claude-opus-5-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-5.5-2026-04-23", "gpt-5.5"),
        ("openai/gpt-5.4-nano", "gpt-5.4-nano"),
    ],
)
def test_dated_and_provider_prefixed_ids_find_their_model(model: str, expected: str) -> None:
    """Snapshot suffixes and provider prefixes resolve to the base model's price."""
    assert price_for(model) == price_for(expected)
    assert price_for(model) is not None


def test_a_longer_model_name_is_not_mistaken_for_a_shorter_one() -> None:
    """`gpt-5.5-pro` is not `gpt-5.5`; an unknown `claude-opus-4-9` is not `claude-opus-4`."""
    assert price_for("gpt-5.5-pro") != price_for("gpt-5.5")
    assert price_for("gpt-5-mini-2025-08-07") == price_for("gpt-5-mini")
    assert price_for("claude-opus-4-9") is None


def test_cached_input_is_charged_at_the_cache_price() -> None:
    """input_tokens includes cached tokens; those are charged at the cache-read price."""
    usage = Usage(input_tokens=MILLION, output_tokens=0, cached_input_tokens=800_000)
    # claude-sonnet-4-6: $3 fresh, $0.30 cache reads
    assert cost_usd("claude-sonnet-4-6", usage) == pytest.approx(0.2 * 3.0 + 0.8 * 0.30)


def test_a_long_prompt_moves_the_whole_call_to_the_long_context_price() -> None:
    """Haiku 5.5 above 100K prompt tokens bills every token of the call at the higher tier."""
    short = cost_usd("claude-haiku-5-5", Usage(input_tokens=100_000, output_tokens=1000))
    long = cost_usd("claude-haiku-5-5", Usage(input_tokens=100_001, output_tokens=1000))
    assert short == pytest.approx((100_000 * 0.10 + 1000 * 0.50) / MILLION)
    assert long == pytest.approx((100_001 * 0.50 + 1000 * 2.50) / MILLION)


def test_local_and_scripted_models_are_free_and_unknown_models_are_none() -> None:
    """Free is 0.0; unknown is None, so a dollar budget can tell them apart."""
    usage = Usage(input_tokens=5000, output_tokens=500)
    assert cost_usd("openai-compatible:qwen3:8b", usage) == 0.0
    assert cost_usd("ollama:llama3.1", usage) == 0.0
    assert cost_usd("local:my-gguf", usage) == 0.0
    assert cost_usd("scripted", usage) == 0.0
    assert cost_usd("mystery-model-7b", usage) is None
    assert cost_usd("", usage) is None


def test_custom_prices_can_be_registered_in_a_table_of_your_own() -> None:
    """A PriceTable takes new entries; their dated snapshots match too; the default is untouched."""
    table = PriceTable()
    table.register("acme-large", Price(input=1.0, output=4.0, cached_input=0.1))
    assert table.cost_usd("acme-large-2026-01-01", Usage(input_tokens=MILLION, output_tokens=MILLION)) == 5.0
    assert "acme-large" in table
    assert price_for("acme-large") is None


def test_register_price_changes_the_default_table_and_exact_names_win_over_free_prefixes() -> None:
    """A paid server behind the OpenAI-compatible adapter can be priced by its full name."""
    name = "openai-compatible:hosted-mixtral-test-only"
    try:
        register_price(name, input=0.5, output=1.5)
        assert cost_usd(name, Usage(input_tokens=MILLION, output_tokens=MILLION)) == 2.0
    finally:
        register_price(name, FREE)
    with pytest.raises(ValueError):
        register_price("half-a-price", input=1.0)
