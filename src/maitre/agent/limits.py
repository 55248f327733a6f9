"""The loop's brakes (seeds 001 and 002). Every default is finite.

Counters alone (LangGraph's default recursion limit is 10,007) do not stop an agent that is stuck
but under its step cap, so besides steps, time, tokens and cost there is no-progress detection:
the gate's loop guard (the same call, the same error) and N steps that brought no new information.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Limits", "StopReason"]


class StopReason(StrEnum):
    """Why a run ended (or paused)."""

    COMPLETED = "completed"
    """The model answered without asking for more tools."""
    APPROVAL_REQUIRED = "approval_required"
    """Paused: a call waits for a human decision."""
    MAX_STEPS = "max_steps"
    MAX_SECONDS = "max_seconds"
    MAX_INPUT_TOKENS = "max_input_tokens"
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    MAX_TOTAL_TOKENS = "max_total_tokens"
    MAX_COST = "max_cost"
    LOOP_DETECTED = "loop_detected"
    """The gate refused repeated calls or errors and the model kept going."""
    NO_PROGRESS = "no_progress"
    """N steps in a row brought no new information."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """Every call of a step was refused by a gate budget."""
    MODEL_ERROR = "model_error"
    """The model could not be reached (after the adapter's retries)."""
    NEEDS_HUMAN = "needs_human"
    """Stopped for a person: a write's outcome is unknown after a crash and the tool has no
    `reconcile` hook to settle it (maitre.durable), or a saga's compensation could not run."""


@dataclass(kw_only=True)
class Limits:
    """Brakes for one run."""

    max_steps: int = 12
    """Model calls per run (seed 001's MAX_STEPS is 8; a step is one model call plus its tools)."""
    max_seconds: float = 120.0
    """Wall time per run, counted across pauses only while the run is active."""
    max_input_tokens: int = 400_000
    max_output_tokens: int = 40_000
    max_total_tokens: int = 400_000
    max_cost_usd: float = 2.0
    """Cost from the price table of the model that answered."""
    max_tool_calls_per_step: int = 16
    """A model asking for more parallel calls than this gets the rest refused."""
    no_progress_steps: int = 3
    """Steps in a row with no new information before the run stops."""
    loop_refusals: int = 2
    """LOOP_DETECTED answers the model may receive before the run stops."""
    max_output_tokens_per_call: int = 4096
