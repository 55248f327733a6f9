"""`maitre demo`: a short story told through the real gate, offline and deterministic.

A valid call; a malformed id answered with a teaching error and fixed; a hanging tool stopped at
its deadline; a repeated call caught by the loop guard; an oversized result cut and paged.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
import typer
from pydantic import Field
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from ..gate import Gate
from ..tools import Toolbox
from ..types import Principal, ToolCall, ToolResult

__all__ = ["build_demo_toolbox", "demo_command", "run_demo"]

OrderId = Annotated[
    str, Field(pattern=r"^A[0-9]{4}$", description="Order id: the letter A then 4 digits, like A1042")
]


def build_demo_toolbox() -> Toolbox:
    box = Toolbox()

    @box.tool
    def get_order(order_id: OrderId) -> dict[str, Any]:
        """Look up one order by its id. Use it when the user asks about status or delivery date.
        Do not use it to search by customer name."""
        return {"order_id": order_id, "status": "shipped", "arrives": "Friday", "total_inr": 1200}

    @box.tool(timeout=0.3)
    async def get_courier_eta(order_id: OrderId) -> str:
        """Ask the courier for a live ETA. Use it only after get_order says shipped. Do not use it for
        orders that are not shipped."""
        await anyio.sleep(5)  # the courier never answers
        return "never"

    @box.tool(max_result_tokens=64)
    def read_order_log(order_id: OrderId) -> str:
        """Read the raw event log of an order. Use it only to debug a stuck order. Do not use it for
        status questions."""
        return "\n".join(f"2026-03-{1 + i % 28:02d} event {i}: scanned at hub {i % 7}" for i in range(200))

    return box


STORY: list[tuple[str, str, Any]] = [
    ("A valid call", "get_order", {"order_id": "A1042"}),
    ("A malformed id: the error teaches", "get_order", {"order_id": "1042"}),
    ("The model fixes its call", "get_order", {"order_id": "A1042"}),
    ("A tool that hangs is stopped at its deadline", "get_courier_eta", {"order_id": "A1042"}),
    ("An oversized result is cut, the rest kept behind a handle", "read_order_log", {"order_id": "A1042"}),
    ("The same call a third time: the loop guard fires", "get_order", {"order_id": "A1042"}),
]


async def run_demo(emit: Any) -> list[ToolResult]:
    gate = Gate(build_demo_toolbox())
    principal = Principal(user="demo-user", tenant="demo")
    run = gate.new_run(principal)
    results = []
    for i, (title, name, arguments) in enumerate(STORY, start=1):
        call = ToolCall(id=f"call_{i}", name=name, arguments=arguments, run_id=run.run_id)
        emit({"type": "tool_call", "step": i, "title": title, "name": name, "arguments": arguments})
        result = await gate.call(call, principal, run)
        results.append(result)
        emit(
            {
                "type": "tool_result",
                "step": i,
                "name": name,
                "is_error": result.is_error,
                "error_code": str(result.error.code) if result.error else None,
                "replayed": result.replayed,
                "handle": result.handle,
                "content": result.content,
            }
        )
    emit({"type": "run_finished", "calls": len(results), "errors": sum(r.is_error for r in results)})
    return results


def demo_command(
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON Lines, one event per line"),
) -> None:
    """Run the offline demo through the real gate."""
    console = Console()

    def emit(event: dict[str, Any]) -> None:
        if as_json:
            typer.echo(json.dumps(event, ensure_ascii=False))
            return
        if event["type"] == "tool_call":
            console.rule(f"[bold]{event['step']}. {event['title']}")
            console.print(f"[cyan]model proposes[/cyan] {event['name']}({json.dumps(event['arguments'])})")
        elif event["type"] == "tool_result":
            style = "red" if event["is_error"] else "green"
            label = event["error_code"] or "ok"
            console.print(Panel(escape(event["content"]), title=f"[{style}]{label}[/{style}]", expand=False))
        elif event["type"] == "run_finished":
            console.rule(f"[bold]{event['calls']} calls, {event['errors']} refused or failed, 0 exceptions")

    anyio.run(run_demo, emit)
