"""A process that runs one write call through the gate on a shared store, for crash-recovery tests.

`python recovery_worker.py STORE_URL LEDGER MODE RECONCILE`

- MODE `after`: the tool writes the ledger (the side effect), prints IN_TOOL and hangs (the test
  SIGKILLs it there: the effect happened). `before`: prints IN_TOOL and hangs before writing (the
  effect did not happen). `normal`: runs the call and prints the outcome as JSON.
- RECONCILE `ledger`: the tool declares `reconcile(key)`, which looks for the key in the ledger
  (as a payment provider is asked "did charge <key> go through?"); `none`: no hook.
"""

import json
import sys
import time

import anyio

from maitre import Gate, IdempotencyKey, Principal, Toolbox, ToolCall
from maitre.stores import open_stores


def main() -> None:
    url, ledger, mode, reconcile = sys.argv[1:5]
    box = Toolbox()

    def lines() -> list[str]:
        try:
            with open(ledger) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def check(key: IdempotencyKey) -> dict | None:
        """Did the refund with this key happen? The ledger knows."""
        done = [line for line in lines() if line.endswith(" " + key)]
        return {"refunded": done[0].split()[0], "reconciled": True} if done else None

    @box.tool(
        effect="write",
        business_key=("order_id",),
        timeout=60,
        reconcile=check if reconcile == "ledger" else None,
    )
    def refund(order_id: str, key: IdempotencyKey) -> dict:
        """Refund an order (appends to the ledger: the side effect)."""
        if mode == "before":
            print("IN_TOOL", flush=True)
            time.sleep(60)
        with open(ledger, "a") as f:
            f.write(f"{order_id} {key}\n")
            f.flush()
        if mode == "after":
            print("IN_TOOL", flush=True)
            time.sleep(60)
        return {"refunded": order_id}

    async def run() -> None:
        async with await open_stores(url) as stores:
            gate = Gate(box, stores=stores)
            started = time.monotonic()
            result = await gate.call(
                ToolCall(id="c", name="refund", arguments={"order_id": "ORD-1"}),
                Principal(user="u", tenant="t"),
            )
            print(
                json.dumps(
                    {
                        "code": str(result.error.code) if result.error else "ok",
                        "replayed": result.replayed,
                        "structured": result.structured,
                        "content": result.content,
                        "seconds": time.monotonic() - started,
                    }
                )
            )

    anyio.run(run)


if __name__ == "__main__":
    main()
