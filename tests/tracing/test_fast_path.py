"""Without a tracer provider the gate and the loop never build a span (the fast path stays fast)."""

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import anyio
    from maitre import Gate, Principal, Toolbox, ToolCall
    from maitre.agent import Agent
    from maitre.models import ScriptedModel, Rule, always
    from maitre import tracing

    def no_span(*args, **kwargs):
        raise AssertionError("a span was built without a tracer provider")

    for name in ("agent_span", "chat_span", "start_tool_span"):
        setattr(tracing, name, no_span)
    import maitre.agent.loop, maitre.gate.pipeline, maitre.models.tracing
    maitre.gate.pipeline.start_tool_span = no_span
    maitre.agent.loop.agent_span = no_span
    maitre.models.tracing.chat_span = no_span

    box = Toolbox()

    @box.tool
    def echo(text: str) -> str:
        '''Echo.'''
        return text

    assert not tracing.tracing_enabled()
    result = anyio.run(Gate(box).call, ToolCall(id="1", name="echo", arguments={"text": "hi"}), Principal(user="u"))
    assert not result.is_error, result.content
    model = ScriptedModel([Rule("hi", when=always, then="hello")])
    run = anyio.run(Agent(model, box).run, "hi", Principal(user="u"))
    assert run.final_text.endswith("hello"), run.final_text
    print("ok")
    """
)


def test_no_provider_means_no_span_is_ever_built():
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
