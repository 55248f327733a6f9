"""Provider SDKs are optional extras: importing maitre never imports them, and a missing one says
which extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from maitre.models.anthropic import AnthropicModel
from maitre.models.openai import OpenAIChatModel, OpenAIResponsesModel
from maitre.models.openai_compat import OpenAICompatibleModel


def test_importing_maitre_and_the_adapters_does_not_import_a_provider_sdk() -> None:
    """A fresh interpreter imports maitre and every adapter module; neither SDK gets loaded."""
    script = textwrap.dedent(
        """
        import sys
        import maitre, maitre.models
        import maitre.models.anthropic, maitre.models.openai, maitre.models.openai_compat
        import maitre.models.pricing
        loaded = sorted(name for name in ("anthropic", "openai") if name in sys.modules)
        print(",".join(loaded))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


@pytest.mark.parametrize(
    ("sdk", "extra", "build"),
    [
        ("anthropic", "maitre[anthropic]", lambda: AnthropicModel("claude-sonnet-5-5", api_key="k")),
        ("openai", "maitre[openai]", lambda: OpenAIChatModel("gpt-5.5", api_key="k")),
        ("openai", "maitre[openai]", lambda: OpenAIResponsesModel("gpt-5.5", api_key="k")),
        ("openai", "maitre[openai]", lambda: OpenAICompatibleModel("http://127.0.0.1:9/v1", "qwen3:8b")),
    ],
)
def test_a_missing_sdk_fails_at_construction_naming_the_extra(monkeypatch, sdk, extra, build) -> None:
    """Without the SDK, constructing the adapter raises ImportError with the install line."""
    monkeypatch.setitem(sys.modules, sdk, None)
    with pytest.raises(ImportError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        build()
