"""The dead-owner rule, kept where it first lived: it is `maitre.storage.owners` (below both the gate's
idempotency and the resume worker's run claims, which apply the same rule)."""

from __future__ import annotations

from ..storage.owners import OwnerStatus, current_owner, owner_status

__all__ = ["OwnerStatus", "current_owner", "owner_status"]
