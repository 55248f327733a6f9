"""The tamper-evident audit log: canonical hashing, sealing and verification of the chain."""

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
