"""llama-cpp-python's server, as far as the adapter tests need it: its fixtures and its checks.

`llama_cpp_checks` is set as `FakeProvider.validate`: it refuses what the real server's request
model refuses, with the HTTP 500 bodies recorded from llama-cpp-python 0.3.36 - an assistant
message whose `content` is null beside `tool_calls`, and a `response_format` of type
`json_schema` (the server takes only `text` and `json_object`, the latter with a `schema`). See
fixtures/README.md for what is recorded and what is written from source.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .fakeserver import Received, Reply

__all__ = ["LLAMA_CPP", "OTHER_SERVERS", "fixture_reply", "llama_cpp_checks"]

_HERE = Path(__file__).parent / "fixtures"
LLAMA_CPP: dict[str, Any] = json.loads((_HERE / "llama_cpp_server.json").read_text())
OTHER_SERVERS: dict[str, Any] = json.loads((_HERE / "other_servers.json").read_text())


def fixture_reply(name: str) -> Reply:
    """A fixture answer by name (from either file), as the fake server sends it."""
    entry = LLAMA_CPP.get(name) or OTHER_SERVERS[name]
    headers = {"x-should-retry": "false"} if entry["status"] >= 500 else {}
    return Reply(status=entry["status"], body=entry["body"], headers=headers)


def llama_cpp_checks(received: Received) -> Reply | None:
    """The server's own refusal of this request, or None when it would answer it."""
    body = received.body if isinstance(received.body, dict) else {}
    for message in body.get("messages", []):
        if (
            message.get("role") == "assistant"
            and message.get("tool_calls")
            and message.get("content") is None
        ):
            return fixture_reply("null_content_beside_tool_calls")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") not in (None, "text", "json_object"):
        return fixture_reply("json_schema_response_format_refused")
    if isinstance(response_format, dict) and _grammar_fails(response_format.get("schema")):
        return Reply(body=None, hang_up=True)
    return None


_GBNF_UNKNOWN_ESCAPE = re.compile(r"\\(?![tnrxu\"\\\[\]()|{}*+?])")
"""An escape llama-cpp-python's converter copies into the grammar (`\\d`, `\\s`, `\\.`) and GBNF lacks."""


def _grammar_fails(schema: Any) -> bool:
    """Whether llama.cpp would refuse the grammar of this schema - after which the recorded server
    (0.3.36) crashed while generating and the client got no answer at all: a pattern with an escape
    GBNF lacks ("unknown escape at \\d", recorded), or a count repeated too often (`maxLength:
    2000` recorded refused; `{1,1000}` in a pattern parsed)."""
    if isinstance(schema, list):
        return any(_grammar_fails(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and _GBNF_UNKNOWN_ESCAPE.search(pattern):
        return True
    if any(isinstance(schema.get(key), int) and schema[key] >= 2000 for key in ("maxLength", "maxItems")):
        return True
    return any(_grammar_fails(value) for value in schema.values())
