"""Who is calling: bearer tokens become a `Principal`, never the model's say-so.

The MCP server takes the principal for the gate from the authenticated request. Verification is
pluggable (`BearerVerifier`: token in, `Principal` or None out); the built-in `JWTVerifier` uses
pyjwt with the checks the MCP authorization spec and seed 003 require: signature, issuer,
audience (a token minted for another service is refused - the confused-deputy defence) and
expiry. The verifier plugs into the official SDK's bearer middleware through `SdkTokenVerifier`,
so the SDK's 401/403 + `WWW-Authenticate` answers and its request-state principal binding apply
unchanged; the principal rides in `AccessToken.claims` and is read back per request with
`principal_from_request()`.

Over stdio there is no token: the process inherits its caller's identity (seed 003 §11), so the
principal comes from configuration (`--user/--tenant/--scope` on `maitre serve`).

A shared HMAC key (HS256/384/512) shorter than its hash output - 32, 48, 64 bytes (RFC 7518 §3.2) -
is refused when the verifier is built: anyone holding one token could brute-force a short key
offline and then mint tokens for any user and tenant.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier

from ..exceptions import UserError
from ..types import Principal

__all__ = [
    "BearerVerifier",
    "JWTVerifier",
    "PRINCIPAL_CLAIM",
    "SdkTokenVerifier",
    "StaticTokens",
    "principal_from_request",
]

logger = logging.getLogger(__name__)

_HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")

PRINCIPAL_CLAIM = "maitre/principal"
"""Key under `AccessToken.claims` where the verified principal travels through the SDK."""


class BearerVerifier(Protocol):
    """**Protocol:** turn a bearer token into a principal, or None when it is not acceptable."""

    async def verify(self, token: str) -> Principal | None: ...


@dataclass(kw_only=True)
class JWTVerifier:
    """Verify JWT access tokens with pyjwt: signature, `iss`, `aud`, `exp` (required), `nbf`.

    Claims map to the principal: `sub` → user, `tenant_claim` → tenant (default `tenant`),
    `scope` (space separated) or `scp` (list) → scopes, `roles` → roles.
    """

    key: Any
    """The HMAC secret, or the issuer's public key (PEM text or a key object), or a `jwt.PyJWKClient`."""
    issuer: str
    """Expected `iss`."""
    audience: str | Sequence[str]
    """This server's identifier; tokens for any other audience are refused."""
    algorithms: Sequence[str] = ("RS256", "ES256", "EdDSA")
    """Accepted algorithms. Never includes `none`; list HS256 explicitly for shared-secret setups."""
    leeway_s: float = 30.0
    """Clock skew tolerated on `exp`/`nbf`/`iat`."""
    tenant_claim: str = "tenant"
    default_tenant: str | None = None
    """Tenant when the token has no tenant claim; None refuses such tokens."""

    def __post_init__(self) -> None:
        hmac_bits = [int(a[2:]) for a in self.algorithms if a in _HMAC_ALGORITHMS]
        if not hmac_bits or not isinstance(self.key, str | bytes | bytearray):
            return
        needed = max(hmac_bits) // 8
        size = len(self.key.encode() if isinstance(self.key, str) else self.key)
        if size < needed:
            raise UserError(
                f"the JWT HMAC key must be at least {needed} bytes for HS{max(hmac_bits)}, got {size};"
                " use a longer random secret or an asymmetric algorithm (RS256, ES256, EdDSA)"
            )

    async def verify(self, token: str) -> Principal | None:
        key = self.key
        try:
            if isinstance(key, jwt.PyJWKClient):
                key = (await anyio.to_thread.run_sync(key.get_signing_key_from_jwt, token)).key
            claims = jwt.decode(
                token,
                key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("bearer token refused: %s", type(exc).__name__)
            return None
        tenant = claims.get(self.tenant_claim, self.default_tenant)
        if not isinstance(tenant, str) or not tenant:
            logger.info("bearer token refused: no %r claim", self.tenant_claim)
            return None
        return Principal(
            user=str(claims["sub"]),
            tenant=tenant,
            scopes=frozenset(_scopes(claims)),
            roles=frozenset(str(r) for r in claims.get("roles") or ()),
        )


def _scopes(claims: Mapping[str, Any]) -> Iterable[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        yield from scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        yield from (str(s) for s in scp)
    elif isinstance(scp, str):
        yield from scp.split()


@dataclass(kw_only=True)
class StaticTokens:
    """A fixed token → principal table, for tests, demos and service accounts."""

    tokens: Mapping[str, Principal] = field(default_factory=dict)

    async def verify(self, token: str) -> Principal | None:
        return self.tokens.get(token)


class SdkTokenVerifier(TokenVerifier):
    """Adapts a `BearerVerifier` to the SDK's `TokenVerifier`, carrying the principal in the claims."""

    def __init__(
        self, verifier: BearerVerifier, *, client_id: Callable[[Principal], str] | None = None
    ) -> None:
        self.verifier = verifier
        self._client_id = client_id or (lambda p: f"{p.tenant}/{p.user}")

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = await self.verifier.verify(token)
        if principal is None:
            return None
        return AccessToken(
            token=token,
            client_id=self._client_id(principal),
            scopes=sorted(principal.scopes),
            subject=principal.user,
            claims={PRINCIPAL_CLAIM: principal.to_dict(), "iss": f"maitre:{principal.tenant}"},
        )


def principal_from_request() -> Principal | None:
    """The principal of the HTTP request being served (None when it was not authenticated)."""
    token = get_access_token()
    if token is None or not token.claims or PRINCIPAL_CLAIM not in token.claims:
        return None
    return Principal.from_dict(token.claims[PRINCIPAL_CLAIM])
