"""The tamper-evident audit log: canonical hashing, sealing and verification of the chain.

Layer: core, below storage. The stores import `maitre.audit` to seal entries inside their append
transaction; the audit layer imports no store (it reads one through the `AuditSource` protocol)
and no door (`agent`, `models`, `mcp`, `memory`, `search`, `cli`). See `maitre` for the rules.
"""

from maitre.audit.canonical import (
    DEFAULT_REDACT_KEYS,
    REDACTED,
    canonical_bytes,
    canonical_json,
    digest,
    redact,
)
from maitre.audit.chain import (
    GENESIS_HASH,
    AuditEntry,
    AuditSource,
    ChainVerifier,
    VerifyReport,
    entry_hash,
    iter_store,
    seal,
    verify,
    verify_store,
)

__all__ = [
    "AuditEntry",
    "AuditSource",
    "ChainVerifier",
    "DEFAULT_REDACT_KEYS",
    "GENESIS_HASH",
    "REDACTED",
    "VerifyReport",
    "canonical_bytes",
    "canonical_json",
    "digest",
    "entry_hash",
    "iter_store",
    "redact",
    "seal",
    "verify",
    "verify_store",
]
