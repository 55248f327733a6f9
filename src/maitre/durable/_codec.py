"""What a durable step records: model responses and gate results as JSON text.

DBOS pickles a step's output into its system database. maitre records plain JSON text instead, so
what is kept is exactly what is written here (no provider objects, no exception pickles) and reads
back the same in any process and any Python version that runs maitre.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..context import RunContext
from ..models.base import ModelError, ModelResponse, Usage
from ..types import ApprovalTicket, Provenance, ToolCall, ToolError, ToolResult, Trust

__all__ = [
    "apply_context",
    "decode_model",
    "decode_result",
    "encode_model",
    "encode_model_error",
    "encode_result",
]


def _call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments, "run_id": call.run_id}


def encode_model(response: ModelResponse) -> str:
    """A model response as JSON (its `raw` provider object is never kept)."""
    return json.dumps(
        {
            "text": response.text,
            "tool_calls": [_call(c) for c in response.tool_calls],
            "usage": response.usage.to_dict(),
            "stop_reason": response.stop_reason,
            "model": response.model,
            "provider_state": response.provider_state,
        },
        default=str,
    )


def encode_model_error(error: ModelError) -> str:
    """A model call that failed, so the replay fails the same way (the loop turns it into a stop)."""
    return json.dumps(
        {"model_error": {"message": str(error), "status": error.status, "retryable": error.retryable}}
    )


def decode_model(text: str) -> ModelResponse:
    """The response `encode_model` recorded; raises the recorded `ModelError` for a failed call."""
    data = json.loads(text)
    failed = data.get("model_error")
    if failed is not None:
        raise ModelError(
            failed["message"], status=failed.get("status"), retryable=bool(failed.get("retryable"))
        )
    return ModelResponse(
        text=data.get("text", ""),
        tool_calls=[
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"], run_id=c.get("run_id"))
            for c in data.get("tool_calls", [])
        ],
        usage=Usage(**data.get("usage", {})),
        stop_reason=data.get("stop_reason", "end_turn"),
        model=data.get("model", ""),
        provider_state=data.get("provider_state"),
    )


def encode_result(result: ToolResult, context: RunContext | None) -> str:
    """A gate result, and the run's gate state right after it (loop guard, budgets, taint)."""
    return json.dumps(
        {"result": result.to_dict(), "context": context.to_dict() if context is not None else None},
        default=str,
    )


def decode_result(text: str) -> tuple[ToolResult, dict[str, Any] | None]:
    """(the recorded result, the run's recorded gate state or None)."""
    data = json.loads(text)
    r = data["result"]
    provenance = r.get("provenance")
    approval = r.get("approval")
    error = r.get("error")
    result = ToolResult(
        call_id=r["call_id"],
        name=r["name"],
        is_error=bool(r["is_error"]),
        content=r["content"],
        structured=r.get("structured"),
        error=ToolError.from_dict(error) if error else None,
        trust=Trust(r.get("trust", "trusted")),
        provenance=Provenance(**provenance) if provenance else None,
        replayed=bool(r.get("replayed", False)),
        handle=r.get("handle"),
        usage=dict(r.get("usage") or {}),
        approval=ApprovalTicket.from_dict(approval) if approval else None,
    )
    return result, data.get("context")


_CONTEXT_FIELDS = tuple(f.name for f in dataclasses.fields(RunContext))


def apply_context(run: RunContext, recorded: dict[str, Any]) -> None:
    """Make `run` (the loop's own object, which it keeps using) hold the recorded gate state."""
    fresh = RunContext.from_dict(recorded)
    for name in _CONTEXT_FIELDS:
        setattr(run, name, getattr(fresh, name))
