"""Export: everything stored about one user as one JSON-ready document (the right of access).

The document is what the store holds, not a view of it: every fact with its history (superseded
and retracted rows included), every summary with its lineage, and the profile text. What was
deleted is not in it, and tombstones are not exported (they are digests, never text).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .model import Fact, Summary

__all__ = ["export_document"]


def export_document(
    *,
    tenant: str,
    user: str,
    exported_at: datetime,
    profile: str,
    facts: Sequence[Fact],
    summaries: Sequence[Summary],
) -> dict[str, Any]:
    """The export of one user: `tenant`, `user`, `exported_at`, `profile`, `facts`, `summaries`."""
    return {
        "tenant": tenant,
        "user": user,
        "exported_at": exported_at.isoformat(),
        "profile": profile,
        "facts": [f.to_dict() for f in facts],
        "summaries": [
            {
                "id": s.id,
                "kind": s.kind,
                "text": s.text,
                "sources": s.sources,
                "created_at": s.created_at.isoformat() if s.created_at else None,
            }
            for s in summaries
        ],
    }
