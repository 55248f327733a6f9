"""The weak server's tools imported into maitre: what maitre's MCP client does with a hostile server.

    maitre redteam examples/redteam/guarded_import.py:make_gate --tenant acme \
        --foreign-id ticket_id=T-2001 --secret CANARY-GLOBEX-4417

`make_gate` starts `weak_server.py` on stdio and imports its tools with `Toolbox.from_mcp`, as an
application (or `maitre gateway`) would: namespaced `weak.*`, untrusted, scanned (`scan="block"`
keeps out the poisoned `lookup_weather` and `send_email`), held to the definitions it first listed
and re-checked before every call (`recheck_interval_s=0`: the weak server's rug pull on `refund`
withdraws it), and, with no `trust_annotations`, every imported tool counts as destructive, high
risk and open world, so the default policy holds each call for a person. Nothing fixes the weak
server's code: what this shows is what the gate in front of it stops.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from maitre import Gate, Toolbox

WEAK = Path(__file__).resolve().parent / "weak_server.py"


async def make_gate() -> Gate:
    """A gate (default policy) over the weak server's tools, imported on stdio."""
    command = [sys.executable, str(WEAK), "--stdio"]
    effects = os.environ.get("MAITRE_REDTEAM_EFFECTS")
    if effects:  # the stdio child gets a clean environment: pass the side channel on explicitly
        command += ["--effects", effects]
    box = await Toolbox.from_mcp(shlex.join(command), namespace="weak", scan="block", recheck_interval_s=0)
    return Gate(box)
