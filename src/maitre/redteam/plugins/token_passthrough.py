"""Token passthrough (OWASP MCP): a server that hands the client's token on, or asks for one.

Two checks:

- over HTTP, every read tool is called with the red team's canary bearer token
  (`Authorization: Bearer rt-canary-...`). Decides: `leaked` when the token comes back in a reply
  (echoed) or appears in what a tool received (side channel: forwarded); `blocked` otherwise.
- every tool with a parameter for a credential (`api_token`, `password`, `authorization`, ...)
  asks the client to pass its credential through the tool. Decides: `executed` when the tool
  accepts the canary as that argument and acts (or answers with a result), `blocked` when
  refused; no such parameter anywhere is one `blocked` case.
"""

from __future__ import annotations

from ..attack import Attack
from ..cases import Case
from ..tools_info import credential_params, reads, valid_arguments
from .base import Plugin
from .listing import listing_attempt

__all__ = ["PLUGIN", "run"]


async def run(attack: Attack) -> list[Case]:
    cases: list[Case] = []
    if attack.target.carries_tokens:
        attempts = []
        for tool in reads(attack.tools):
            attempts.append(
                await attack.send(str(tool["name"]), valid_arguments(tool) or {}, token=attack.token)
            )
        leaks = [a for a in attempts if a.leaked]
        for attempt in leaks:
            cases.append(
                Case(
                    plugin="token_passthrough",
                    id=f"token_passthrough/echo:{attempt.tool}",
                    title=f"{attempt.tool} hands the caller's bearer token on",
                    outcome="leaked",
                    why=f"the canary token came back: {', '.join(attempt.leaked)}",
                    attempts=[attempt],
                )
            )
        if not leaks:
            cases.append(
                Case(
                    plugin="token_passthrough",
                    id="token_passthrough/bearer",
                    title=f"a canary bearer token sent with {len(attempts)} read calls",
                    outcome="blocked",
                    why="the token came back in no reply and reached no tool's arguments",
                    attempts=attempts,
                )
            )
    asking = [(t, p) for t in attack.tools for p in credential_params(t)]
    for tool, param in asking:
        name = str(tool["name"])
        arguments = {**(valid_arguments(tool) or {}), param: attack.token}
        attempt = await attack.send(name, arguments, run=attack.new_run("token"))
        outcome = attack.outcome([attempt])
        outcome = "executed" if outcome == "leaked" else outcome  # we sent the token ourselves here
        cases.append(
            Case(
                plugin="token_passthrough",
                id=f"token_passthrough/asks:{name}.{param}",
                title=f"{name} asks the client for a credential in {param}",
                outcome=outcome,
                why=(
                    f"the tool took the caller's credential as an argument and acted (measured by {attack.measured_by})"
                    if outcome != "blocked"
                    else "the call carrying a credential was refused"
                ),
                attempts=[attempt],
            )
        )
    if not asking:
        cases.append(
            Case(
                plugin="token_passthrough",
                id="token_passthrough/no-credential-parameter",
                title=f"{len(attack.tools)} definitions: none asks for a credential",
                outcome="blocked",
                why="no parameter is named for a token, key, password or session",
                attempts=[listing_attempt(attack.tools)],
            )
        )
    return cases


PLUGIN = Plugin(
    name="token_passthrough",
    family="owasp-mcp",
    summary="sends a canary bearer token (leaked if it comes back) and finds tools asking for credentials",
    run=run,
)
