"""Model options from the command line and the configuration (issue 19, item 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from maitre.agent import Agent
from maitre.cli import app
from maitre.cli.demo import model_from_spec
from maitre.demo import demo_limits, scripted_model
from maitre.exceptions import UserError
from maitre.messages import UserMessage
from maitre.models.base import ModelRequest
from maitre.models.openai import OpenAIChatModel
from maitre.models.openai_compat import OpenAICompatibleModel
from maitre.models.spec import ModelOptions, build_model, parse_model_spec
from maitre.tools import Toolbox

from .fakeserver import FakeProvider
from .shapes import chat_completion


@pytest.fixture(autouse=True)
def no_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test reads only the configuration it writes (none by default)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MAITRE_CONFIG", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_options_ride_in_the_model_string_after_the_model_name() -> None:
    spec = parse_model_spec(
        "openai-compatible:http://127.0.0.1:8080/v1#qwen2.5-coder?temperature=0&seed=7&max_output_tokens=256"
        "&tools_in_prompt=on&constrained=off&request_timeout_s=600&run_seconds=1200"
    )
    assert (spec.kind, spec.url, spec.model) == (
        "openai-compatible",
        "http://127.0.0.1:8080/v1",
        "qwen2.5-coder",
    )
    assert spec.options == ModelOptions(
        temperature=0.0,
        seed=7,
        max_output_tokens=256,
        tools_in_prompt=True,
        constrained=False,
        request_timeout_s=600.0,
        run_seconds=1200.0,
    )
    model = build_model(spec)
    assert isinstance(model, OpenAICompatibleModel)
    assert model.extra == {"temperature": 0.0, "seed": 7} and model.max_output_tokens == 256
    assert model.prompt_mode and not model.constrained_mode


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("openai-compatible:http://h/v1#m?temprature=0", "unknown model option 'temprature'"),
        ("openai-compatible:http://h/v1#m?seed=seven", "seed='seven' is not a valid value"),
        ("openai-compatible:http://h/v1#m?constrained=maybe", "use on or off"),
        ("openai-compatible:http://h/v1#m?schema_dialect=gbnf", "schema_dialect='gbnf'"),
        ("openai-compatible:#m", "use --model openai-compatible:"),
        ("llama:7b", "unknown model 'llama:7b'"),
    ],
)
def test_a_wrong_option_is_refused_in_one_line(spec: str, says: str) -> None:
    with pytest.raises(UserError, match=None) as caught:
        build_model(parse_model_spec(spec))
    assert says in str(caught.value)


def test_constrained_calls_are_on_for_local_servers_and_refused_for_hosted_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert build_model(parse_model_spec("openai-compatible:http://h/v1#m")).constrained_mode
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    hosted = build_model(parse_model_spec("openai:gpt-5.5?temperature=0.2&seed=3"))
    assert isinstance(hosted, OpenAIChatModel) and hosted.extra == {"temperature": 0.2, "seed": 3}
    with pytest.raises(UserError, match="constrained tool calls need a local server"):
        build_model(parse_model_spec("openai:gpt-5.5?constrained=on"))


@pytest.mark.anyio
async def test_the_options_reach_the_server(provider: FakeProvider, tools) -> None:
    provider.queue(chat_completion('{"answer": "ok"}'))
    model = build_model(
        parse_model_spec(
            f"openai-compatible:{provider.url}/v1#qwen?temperature=0&seed=11&max_output_tokens=300"
        )
    )
    async with model:
        await model.complete(
            ModelRequest(messages=[UserMessage(content="Hi")], tools=tools, max_output_tokens=4096)
        )
    body = provider.last.body
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0, 11, 300)
    assert "response_format" in body


def test_the_model_section_of_the_configuration_is_the_default(tmp_path: Path) -> None:
    (tmp_path / "maitre.toml").write_text(
        '[model]\nspec = "openai-compatible:http://127.0.0.1:9/v1#small"\ntemperature = 0\nseed = 5\n'
        "constrained = false\n"
    )
    model = model_from_spec(None)
    assert isinstance(model, OpenAICompatibleModel) and model.model == "small"
    assert model.extra == {"temperature": 0, "seed": 5} and not model.constrained_mode
    flags_win = model_from_spec(None, ModelOptions(seed=9))
    assert flags_win.extra["seed"] == 9
    string_wins = model_from_spec(
        "openai-compatible:http://127.0.0.1:9/v1#other?seed=1", ModelOptions(seed=9)
    )
    assert string_wins.extra["seed"] == 1 and string_wins.model == "other"


def test_a_typo_in_the_model_section_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "maitre.toml").write_text("[model]\ntemprature = 0\n")
    with pytest.raises(UserError, match="temprature"):
        model_from_spec(None)


def test_the_demo_scales_its_limits_to_the_model() -> None:
    local = OpenAICompatibleModel("http://127.0.0.1:9/v1", "m")
    assert (demo_limits(local).max_seconds, demo_limits(local).max_output_tokens_per_call) == (900, 512)
    scripted = demo_limits(scripted_model())
    assert (scripted.max_seconds, scripted.max_output_tokens_per_call) == (120, 4096)
    chosen = demo_limits(local, ModelOptions(run_seconds=60, max_output_tokens=128))
    assert (chosen.max_seconds, chosen.max_output_tokens_per_call) == (60, 128)


def test_maitre_demo_takes_the_options_from_its_flags(provider: FakeProvider) -> None:
    """Nothing is queued, so every chapter's first call fails: the request shows what was sent."""
    spec = f"openai-compatible:{provider.url}/v1#qwen"
    args = ["demo", "--json", "--model", spec, "--temperature", "0", "--seed", "3", "--no-constrained"]
    result = CliRunner().invoke(app, [*args, "--tools-in-prompt", "on", "--max-output-tokens", "200"])
    assert result.exit_code == 1, result.output
    first = provider.requests[0].body
    assert (first["temperature"], first["seed"], first["max_tokens"]) == (0, 3, 200)
    assert "response_format" not in first and "tools" not in first  # prompt mode, unconstrained
    assert "<tools>" in first["messages"][0]["content"]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("stop_reason") == "model_error" for e in events)


def test_notes_tools_are_off_unless_asked_for() -> None:
    box = Toolbox()

    @box.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = scripted_model()
    assert Agent(model, box).gate.toolbox.names() == ["ping"]
    assert {"write_notes", "read_notes"} <= set(Agent(model, box, notes=True).gate.toolbox.names())
