"""Who holds an in-flight idempotency key, and whether that process still exists.

A key is `in_flight` while its owner executes the side effect. When the owner crashes (SIGKILL,
OOM, a power cut of one container), nobody completes the key; a retry must not be told "being
executed right now" for as long as the lease runs. So the record names its owner:

    {"host": ..., "boot": ..., "pidns": ..., "pid": ..., "start": ..., "id": ...}

- `host`, `boot` (the kernel's boot id) and `pidns` (the pid namespace) say whether a pid in the
  record means anything here: only on the same machine, same boot and same pid namespace can this
  process look the owner up. Anywhere else the answer is "unknown" and only the lease decides.
- `pid` plus `start` (the process start time from `/proc/<pid>/stat`, in clock ticks since boot)
  identify one process even after its pid is reused; `id` is random per process, so a record of
  this very process (the same pid) is recognised as ours and not as a stranger's.

`owner_status` answers `alive`, `dead` or `unknown`; only `dead` lets a retry stop waiting.
Where `/proc` is missing (macOS) the check falls back to `os.kill(pid, 0)`, which cannot see pid
reuse: a reused pid reads as alive, so the retry waits for the lease - the safe side.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from typing import Literal

__all__ = ["OwnerStatus", "current_owner", "owner_status"]

OwnerStatus = Literal["alive", "dead", "unknown"]

_identity: tuple[int, dict[str, object], str] | None = None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _machine() -> dict[str, object]:
    pidns = None
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pass
    return {"host": socket.gethostname(), "boot": _read("/proc/sys/kernel/random/boot_id"), "pidns": pidns}


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a process from `/proc/<pid>/stat`, or None."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    try:
        fields = text[text.rindex(")") + 2 :].split()  # the name, in parentheses, may hold spaces
        return fields[0], int(fields[19])
    except (ValueError, IndexError):
        return None


def _current() -> tuple[int, dict[str, object], str]:
    global _identity
    pid = os.getpid()
    if _identity is None or _identity[0] != pid:  # first use, or a forked child: a new process
        stat = _stat(pid)
        fields = {**_machine(), "pid": pid, "start": stat[1] if stat else None, "id": secrets.token_hex(8)}
        _identity = (pid, fields, json.dumps(fields, separators=(",", ":"), sort_keys=True))
    return _identity


def current_owner() -> str:
    """This process, as stored in the `owner` column of the keys it claims."""
    return _current()[2]


def owner_status(owner: str | None) -> OwnerStatus:
    """Whether the process named by a stored owner still runs (as far as this host can tell)."""
    if not owner:
        return "unknown"  # a record written before owners were stored
    try:
        fields = json.loads(owner)
        pid = int(fields["pid"])
    except (ValueError, TypeError, KeyError):
        return "unknown"
    mine = _current()[1]
    if any(fields.get(name) != mine[name] for name in ("host", "boot", "pidns")):
        return "unknown"  # another machine, boot or container: its pids are not ours to look up
    if pid == mine["pid"]:
        return "alive" if fields.get("id") == mine["id"] else "dead"  # our pid, an earlier process
    if os.path.isdir("/proc/self"):
        stat = _stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return "dead"  # gone, or a zombie nobody reaped yet
        start = fields.get("start")
        return "dead" if start is not None and start != stat[1] else "alive"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        return "alive"
    except OSError:
        return "unknown"
    return "alive"
