"""HMAC-signed tokens: the one primitive behind handles and approval request state.

A stateless server gives its clients opaque strings to bring back later (seed 004's export
handle; the 2026-07-28 `requestState` of an approval). Whatever comes back is attacker-controlled,
so every such string is `v1.<payload>.<mac>`: the payload is base64url canonical JSON, the MAC is
HMAC-SHA256 under a secret every server process shares, with a purpose label bound in so a token
minted for one purpose (a handle) can never be replayed as another (approval state).

Payloads are signed, not encrypted: put nothing secret in them. Verification is constant-time and
fails closed with one exception type whose message is for logs only.

Secrets shorter than 32 bytes (the HMAC-SHA256 output size, RFC 2104 §3 / RFC 7518 §3.2) are a
`UserError`: a short shared secret can be brute-forced offline from any one token a client holds.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from ..exceptions import UserError

__all__ = ["InvalidToken", "MIN_SECRET_BYTES", "Signer", "load_secret"]

_PREFIX = "v1"
MIN_SECRET_BYTES = 32


class InvalidToken(Exception):
    """A token failed verification (malformed, wrong MAC, wrong purpose, expired). Log-only reason."""


def load_secret(value: str | bytes | None = None, *, env: str = "MAITRE_MCP_SECRET") -> bytes:
    """A signing secret from `value`, else the environment variable `env`, else a fresh random one.

    A fresh secret only suits a single process: handles and approval state minted by another
    process (or before a restart) then fail verification. Multi-process servers share one.

    Raises:
        UserError: the secret is shorter than 32 bytes.
    """
    from_env = value is None
    raw = os.environ.get(env) if from_env else value
    if raw is None:
        return os.urandom(MIN_SECRET_BYTES)
    secret = raw.encode() if isinstance(raw, str) else bytes(raw)
    if len(secret) < MIN_SECRET_BYTES:
        source = f"{env} (the MCP signing secret)" if from_env else "the MCP signing secret"
        raise UserError(
            f"{source} must be at least {MIN_SECRET_BYTES} bytes, got {len(secret)};"
            " generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return secret


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(raw) != text:
        raise ValueError("non-canonical base64url")
    return raw


class Signer:
    """Sign and verify small JSON payloads for one purpose.

    `keys[0]` signs; every key verifies, so a secret can be rotated without breaking tokens that
    are still in flight (`[new, old]`, then `[new]` once the longest TTL has passed).
    """

    def __init__(self, keys: bytes | Sequence[bytes], *, purpose: str) -> None:
        ring = [keys] if isinstance(keys, bytes | bytearray) else list(keys)
        if not ring:
            raise ValueError("Signer needs at least one key")
        for key in ring:
            if len(key) < MIN_SECRET_BYTES:
                raise UserError(f"signing keys must be at least {MIN_SECRET_BYTES} bytes, got {len(key)}")
        # Derive a per-purpose key so the same operator secret never MACs two kinds of token alike.
        self._keys = [
            hmac.new(bytes(k), b"maitre/mcp/" + purpose.encode(), hashlib.sha256).digest() for k in ring
        ]
        self.purpose = purpose

    def sign(self, payload: dict[str, Any], *, ttl_s: float | None = None) -> str:
        """Return `v1.<payload>.<mac>`; with `ttl_s`, the payload gets an `exp` claim."""
        body = dict(payload)
        if ttl_s is not None:
            body["exp"] = int(time.time() + ttl_s)
        data = _b64(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
        mac = hmac.new(self._keys[0], f"{_PREFIX}.{data}".encode(), hashlib.sha256).digest()
        return f"{_PREFIX}.{data}.{_b64(mac)}"

    def verify(self, token: object) -> dict[str, Any]:
        """The payload of a token this signer (or a ring key) minted, unexpired.

        Raises:
            InvalidToken: for anything else.
        """
        if not isinstance(token, str) or token.count(".") != 2:
            raise InvalidToken("malformed")
        prefix, data, mac_text = token.split(".")
        if prefix != _PREFIX:
            raise InvalidToken("unknown version")
        try:
            mac = _unb64(mac_text)
            raw = _unb64(data)
        except ValueError as exc:
            raise InvalidToken("malformed") from exc
        signed = f"{prefix}.{data}".encode()
        if not any(
            hmac.compare_digest(mac, hmac.new(k, signed, hashlib.sha256).digest()) for k in self._keys
        ):
            raise InvalidToken("bad mac")
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise InvalidToken("malformed payload") from exc
        if not isinstance(payload, dict):
            raise InvalidToken("malformed payload")
        exp = payload.get("exp")
        if exp is not None and (not isinstance(exp, int | float) or time.time() >= exp):
            raise InvalidToken("expired")
        return payload
