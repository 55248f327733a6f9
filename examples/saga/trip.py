"""Seed 003 §6: book a flight, then create the calendar event - and the calendar is down.

    python examples/saga/trip.py --policy compensate   # retry, then cancel the flight (the runtime does)
    python examples/saga/trip.py --policy flag         # retry, then keep the ticket and flag a person

The flight cannot be rolled back, so it declares a compensation (`cancel_flight`, a governed tool
taking the booking's arguments and its result). The host groups the two calls into a saga with a
policy per step. The compensation is run by the runtime, through the gate (audited, with a key the
runtime mints), exactly once - run the script again with the same `--saga-id` and `--db`: nothing
is booked or cancelled twice. No model is involved, and none could skip or invent a compensation:
no model-facing toolbox holds `cancel_flight`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import anyio

from maitre import Principal, Toolbox, ToolError
from maitre.context import IdempotencyKey
from maitre.durable.saga import FLAG_FOR_HUMAN, RETRY_THEN_COMPENSATE, Saga, SagaOutcome
from maitre.gate import Gate
from maitre.stores import open_stores

ALICE = Principal(user="alice", tenant="acme")


def ledger() -> Path:
    return Path(os.environ.get("TRIP_LEDGER", Path(tempfile.gettempdir()) / "trip-ledger.txt"))


def write(line: str) -> None:
    with ledger().open("a") as f:
        f.write(line + "\n")


def cancel_flight(flight: str, day: str, result: str) -> str:
    """Cancel a booking made by book_flight (the compensation; takes its arguments and result)."""
    write(f"cancelled {flight} {day} ({result})")
    return f"Cancelled {flight} on {day}."


def toolbox() -> Toolbox:
    """The trip tools a host - or an agent - calls; cancel_flight is in no toolbox: only the runtime
    runs it, when a later step of the saga fails."""
    trip = Toolbox("trip")

    @trip.tool(effect="write", business_key=("flight", "day"), compensate=cancel_flight)
    def book_flight(flight: str, day: str, key: IdempotencyKey) -> str:
        """Book a confirmed, non-refundable-by-rollback seat on a flight."""
        write(f"booked {flight} {day} {key}")
        return f"Booked {flight} on {day}, PNR {str(key)[-6:].upper()}."

    @trip.tool(effect="write")
    def create_event(title: str, day: str) -> str:
        """Put the trip in the calendar."""
        write(f"calendar-attempt {title} {day}")
        raise ToolError("TEMPORARY_UNAVAILABLE", "The calendar service is down.", retryable=True)

    return trip


async def plan_trip(gate: Gate, *, policy: str, saga_id: str) -> SagaOutcome:
    step_policy = RETRY_THEN_COMPENSATE if policy == "compensate" else FLAG_FOR_HUMAN
    async with Saga(gate, ALICE, saga_id=saga_id) as saga:
        await saga.call("trip.book_flight", {"flight": "AI-101", "day": "2026-12-24"})
        await saga.call("trip.create_event", {"title": "Pune trip", "day": "2026-12-24"}, policy=step_policy)
    return saga.outcome


async def main(args: argparse.Namespace) -> None:
    trip = toolbox()
    async with await open_stores(args.db) as stores:
        gate = Gate(trip, stores=stores)
        outcome = await plan_trip(gate, policy=args.policy, saga_id=args.saga_id)
    print(f"saga {outcome.saga_id}: {outcome.status}")
    print(f"  why: {outcome.reason}")
    for step in outcome.steps:
        undone = f" -> {step.compensation.content}" if step.compensation else ""
        print(f"  {step.index}. {step.tool}: {step.status} after {step.attempts} attempt(s){undone}")
    print(f"ledger ({ledger()}):")
    print("  " + "\n  ".join(ledger().read_text().splitlines()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", choices=["compensate", "flag"], default="compensate")
    parser.add_argument("--db", default=str(Path(tempfile.gettempdir()) / "trip-saga.db"))
    parser.add_argument("--saga-id", default="trip-42")
    anyio.run(main, parser.parse_args())
