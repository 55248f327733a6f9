"""A process that runs one write call through the gate on a shared SQLite store.

`python crash_worker.py DB LEDGER MODE`: MODE `hang` blocks inside the tool after writing the ledger
(the test kills it with SIGKILL there); MODE `normal` runs the call and prints the outcome.
"""

import json
import sys
import time

import anyio

from maitre import Gate, Principal, Toolbox, ToolCall
from maitre.stores import open_stores


def main() -> None:
    db, ledger, mode = sys.argv[1:4]
    box = Toolbox()

    @box.tool(effect="write", business_key=("order_id",), timeout=60)
    def refund(order_id: str) -> str:
        """Refund an order (appends to the ledger: the side effect)."""
        with open(ledger, "a") as f:
            f.write(order_id + "\n")
            f.flush()
        if mode == "hang":
            print("IN_TOOL", flush=True)
            time.sleep(60)
        return "refunded"

    async def run() -> None:
        async with await open_stores(db) as stores:
            gate = Gate(box, stores=stores)
            result = await gate.call(
                ToolCall(id="c", name="refund", arguments={"order_id": "ORD-1"}),
                Principal(user="u", tenant="t"),
            )
            print(
                json.dumps(
                    {"code": str(result.error.code) if result.error else "ok", "replayed": result.replayed}
                )
            )

    anyio.run(run)


if __name__ == "__main__":
    main()
