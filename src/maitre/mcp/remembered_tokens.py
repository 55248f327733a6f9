"""`RememberedTokens`: a JWT the server already verified is not verified again on the next request.

Why: an MCP client sends the same bearer token with every request, and checking it (signature,
`iss`, `aud`, `exp`, `nbf`, claims to a principal) was ~5% of a governed call's CPU at the gateway
(benchmarks/gateway_profile.py: ~330 µs of a call, ~60 µs remembered). The answer for one token
cannot change while it is valid, except when the issuer drops the signing key, which the JWKS cache
(`auth.JWKSKeys`, 300 s by default) already takes that long to see.

What is kept, and for how long:

- only **accepted** tokens (a refused one is checked again every time, so a flood of forged tokens
  fills nothing), keyed by the SHA-256 of the token (the token itself is not held as a key);
- until the token's own `exp` or `ttl_s` (60 s) after it was verified, whichever is first, so an
  expired token is refused at once, by the verifier, as before (no leeway is granted from here);
- at most `max_entries` (1024): expired entries go first, then the oldest.

Only a `JWTVerifier` is wrapped (`remembered`): `StaticTokens` is already a table look-up, and a
verifier of another kind may depend on more than the token.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import jwt

from ..types import Principal
from .auth import BearerVerifier, JWTVerifier

__all__ = ["DEFAULT_MAX_ENTRIES", "DEFAULT_TTL_S", "RememberedTokens", "remembered"]

DEFAULT_TTL_S = 60.0
"""The longest a verified token is remembered (its own `exp` may end it sooner)."""
DEFAULT_MAX_ENTRIES = 1024
"""The most tokens remembered at once."""


class RememberedTokens:
    """A `BearerVerifier` that remembers what `inner` (a `JWTVerifier`) accepted; see the module."""

    def __init__(
        self,
        inner: JWTVerifier,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError("ttl_s must be positive and max_entries at least 1")
        self.inner = inner
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._kept: dict[bytes, tuple[float, Principal]] = {}
        self.verified = 0
        """How many times `inner` was asked (a miss), for tests and benchmarks."""

    async def verify(self, token: str) -> Principal | None:
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self._clock()
        hit = self._kept.get(key)
        if hit is not None:
            if hit[0] > now:
                return hit[1]
            del self._kept[key]
        self.verified += 1
        principal = await self.inner.verify(token)
        if principal is None:
            return None
        until = min(now + self.ttl_s, _expiry(token))
        if until > now:
            self._keep(key, until, principal, now)
        return principal

    def _keep(self, key: bytes, until: float, principal: Principal, now: float) -> None:
        if len(self._kept) >= self.max_entries:
            for old in [k for k, (end, _) in self._kept.items() if end <= now]:
                del self._kept[old]
            while len(self._kept) >= self.max_entries:
                del self._kept[next(iter(self._kept))]
        self._kept[key] = (until, principal)

    def __len__(self) -> int:
        return len(self._kept)


def _expiry(token: str) -> float:
    """The `exp` of a token the verifier has just accepted (its signature is checked, so the
    payload is the issuer's); 0 (remember nothing) when it cannot be read as a number."""
    try:
        claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return 0.0
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else 0.0


def remembered(verifier: BearerVerifier) -> BearerVerifier:
    """`verifier`, remembering accepted tokens if it is a `JWTVerifier`; any other kind unchanged."""
    return RememberedTokens(verifier) if isinstance(verifier, JWTVerifier) else verifier
