"""Constrained schemas llama.cpp can compile: a `\\d` in a tool's pattern made the recorded
llama-cpp-python 0.3.36 server refuse the grammar and then crash while generating (2026-12-02)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import Field

from maitre import Toolbox
from maitre.agent.messages import UserMessage
from maitre.models.base import ModelError, ModelRequest
from maitre.models.constrained import (
    MAX_GRAMMAR_REPEAT,
    grammar_safe_pattern,
    grammar_safe_schema,
    request_fields,
    step_schema,
)
from maitre.models.openai_compat import OpenAICompatibleModel

from .fakeserver import FakeProvider
from .llamacpp import _grammar_fails, llama_cpp_checks
from .shapes import chat_completion

pytestmark = pytest.mark.anyio

SAMPLES = [
    "", "1200", "1200.00", "1200.5", "1200.", ".5", "12a", "A1042", "a1042", "A10420", "T-481",
    "asha@example.com", "as ha@example.com", "a@b", "@b", "Pune", "Pune!", "x.y", "x-y", "a\tb", "a b",
    "ab_9", "\u00e9t\u00e9", "a\"b", "(a)", "a+b",
]  # fmt: skip

PATTERNS = [
    r"^\d{1,8}(\.\d{1,2})?$",  # pydantic's Decimal(max_digits=10, decimal_places=2)
    r"^[^@\s]{1,64}@[^@\s]{1,255}$",
    r"^A[0-9]{4}$",
    r"^T-[0-9]{3}$",
    r"^[A-Za-z .'-]{2,40}$",
    r"^\w+$",
    r"^\D+$",
    r"^[\w.\-]+$",
    r"^a\"b$",
    r"^\(a\)$",
    r"^a\+b$",
    r"^x\.y|x\-y$",
    r"^a\tb$",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_translated_pattern_matches_the_same_strings_and_has_only_escapes_gbnf_knows(pattern: str) -> None:
    safe = grammar_safe_pattern(pattern)
    assert safe is not None
    assert not _grammar_fails({"pattern": safe}), safe
    for sample in SAMPLES:
        expected = re.search(pattern, sample, re.ASCII) is not None
        assert (re.search(safe, sample) is not None) == expected, (pattern, safe, sample)


@pytest.mark.parametrize(
    "pattern",
    [r"^(?!x)a$", r"abc", r"^abc", r"^a$b$", r"^\bword$", r"^(a)\1$", r"^[\D]$", r"^a{300}$", "^a\\$"],
)
def test_what_gbnf_cannot_say_is_dropped_not_sent(pattern: str) -> None:
    assert grammar_safe_pattern(pattern) is None
    assert "pattern" not in grammar_safe_schema({"type": "string", "pattern": pattern})


def test_long_counts_are_loosened_and_names_that_look_like_keywords_are_kept() -> None:
    assert grammar_safe_pattern(r"^[^@\s]{1,1000}$") == r"^[^@ \t\n\r]{1,}$"
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "maxLength": 2000, "minLength": 1},
            "maxLength": {"type": "integer"},
        },
        "required": ["pattern", "maxLength"],
    }
    safe = grammar_safe_schema(schema)
    assert set(safe["properties"]) == {"pattern", "maxLength"}
    assert safe["properties"]["pattern"] == {"type": "string", "minLength": 1}
    assert MAX_GRAMMAR_REPEAT < 2000 and schema["properties"]["pattern"]["maxLength"] == 2000  # not mutated


def refund_tools() -> list[Any]:
    box = Toolbox("orders")

    @box.tool(effect="write")
    def issue_refund(
        order_id: Annotated[str, Field(pattern=r"^A[0-9]{4}$")],
        amount: Annotated[Decimal, Field(gt=0, le=5000, max_digits=10, decimal_places=2)],
    ) -> str:
        """Refund an order."""
        return "ok"

    @box.tool
    def send_email(to: Annotated[str, Field(pattern=r"^[^@\s]{1,64}@[^@\s]{1,255}$")], body: Annotated[str, Field(max_length=2000)]) -> str:  # fmt: skip
        """Send an email."""
        return "sent"

    return box.tools()


def test_the_demo_shaped_step_schema_is_unchanged_in_what_it_accepts() -> None:
    raw = step_schema(refund_tools())
    assert _grammar_fails(raw), "the raw schema is what crashed the recorded server"
    safe = request_fields(raw, "llama.cpp")["response_format"]["schema"]
    assert not _grammar_fails(safe)
    good = {"tool": "orders.issue_refund", "arguments": {"order_id": "A1042", "amount": "1200.00"}}
    jsonschema.validate(good, safe)
    for amount in ("12.345", "1,200"):
        bad = {"tool": "orders.issue_refund", "arguments": {"order_id": "A1042", "amount": amount}}
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, safe)
    assert request_fields(raw, "vllm")["guided_json"] == raw, "other dialects get the schema as it is"


async def test_the_llama_cpp_server_gets_a_schema_it_can_compile(provider: FakeProvider) -> None:
    """The fake server hangs up on a schema llama.cpp cannot compile, as the crashed one did; the
    adapter's request goes through and the refund call is read."""
    provider.validate = llama_cpp_checks
    answer = '{"tool": "orders.issue_refund", "arguments": {"order_id": "A1042", "amount": "1200.00"}}'
    provider.queue(chat_completion(answer))
    async with OpenAICompatibleModel(f"{provider.url}/v1", "qwen", max_retries=0) as model:
        response = await model.complete(
            ModelRequest(messages=[UserMessage(content="Refund A1042")], tools=refund_tools())
        )
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("orders.issue_refund", {"order_id": "A1042", "amount": "1200.00"})
    ]
    assert not _grammar_fails(provider.last.body["response_format"]["schema"])


async def test_the_fake_server_hangs_up_on_the_raw_schema_as_the_real_one_crashed(
    provider: FakeProvider,
) -> None:
    """The check has teeth: the unsafe schema, sent as it is, gets no answer."""
    provider.validate = llama_cpp_checks
    raw = step_schema(refund_tools())
    async with OpenAICompatibleModel(
        f"{provider.url}/v1", "qwen", max_retries=0, constrained=False, extra={"response_format": {"type": "json_object", "schema": raw}}
    ) as model:  # fmt: skip
        with pytest.raises(ModelError):
            await model.complete(ModelRequest(messages=[UserMessage(content="Refund A1042")]))
