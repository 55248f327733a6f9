"""Seed 002's four guards, through maitre's gate.

1. TIMEOUT: a 300 ms tool and a 5000 ms tool under a 1500 ms timeout.
2. ERROR: a deterministic error is not retried past the cap (and here not retried at all).
3. OVERSIZED RESULT: an 11,700-token log against a 5,972-token budget - kept at 512 tokens, the
   rest behind a handle.
4. LOOP: the same call stopped at the third time.

Run it: `.venv/bin/python examples/seed002_guards/guards.py`
"""

from __future__ import annotations

import sys
import time
from typing import Annotated

import anyio
from pydantic import Field

from maitre import Gate, GateLimits, Principal, Toolbox, ToolCall, ToolError

box = Toolbox()
PRICES = {"ACME": "41.20"}
CALLS: dict[str, int] = {"get_price": 0}


@box.tool(timeout=1.5)
async def do_work(work_ms: Annotated[int, Field(ge=0, le=60_000)]) -> str:
    """Work for a while. Use it to show the timeout guard. Do not use it for real work."""
    await anyio.sleep(work_ms / 1000)
    return "ok"


@box.tool(retries=2)
def get_price(ticker: Annotated[str, Field(pattern=r"^[A-Z]{1,5}$")]) -> str:
    """Current traded price for a ticker symbol. Use it for live prices. Do not use it for history."""
    CALLS["get_price"] += 1
    if ticker not in PRICES:
        raise ToolError("NOT_FOUND", f"No price for {ticker!r}. Known tickers: {', '.join(PRICES)}.")
    return PRICES[ticker]


def make_log(tokens_wanted: int = 11_700) -> str:
    line = "2026-07-28T10:00:00Z worker-3 INFO request handled in 12 ms status=200 path=/api/orders\n"
    from maitre.tokens import count_tokens

    per_line = count_tokens(line)
    return line * (tokens_wanted // per_line + 1)


@box.tool(max_result_tokens=512)
def read_log(service: Annotated[str, Field(pattern=r"^[a-z\-]{1,30}$")]) -> str:
    """Read a service's log. Use it to debug one service. Do not use it to search across services."""
    return make_log()


async def guard_timeout(gate: Gate, principal: Principal) -> list[tuple[int, float, str]]:
    rows = []
    for work_ms in (300, 5000):
        start = time.perf_counter()
        result = await gate.call(
            ToolCall(id=f"w{work_ms}", name="do_work", arguments={"work_ms": work_ms}), principal
        )
        rows.append(
            (work_ms, (time.perf_counter() - start) * 1000, result.error.code if result.error else "ok")
        )
    return rows


async def guard_error(gate: Gate, principal: Principal) -> tuple[str, int]:
    result = await gate.call(ToolCall(id="p", name="get_price", arguments={"ticker": "NOPE"}), principal)
    return str(result.error.code), CALLS["get_price"]


async def guard_size(gate: Gate, principal: Principal):
    return await gate.call(ToolCall(id="log", name="read_log", arguments={"service": "orders"}), principal)


async def guard_loop(gate: Gate, principal: Principal) -> list[str]:
    run = gate.new_run(principal)
    out = []
    for step in range(1, 4):
        result = await gate.call(
            ToolCall(id=f"s{step}", name="get_price", arguments={"ticker": "ACME"}), principal, run
        )
        out.append(str(result.error.code) if result.error else "ok")
    return out


async def main_async() -> None:
    gate = Gate(box, limits=GateLimits(retry_backoff_s=0.01))
    principal = Principal(user="u1")
    for work_ms, waited, code in await guard_timeout(gate, principal):
        print(f"work {work_ms:5d} ms, timeout 1500 ms -> waited {waited:6.0f} ms, {code}", file=sys.stderr)
    code, calls = await guard_error(gate, principal)
    print(f"deterministic error {code}: tool ran {calls} time(s); not retried", file=sys.stderr)
    result = await guard_size(gate, principal)
    print(
        f"raw {result.usage['tokens']} tokens, kept ~512, dropped {result.usage['tokens_dropped']}",
        file=sys.stderr,
    )
    print("loop:", await guard_loop(gate, principal), file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main_async)
